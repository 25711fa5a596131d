//! What a create would cost a day, before anything is queued: the template's
//! import plan (the plan with no workspace that a push runs) planned with
//! the create's values, read by `abode-cost` exactly as a build's plan is.
//!
//! A version's files never change, so an answer is kept per (version,
//! values): a second look (the CLI's estimate, then its create) runs no
//! Terraform. The runs are few at a time, as a push's are, and in a work
//! dir of their own that nothing else shares.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use abode_runner::archive;
use abode_runner::workdir::{self, TEMPLATE_SUBDIR};
use abode_store::TemplateVersion;

use super::{init_template, Templates};
use crate::parameters::import_with_values;
use crate::ControlError;

/// The cost an import plan told, or why it could not tell one (a plan the
/// template refused with these values, a `daily_cost` known only after
/// apply): one line, for the person asking.
pub type ImportCost = Result<abode_cost::Cost, String>;

/// How many answers are kept (each a few hundred bytes).
const KEPT: usize = 256;

/// How many estimate plans run at once on this server.
const RUNS_AT_ONCE: usize = 2;

/// One kept answer: the version's id, the values, the cost.
type Kept = (String, BTreeMap<String, String>, ImportCost);

/// Answers by (version id, values), oldest first.
pub(crate) struct Estimates {
    kept: Mutex<VecDeque<Kept>>,
    runs: tokio::sync::Semaphore,
}

impl Default for Estimates {
    fn default() -> Self {
        Estimates {
            kept: Mutex::new(VecDeque::new()),
            runs: tokio::sync::Semaphore::new(RUNS_AT_ONCE),
        }
    }
}

impl Estimates {
    fn lookup(&self, version_id: &str, values: &BTreeMap<String, String>) -> Option<ImportCost> {
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        kept.iter()
            .find(|(id, kept_values, _)| id == version_id && kept_values == values)
            .map(|(_, _, cost)| cost.clone())
    }

    fn keep(&self, version_id: &str, values: &BTreeMap<String, String>, cost: &ImportCost) {
        let mut kept = self
            .kept
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if kept
            .iter()
            .any(|(id, kept_values, _)| id == version_id && kept_values == values)
        {
            return;
        }
        if kept.len() >= KEPT {
            kept.pop_front();
        }
        kept.push_back((version_id.to_string(), values.clone(), cost.clone()));
    }
}

impl Templates {
    /// The daily cost of a create of `version` with `values` (every value
    /// resolved: the door's checked values), from an import plan with them.
    pub(crate) async fn import_cost(
        &self,
        version: &TemplateVersion,
        values: &BTreeMap<String, String>,
    ) -> Result<ImportCost, ControlError> {
        if let Some(cost) = self.estimates.lookup(&version.id, values) {
            return Ok(cost);
        }
        let _run = self
            .estimates
            .runs
            .acquire()
            .await
            .map_err(|error| ControlError::Internal(error.to_string()))?;
        // Another request may have planned the same while this one waited.
        if let Some(cost) = self.estimates.lookup(&version.id, values) {
            return Ok(cost);
        }
        let archive_bytes = self.store.template_version_archive(&version.id).await?;
        let dir = workdir::create(
            &self.config.work_dir,
            &format!("estimate-{}", abode_store::new_id()),
        )
        .map_err(|error| ControlError::Internal(format!("cannot create a work dir: {error}")))?;
        let planned = self.plan_cost_in(&dir, archive_bytes, values).await;
        workdir::remove_off_runtime(dir).await;
        let cost = planned?;
        self.estimates.keep(&version.id, values, &cost);
        Ok(cost)
    }

    /// The cost the version's import plan with `values` tells, `None` when
    /// none was planned yet: what a create may read without running
    /// Terraform.
    pub(crate) fn known_import_cost(
        &self,
        version: &TemplateVersion,
        values: &BTreeMap<String, String>,
    ) -> Option<ImportCost> {
        self.estimates.lookup(&version.id, values)
    }

    async fn plan_cost_in(
        &self,
        dir: &std::path::Path,
        archive_bytes: Vec<u8>,
        values: &BTreeMap<String, String>,
    ) -> Result<ImportCost, ControlError> {
        let template_dir = dir.join(TEMPLATE_SUBDIR);
        let target = template_dir.clone();
        tokio::task::spawn_blocking(move || archive::unpack(&archive_bytes, &target))
            .await
            .map_err(|error| ControlError::Internal(format!("unpack task failed: {error}")))??;
        let env = match init_template(&self.config, dir, &template_dir).await {
            Ok(env) => env,
            Err(ControlError::InvalidTemplate(message)) => return Ok(Err(message)),
            Err(other) => return Err(other),
        };
        let imported = match import_with_values(
            &template_dir,
            &env,
            dir,
            self.config.isolation.as_ref(),
            values,
        )
        .await
        {
            Ok(imported) => imported,
            Err(crate::parameters::ImportError::Run(error)) => {
                return Err(ControlError::Internal(error.to_string()))
            }
            Err(refused) => return Ok(Err(refused.to_string())),
        };
        Ok(abode_cost::daily_cost(&imported.plan_json).map_err(|error| error.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn an_answer_is_kept_per_version_and_values_and_the_oldest_goes_first() {
        let estimates = Estimates::default();
        let cost = |total| -> ImportCost {
            Ok(abode_cost::Cost {
                total,
                items: Vec::new(),
            })
        };
        estimates.keep("v1", &values(&[("cpus", "2")]), &cost(2));
        estimates.keep("v1", &values(&[("cpus", "4")]), &Err("unknown".into()));
        // The first answer stands: a version's plan does not change.
        estimates.keep("v1", &values(&[("cpus", "2")]), &cost(9));
        assert_eq!(
            estimates.lookup("v1", &values(&[("cpus", "2")])),
            Some(cost(2))
        );
        assert_eq!(
            estimates.lookup("v1", &values(&[("cpus", "4")])),
            Some(Err("unknown".into()))
        );
        assert_eq!(estimates.lookup("v2", &values(&[("cpus", "2")])), None);
        assert_eq!(estimates.lookup("v1", &values(&[])), None);
        for n in 0..KEPT {
            estimates.keep(&format!("other-{n}"), &values(&[]), &cost(1));
        }
        assert_eq!(estimates.lookup("v1", &values(&[("cpus", "2")])), None);
        assert_eq!(
            estimates.lookup(&format!("other-{}", KEPT - 1), &values(&[])),
            Some(cost(1))
        );
    }
}
