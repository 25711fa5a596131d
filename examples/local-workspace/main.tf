# A whole workspace on one machine, with nothing but Terraform and Abode:
# a persistent home volume (protected), and while the workspace is started, an
# agent and the process that runs it.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_workspace" "me" {}

data "abode_workspace_owner" "me" {}

# Persistent: not under start_count, so stops and starts keep it.
resource "abode_volume" "home" {
  name = "home-${data.abode_workspace.me.id}"
  labels = {
    owner     = data.abode_workspace_owner.me.name
    workspace = data.abode_workspace.me.name
  }
  # The name is the volume's identity: it is kept as created, so that a home
  # retained by `abode delete --retain` is adopted in place by
  # `abode create --adopt` (docs/retain.md) instead of being replaced by one
  # named after the new workspace.
  lifecycle {
    ignore_changes = [name]
  }
}

# Any start or stop whose plan would delete or replace the home volume waits
# for an explicit confirmation; deleting the workspace is always allowed.
resource "abode_protect" "home" {
  resource_id = abode_volume.home.id
  mode        = "confirm"
}

resource "abode_agent" "main" {
  count = data.abode_workspace.me.start_count
  os    = "linux"
  arch  = "amd64"
  dir   = abode_volume.home.path

  # Live facts shown with the workspace (`abode show`, the dashboard),
  # through `abode stat` (the agent puts `abode` on the PATH) and awk. Kept
  # cheap: every 10 and 30 s.
  metadata {
    key          = "cpu"
    display_name = "CPU"
    script       = <<-EOT
      abode stat --output json | awk -F': *' '/"used_cores"/ { u = $2 + 0 } /"limit_cores"/ { l = $2 + 0 } END { print u " of " l " cores" }'
    EOT
    interval     = 10
    timeout      = 5
  }
  metadata {
    key          = "disk"
    display_name = "Home disk"
    script       = <<-EOT
      abode stat --output json | awk -F': *' '/"disk"/ { d = 1 } d && /"used_bytes"/ { u = $2 + 0 } d && /"available_bytes"/ { a = $2 + 0 } END { if (u + a > 0) print int(u * 100 / (u + a)) "% used"; else print "unknown" }'
    EOT
    interval     = 30
    timeout      = 5
  }
}

# A start script with its own log (`abode scripts WS --log welcome`). Kept
# cheap: it runs at every start of every workspace made from this template.
resource "abode_script" "welcome" {
  count        = data.abode_workspace.me.start_count
  agent_id     = abode_agent.main[0].id
  display_name = "welcome"
  script       = "echo \"welcome, the workspace started at $(date -u +%H:%M:%S)\""
  run_on_start = true
  timeout      = 30
}

# The workspace's "machine": a local process running the agent. The token goes
# through the environment, never the command line.
resource "abode_process" "workspace" {
  count   = data.abode_workspace.me.start_count
  command = ["sh", "-c", abode_agent.main[0].init_script]
  dir     = abode_volume.home.path
  env = {
    ABODE_AGENT_TOKEN = abode_agent.main[0].token
    HOME              = abode_volume.home.path
  }
}

resource "abode_metadata" "home" {
  resource_id = abode_volume.home.id
  item {
    key   = "path"
    value = abode_volume.home.path
  }
}
