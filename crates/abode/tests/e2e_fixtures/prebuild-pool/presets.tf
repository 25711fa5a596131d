# Added beside the example template's main.tf by e2e_prebuilds.rs: a preset
# whose pool keeps two prebuilt workspaces ready.

data "abode_workspace_preset" "small" {
  name = "small"
  prebuilds {
    instances = 2
  }
}
