# A template with one free-text parameter and nothing else: values of any
# size reach the door, which caps what a build can carry.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_parameter" "size" {
  name    = "size"
  default = "small"
}

resource "terraform_data" "marker" {
  input = length(data.abode_parameter.size.value)
}
