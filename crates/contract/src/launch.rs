//! How the platform asks the provider's executable to serve a whole Terraform
//! command from one process (`abode_provider::launch`): the platform runs
//! `terraform-provider-abode --launch-terraform TERRAFORM ARGS...` where it
//! would run `TERRAFORM ARGS...`.

/// The first argument that asks for a launch.
pub const LAUNCH_FLAG: &str = "--launch-terraform";

/// Terraform commands run without the launcher: `init` installs and locks
/// the provider, which a reattached provider would skip.
pub fn launched(subcommand: &str) -> bool {
    subcommand != "init"
}
