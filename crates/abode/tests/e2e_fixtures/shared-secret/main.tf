# Two parameters, one of which its template calls sensitive: the people a
# workspace is shared with see the first and not the second (e2e_sharing.rs).

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_parameter" "region" {
  name    = "region"
  default = "eu"
}

data "abode_parameter" "api_key" {
  name      = "api_key"
  default   = ""
  mutable   = true
  sensitive = true
}

resource "terraform_data" "configured" {
  input = "${data.abode_parameter.region.value}:${length(data.abode_parameter.api_key.value)}"
}
