# An apply that writes its state halfway: `first` is made at once, then
# `second` takes a while, so a provisioner can die between the two.

resource "terraform_data" "first" {
  input = "made first"
}

resource "terraform_data" "second" {
  depends_on = [terraform_data.first]

  provisioner "local-exec" {
    command = "sleep 8"
  }
}
