# A template that defeats prebuilds: its protected home volume is named after
# the owner, so a claim (which changes the owner) replaces it. The claim is
# allowed (a prebuild never held anyone's data), recorded and reported. Its
# agent has a claim script, which the running agent runs once it learns of
# the claim.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_workspace" "me" {}

data "abode_workspace_owner" "me" {}

data "abode_workspace_preset" "solo" {
  name = "solo"
  prebuilds {
    instances = 1
  }
}

resource "abode_volume" "home" {
  name = "home-${data.abode_workspace_owner.me.name}-${data.abode_workspace.me.id}"
}

resource "abode_protect" "home" {
  resource_id = abode_volume.home.id
  mode        = "block"
}

# The agent's directory is a second volume that keeps the workspace id only:
# it survives the claim, so the agent and its process are not replaced.
resource "abode_volume" "work" {
  name = "work-${data.abode_workspace.me.id}"
}

resource "abode_agent" "main" {
  count        = data.abode_workspace.me.start_count
  os           = "linux"
  arch         = "amd64"
  dir          = abode_volume.work.path
  claim_script = "printf '%s %s\\n' \"$ABODE_WORKSPACE_OWNER_NAME\" \"$ABODE_WORKSPACE_NAME\" > claimed-by"
}

resource "abode_process" "workspace" {
  count   = data.abode_workspace.me.start_count
  command = ["sh", "-c", abode_agent.main[0].init_script]
  dir     = abode_volume.work.path
  env = {
    ABODE_AGENT_TOKEN   = abode_agent.main[0].token
    ABODE_AGENT_LOG_DIR = "${abode_volume.work.path}/.logs"
    HOME                = abode_volume.work.path
  }
}
