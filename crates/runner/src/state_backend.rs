//! How a run's Terraform reaches Abode's state backend: the override file
//! that makes Abode the backend whatever the template says, the `TF_HTTP_*`
//! settings (from the environment only, so that no file of the work dir nor
//! the saved plan holds the secret), and the run's secret kept in its work
//! dir for whoever finds the run left behind. The server side (the lock and
//! the routes) is the control plane's and the API's.

use std::path::Path;

use crate::workdir;

/// The file Abode writes into a build's template dir: Terraform merges it
/// over the template's own `terraform` block, so the build's state is
/// Abode's whatever the template says (a template declaring a backend is
/// refused at push).
pub const OVERRIDE_FILE: &str = "abode_state_backend_override.tf";
const OVERRIDE: &str = "# Written by Abode: the workspace's state is kept by the Abode server.\n\
                        terraform {\n  backend \"http\" {}\n}\n";

/// The file in a build's work dir (beside `template/`) that keeps the run's
/// secret, so that a restarted server or daemon can release the lock once
/// the Terraform it left has ended. Private like the rest of the work dir.
const SECRET_FILE: &str = "state-backend.secret";

/// How many times Terraform tries a state call that could not reach the
/// server (or that the server could not answer), and the longest pause
/// between tries: an orphaned Terraform keeps trying through a restart.
const RETRY_MAX: &str = "720";
const RETRY_WAIT_MAX_SECONDS: &str = "5";

/// How a run's Terraform reaches the state backend.
#[derive(Clone)]
pub struct StateBackend {
    /// The server's URL as this machine reaches it (`http://host:port`).
    pub url: String,
    pub build_id: String,
    /// The run's secret: the state and its lock open only with it.
    pub secret: String,
}

/// Without the secret.
impl std::fmt::Debug for StateBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateBackend")
            .field("url", &self.url)
            .field("build_id", &self.build_id)
            .finish_non_exhaustive()
    }
}

impl StateBackend {
    fn address(&self, tail: &str) -> String {
        format!(
            "{}/api/v1/builds/{}/state{tail}",
            self.url.trim_end_matches('/'),
            self.build_id
        )
    }

    /// Terraform's `http` backend settings, all from the environment, so
    /// that no file of the work dir, nor the saved plan, holds the secret.
    pub fn terraform_env(&self) -> Vec<(String, String)> {
        [
            ("TF_HTTP_ADDRESS", self.address("")),
            ("TF_HTTP_LOCK_ADDRESS", self.address("/lock")),
            ("TF_HTTP_UNLOCK_ADDRESS", self.address("/unlock")),
            ("TF_HTTP_LOCK_METHOD", "POST".into()),
            ("TF_HTTP_UNLOCK_METHOD", "POST".into()),
            ("TF_HTTP_USERNAME", self.build_id.clone()),
            ("TF_HTTP_PASSWORD", self.secret.clone()),
            ("TF_HTTP_RETRY_MAX", RETRY_MAX.into()),
            ("TF_HTTP_RETRY_WAIT_MIN", "1".into()),
            ("TF_HTTP_RETRY_WAIT_MAX", RETRY_WAIT_MAX_SECONDS.into()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect()
    }

    /// Writes the run's secret into the work dir (first: whoever finds the
    /// work dir left behind releases the lock with it) and, unless the run
    /// applies a plan made before Abode kept states, the backend override
    /// into the template dir.
    pub fn write(
        &self,
        work_dir: &Path,
        template_dir: &Path,
        override_backend: bool,
    ) -> std::io::Result<()> {
        workdir::write_private(&work_dir.join(SECRET_FILE), self.secret.as_bytes())?;
        if override_backend {
            workdir::write_private(&template_dir.join(OVERRIDE_FILE), OVERRIDE.as_bytes())?;
        }
        Ok(())
    }

    /// Whether `work_dir` is this run's (a later run of the same build, queued
    /// again, lays out a work dir of the same name with its own secret).
    pub fn is_run_of(&self, work_dir: &Path) -> bool {
        StateBackend::secret_in(work_dir).is_none_or(|secret| secret == self.secret)
    }

    /// The secret a run left in its work dir, if any.
    pub fn secret_in(work_dir: &Path) -> Option<String> {
        let secret = std::fs::read_to_string(work_dir.join(SECRET_FILE)).ok()?;
        let secret = secret.trim();
        (!secret.is_empty()).then(|| secret.to_string())
    }
}
