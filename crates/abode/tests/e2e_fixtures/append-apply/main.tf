# Every apply leaves a trace: one line appended to a file in the workspace's
# home volume, naming the build (from the environment contract), its
# transition and the plan's timestamp, which the state keeps too. A build
# applied twice would show twice; the stored state names the last apply that
# ran. The apply takes `seconds` (mutable), long enough to kill the
# provisioner running it or cancel it in the middle.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_workspace" "me" {}

data "abode_parameter" "seconds" {
  name    = "seconds"
  type    = "number"
  default = 1
  mutable = true
}

# Kept across stops: it holds the trace.
resource "abode_volume" "home" {
  name = "home-${data.abode_workspace.me.id}"
}

# Only while started: its directory must exist exactly when the state has it.
resource "abode_volume" "scratch" {
  count = data.abode_workspace.me.start_count
  name  = "scratch-${data.abode_workspace.me.id}"
}

resource "terraform_data" "apply" {
  triggers_replace = plantimestamp()
  input            = plantimestamp()
  depends_on       = [abode_volume.scratch]

  provisioner "local-exec" {
    command = "echo \"$ABODE_WORKSPACE_BUILD_ID $ABODE_WORKSPACE_TRANSITION ${self.input}\" >> '${abode_volume.home.path}/applies' && sleep ${data.abode_parameter.seconds.value}"
  }
}
