# A fleet preview's template: a protected home volume whose name is stable,
# and a mutable `tier` parameter. e2e_preview.rs pushes a second version in
# which the volume's name follows the tier for large workspaces only: a
# change that replaces the volume of exactly those.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_workspace" "me" {}

data "abode_parameter" "tier" {
  name    = "tier"
  default = "small"
  mutable = true
}

resource "abode_volume" "home" {
  name = "home-${data.abode_workspace.me.id}"
}

resource "abode_protect" "home" {
  resource_id = abode_volume.home.id
  mode        = "confirm"
}

# Only while started: a stop deletes it, a start creates it again.
resource "terraform_data" "running" {
  count = data.abode_workspace.me.start_count
  input = data.abode_parameter.tier.value
}
