# The example workspace, except that the process hands its agent a wrong token:
# the infrastructure applies fine, but the agent can never connect, so the
# workspace must show as unhealthy rather than ready.

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
}

resource "abode_process" "workspace" {
  count   = data.abode_workspace.me.start_count
  command = ["sh", "-c", abode_agent.main[0].init_script]
  dir     = abode_volume.home.path
  env = {
    ABODE_AGENT_TOKEN = "deliberately-not-the-agent-token"
    HOME              = abode_volume.home.path
  }
}
