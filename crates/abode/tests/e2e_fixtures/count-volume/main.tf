# A template with a classic mistake: the home volume follows start_count like
# the process does, so a stop would delete it. The platform remembers the
# protection from the start build, so the stop must be held even though the
# annotation itself disappears with count = 0.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_workspace" "me" {}

resource "abode_volume" "home" {
  count = data.abode_workspace.me.start_count
  name  = "home-${data.abode_workspace.me.id}"
}

resource "abode_protect" "home" {
  count       = data.abode_workspace.me.start_count
  resource_id = abode_volume.home[0].id
}
