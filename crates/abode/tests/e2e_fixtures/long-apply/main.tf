# A long apply. Terraform starts the clock of its intermediate saves at the
# first resource made (`clock`, at once), and saves the state when a
# resource is made 20 s or more after that: `first` takes 21 s, then
# `second`, made after it, 12 s more.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

resource "terraform_data" "clock" {
  input = "at once"
}

resource "terraform_data" "first" {
  depends_on = [terraform_data.clock]

  provisioner "local-exec" {
    command = "sleep 21"
  }
}

resource "terraform_data" "second" {
  depends_on = [terraform_data.first]

  provisioner "local-exec" {
    command = "sleep 12"
  }
}
