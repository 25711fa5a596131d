# The state backend's benchmark (benches/state-backend.sh): `count`
# resources while started, none while stopped, so that a start applies
# `count` creations and a second start applies nothing.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_workspace" "me" {}

data "abode_parameter" "count" {
  name    = "count"
  type    = "number"
  default = 1
}

resource "abode_volume" "home" {
  name = "home-${data.abode_workspace.me.id}"
}

resource "terraform_data" "resource" {
  count = data.abode_workspace.me.start_count * data.abode_parameter.count.value
  input = count.index
}
