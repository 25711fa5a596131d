# A template whose every start fails at apply: its pool hits the hard limit.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_workspace" "me" {}

data "abode_workspace_preset" "broken" {
  name = "broken"
  prebuilds {
    instances = 1
  }
}

resource "terraform_data" "fails" {
  count = data.abode_workspace.me.start_count
  provisioner "local-exec" {
    command = "echo this template cannot start >&2; exit 1"
  }
}
