# The example workspace with a startup script: the agent runs it in the home
# volume with the agent's env, and is ready once it exits 0. The agent writes
# the script's output into the volume too (ABODE_AGENT_LOG_DIR), where the
# test can read it.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_workspace" "me" {}

resource "abode_volume" "home" {
  name = "home-${data.abode_workspace.me.id}"
}

resource "abode_agent" "main" {
  count = data.abode_workspace.me.start_count
  os    = "linux"
  arch  = "amd64"
  dir   = abode_volume.home.path
  env = {
    GREETING = "hello from the startup script"
  }
  startup_script = <<-EOT
    printf '%s\n' "$GREETING" > startup-marker
    echo "token in the script's environment: $${ABODE_AGENT_TOKEN:-none}"
    echo "startup done"
  EOT
}

resource "abode_process" "workspace" {
  count   = data.abode_workspace.me.start_count
  command = ["sh", "-c", abode_agent.main[0].init_script]
  dir     = abode_volume.home.path
  env = {
    ABODE_AGENT_TOKEN   = abode_agent.main[0].token
    ABODE_AGENT_LOG_DIR = "${abode_volume.home.path}/.logs"
    HOME                = abode_volume.home.path
  }
}
