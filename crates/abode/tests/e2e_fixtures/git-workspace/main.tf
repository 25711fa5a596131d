# A workspace that clones its repository as its owner (external auth,
# e2e_external_auth.rs): it requires the owner's linked `corp` account, and
# its startup script clones `repo` over HTTP; Git gets the owner's token
# from the agent (GIT_ASKPASS), never from Terraform.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_workspace" "me" {}

data "abode_external_auth" "corp" {}

data "abode_parameter" "repo" {
  name    = "repo"
  default = ""
}

resource "abode_volume" "home" {
  name = "home-${data.abode_workspace.me.id}"
}

resource "abode_agent" "main" {
  count = data.abode_workspace.me.start_count
  os    = "linux"
  arch  = "amd64"
  dir   = abode_volume.home.path
  env = {
    GIT_AUTHOR_NAME     = "Workspace"
    GIT_AUTHOR_EMAIL    = "workspace@example.com"
    GIT_COMMITTER_NAME  = "Workspace"
    GIT_COMMITTER_EMAIL = "workspace@example.com"
  }
  startup_script = <<-EOT
    if [ ! -d project ]; then git clone "${data.abode_parameter.repo.value}" project; fi
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
