# A startup script that runs a while, then fails with status 3: the build
# succeeds, the agent stays connected (heartbeats go on while the script runs
# and after it failed), and the workspace is unhealthy with lifecycle
# start_error.

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
  count          = data.abode_workspace.me.start_count
  os             = "linux"
  arch           = "amd64"
  dir            = abode_volume.home.path
  startup_script = "echo installing; sleep 7; echo 'cannot install' >&2; exit 3"
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
