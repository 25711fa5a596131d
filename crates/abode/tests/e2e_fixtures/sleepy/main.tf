# An apply that takes `seconds` (a parameter): long enough to kill a server or
# cancel a build in the middle of it, short enough to wait for its end.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_parameter" "seconds" {
  name    = "seconds"
  type    = "number"
  default = 60
}

resource "terraform_data" "slow" {
  input = data.abode_parameter.seconds.value
  provisioner "local-exec" {
    command = "sleep ${data.abode_parameter.seconds.value}"
  }
}
