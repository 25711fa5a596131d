# A build that takes long enough to be canceled while it runs.

resource "terraform_data" "slow" {
  provisioner "local-exec" {
    command = "sleep 60"
  }
}
