//! Which of the provider's resources live on the machine that built them.
//!
//! An `abode_volume` is a directory under the volumes dir of the machine
//! whose provisioner ran the build, and an `abode_process` runs under that
//! machine's process supervisor. Another machine's provisioner sees neither:
//! to it the volume was "deleted outside Terraform" and the process is not
//! running. The platform reads a stored state with these words to know
//! where a workspace must be built; the provider names the same resources.

/// The provider's address in a state's `provider` field
/// (`provider["registry.terraform.io/abode/abode"]`, possibly with a module
/// path before it or an alias after it).
pub const PROVIDER_ADDRESS: &str = "registry.terraform.io/abode/abode";

/// The resource types of the provider whose objects live on one machine.
pub const HOST_LOCAL_TYPES: [&str; 2] = ["abode_volume", "abode_process"];

/// Whether a managed resource of `resource_type`, configured by the provider
/// `provider` (a state's `provider` field), lives on the machine that built
/// it: one of [`HOST_LOCAL_TYPES`] of this provider, not another provider's
/// resource that happens to share the name.
pub fn is_host_local(resource_type: &str, provider: &str) -> bool {
    HOST_LOCAL_TYPES.contains(&resource_type)
        && provider.contains(&format!("provider[\"{PROVIDER_ADDRESS}\"]"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_abode_provider_s_volumes_and_processes_are_host_local() {
        let abode = r#"provider["registry.terraform.io/abode/abode"]"#;
        let cases = [
            ("abode_volume", abode, true),
            ("abode_process", abode, true),
            (
                "abode_volume",
                r#"module.disks.provider["registry.terraform.io/abode/abode"].second"#,
                true,
            ),
            ("abode_agent", abode, false),
            ("abode_protect", abode, false),
            (
                "abode_volume",
                r#"provider["registry.terraform.io/someone/abode"]"#,
                false,
            ),
            ("docker_volume", abode, false),
            ("abode_volume", "", false),
        ];
        for (resource_type, provider, local) in cases {
            assert_eq!(
                is_host_local(resource_type, provider),
                local,
                "{resource_type} of {provider}"
            );
        }
    }
}
