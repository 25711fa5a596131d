# Quotas (e2e_quotas): compute that costs 4 a day while the workspace is
# started, and a home volume that costs 1 a day as long as the workspace
# exists. The compute writes its creation and destruction to a ledger
# outside the workspace (`LEDGER` is replaced by the test), so a build
# refused before apply shows there as nothing at all.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_workspace" "me" {}

# What the compute costs a day (the test's second version raises it).
data "abode_parameter" "compute_cost" {
  name    = "compute_cost"
  type    = "number"
  default = 4
  mutable = true
}

resource "terraform_data" "compute" {
  count = data.abode_workspace.me.start_count
  input = {
    ledger = "LEDGER"
    name   = data.abode_workspace.me.name
  }

  provisioner "local-exec" {
    command = "echo \"create ${self.input.name}\" >> '${self.input.ledger}'"
  }

  provisioner "local-exec" {
    when    = destroy
    command = "echo \"destroy ${self.input.name}\" >> '${self.input.ledger}'"
  }
}

resource "abode_volume" "home" {
  name = "home-${data.abode_workspace.me.id}"
}

resource "abode_metadata" "compute" {
  count       = data.abode_workspace.me.start_count
  resource_id = terraform_data.compute[0].id
  daily_cost  = data.abode_parameter.compute_cost.value
}

resource "abode_metadata" "home" {
  resource_id = abode_volume.home.id
  daily_cost  = 1
}
