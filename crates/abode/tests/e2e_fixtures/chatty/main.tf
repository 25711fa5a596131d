# An apply that prints a numbered line twice a second for ten seconds, and
# writes each number to a file outside the workspace (`progress`), so that a
# test knows how far it got whatever the build log could record.

terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

data "abode_parameter" "progress" {
  name = "progress"
  type = "string"
}

resource "terraform_data" "chatty" {
  input = data.abode_parameter.progress.value

  provisioner "local-exec" {
    command = "for i in $(seq 1 20); do echo \"line-$i\"; echo \"$i\" >> '${self.input}'; sleep 0.5; done"
  }
}
