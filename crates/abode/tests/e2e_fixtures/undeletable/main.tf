# A workspace no build can delete: destroying it always fails (as a template
# whose provider or credentials are gone would), so only `--orphan` removes it.

resource "terraform_data" "stuck" {
  input = "stuck"
  provisioner "local-exec" {
    when    = destroy
    command = "echo cannot destroy >&2; exit 1"
  }
}
