# A build whose apply keeps the abode provider running for a while: its only
# abode resource waits for a slow one, so Terraform holds the provider open
# during the local-exec.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

resource "terraform_data" "slow" {
  provisioner "local-exec" {
    command = "sleep 60"
  }
}

resource "abode_metadata" "after" {
  resource_id = terraform_data.slow.id
  item {
    key   = "state"
    value = "applied"
  }
}
