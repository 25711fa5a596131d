//! How the platform asks the provider's executable to serve a whole Terraform
//! command from one process (`abode_provider::launch`): the platform runs
//! `terraform-provider-abode --launch-terraform [--then-show-json PLAN OUTPUT]
//! TERRAFORM ARGS...` where it would run `TERRAFORM ARGS...`.
//!
//! With `--then-show-json`, once `TERRAFORM ARGS` (a `plan -out=PLAN`)
//! succeeded, the launcher kills whatever the plan left running (its own
//! descendants: nothing the template started may touch the plan after this),
//! then runs `TERRAFORM show -json -no-color PLAN` with the same provider and
//! renames its output into OUTPUT only when complete; OUTPUT is removed
//! otherwise. One sandbox and one provider for both, where two commands cost
//! two of each.

use std::ffi::OsString;
use std::path::PathBuf;

/// The first argument that asks for a launch.
pub const LAUNCH_FLAG: &str = "--launch-terraform";

/// The option that asks for the plan's JSON after the command.
pub const THEN_SHOW_FLAG: &str = "--then-show-json";

/// Terraform commands run without the launcher: `init` installs and locks
/// the provider, which a reattached provider would skip.
pub fn launched(subcommand: &str) -> bool {
    subcommand != "init"
}

/// One launch: Terraform, its arguments and what follows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub terraform: OsString,
    pub args: Vec<OsString>,
    /// The saved plan to show as JSON, and the file its JSON goes to.
    pub then_show: Option<(PathBuf, PathBuf)>,
}

impl Launch {
    /// The launcher's arguments, [`LAUNCH_FLAG`] first.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out = vec![OsString::from(LAUNCH_FLAG)];
        if let Some((plan, output)) = &self.then_show {
            out.push(THEN_SHOW_FLAG.into());
            out.push(plan.clone().into_os_string());
            out.push(output.clone().into_os_string());
        }
        out.push(self.terraform.clone());
        out.extend(self.args.iter().cloned());
        out
    }

    /// The arguments after [`LAUNCH_FLAG`]; `None` when Terraform is missing
    /// or `--then-show-json` lacks its two paths.
    pub fn parse(args: &[OsString]) -> Option<Launch> {
        let (then_show, rest) = match args {
            [flag, plan, output, rest @ ..] if flag == THEN_SHOW_FLAG => {
                (Some((PathBuf::from(plan), PathBuf::from(output))), rest)
            }
            [flag, ..] if flag == THEN_SHOW_FLAG => return None,
            rest => (None, rest),
        };
        let (terraform, args) = rest.split_first()?;
        Some(Launch {
            terraform: terraform.clone(),
            args: args.to_vec(),
            then_show,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn os(items: &[&str]) -> Vec<OsString> {
        items.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_launch_reads_back_what_it_wrote() {
        for then_show in [None, Some(("/w/plan", "/w/plan.json"))] {
            let launch = Launch {
                terraform: "/usr/bin/terraform".into(),
                args: os(&["plan", "-out=/w/plan", "--then-show-json"]),
                then_show: then_show.map(|(a, b)| (PathBuf::from(a), PathBuf::from(b))),
            };
            let args = launch.to_args();
            assert_eq!(args[0], LAUNCH_FLAG);
            assert_eq!(Launch::parse(&args[1..]), Some(launch));
        }
    }

    #[test]
    fn a_launch_without_terraform_or_paths_is_refused() {
        for refused in [
            vec![],
            os(&["--then-show-json"]),
            os(&["--then-show-json", "/w/plan"]),
            os(&["--then-show-json", "/w/plan", "/w/out"]),
        ] {
            assert_eq!(Launch::parse(&refused), None, "{refused:?}");
        }
        assert_eq!(
            Launch::parse(&os(&["terraform"])).map(|launch| launch.args.len()),
            Some(0)
        );
    }
}
