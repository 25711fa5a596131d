# An apply that fills the disk its volume is on (`dd` until there is no
# space left), then goes on: the state it must store finds the data dir
# full.

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

resource "terraform_data" "fill" {
  count = data.abode_workspace.me.start_count
  input = abode_volume.home.path

  provisioner "local-exec" {
    command = "dd if=/dev/zero of='${self.input}/fill' bs=1M count=100000 2>/dev/null; echo filled; sleep 2"
  }
}
