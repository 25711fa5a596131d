# Every creation and destruction leaves a line in a ledger outside the
# workspace (a file the test names): a resource created twice, or created
# and never destroyed, shows there whatever the stored state says. Three
# resources while started; each creation takes `seconds` (mutable), long
# enough to freeze the provisioner in the middle of an apply.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_workspace" "me" {}

data "abode_parameter" "ledger" {
  name = "ledger"
  type = "string"
}

data "abode_parameter" "seconds" {
  name    = "seconds"
  type    = "number"
  default = 0
  mutable = true
}

resource "terraform_data" "thing" {
  count = data.abode_workspace.me.start_count * 3
  # A destroy-time provisioner sees only `self`: the ledger travels in it.
  input = {
    ledger = data.abode_parameter.ledger.value
    name   = "${data.abode_workspace.me.name}-${count.index}"
  }

  provisioner "local-exec" {
    command = "echo \"create ${self.input.name} ${self.id}\" >> '${self.input.ledger}' && sleep ${data.abode_parameter.seconds.value}"
  }

  provisioner "local-exec" {
    when    = destroy
    command = "echo \"destroy ${self.input.name} ${self.id}\" >> '${self.input.ledger}'"
  }
}
