# The smallest valid template: nothing to install, nothing to run.

resource "terraform_data" "marker" {
  input = "minimal"
}
