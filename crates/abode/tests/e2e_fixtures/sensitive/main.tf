# A protected resource whose replacement is forced by a sensitive value: the
# guard must hold the build without the value ever reaching a log, the API or
# the CLI. The tests change the default between versions.

variable "secret" {
  type      = string
  sensitive = true
  default   = "FIRST-SECRET-VALUE-1f2e"
}

resource "terraform_data" "vault" {
  triggers_replace = var.secret
}

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

resource "abode_protect" "vault" {
  resource_id = terraform_data.vault.id
}
