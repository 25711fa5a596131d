# Initialises fine (no provider to install) but fails `terraform validate`:
# the variable it reads is never declared.

resource "terraform_data" "broken" {
  input = var.never_declared
}
