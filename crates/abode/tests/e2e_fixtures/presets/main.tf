# A template with two presets: `small`, parameter values only, and `office`,
# with a pool of prebuilt workspaces that grows during office hours
# (e2e_presets.rs). The build only echoes the values.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_parameter" "cpus" {
  name    = "cpus"
  type    = "number"
  default = "2"
  mutable = true
  validation {
    min = 1
    max = 8
  }
}

data "abode_parameter" "region" {
  name    = "region"
  default = "eu"
  option {
    name  = "Europe"
    value = "eu"
  }
  option {
    name  = "United States"
    value = "us"
  }
}

data "abode_workspace_preset" "small" {
  name       = "small"
  parameters = { cpus = "1" }
}

data "abode_workspace_preset" "office" {
  name       = "office"
  parameters = { cpus = "4", region = "us" }
  prebuilds {
    instances = 1
    expiration_policy {
      ttl = 86400
    }
    scheduling {
      timezone = "Europe/Paris"
      schedule {
        cron      = "* 8-18 * * 1-5"
        instances = 3
      }
    }
  }
}

resource "terraform_data" "workspace" {
  input = "${data.abode_parameter.cpus.value} cpus in ${data.abode_parameter.region.value}"
}
