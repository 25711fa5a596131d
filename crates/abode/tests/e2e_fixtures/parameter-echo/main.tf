# A template whose one parameter reaches the plan, and whose validation error
# quotes the value: the build's error and log then carry whatever text the
# workspace's creator gave (e2e_hostile_text.rs gives terminal escapes).

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_parameter" "motd" {
  name    = "motd"
  default = ""
  validation {
    regex = "^[^!]*$"
    error = "the motd may not contain '!', not {value}"
  }
}

resource "terraform_data" "motd" {
  input = data.abode_parameter.motd.value
}
