# Writes the owner's groups (`abode_workspace_owner.groups`, as the build
# was given them) into a volume named after the workspace, where
# e2e_groups.rs reads them. Nothing else: no agent, so a prebuilt
# workspace of it is ready as soon as its build succeeds.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_workspace" "me" {}

data "abode_workspace_owner" "me" {}

resource "abode_volume" "out" {
  name = "groups-${data.abode_workspace.me.id}"
}

resource "terraform_data" "groups" {
  input = {
    groups = join(",", data.abode_workspace_owner.me.groups)
    dir    = abode_volume.out.path
  }

  provisioner "local-exec" {
    command = "printf '%s' '${self.input.groups}' > '${self.input.dir}/groups'"
  }
}
