//! The guard step of a build: `terraform show -json` of the saved plan, the
//! guard's decision with the template's annotations and the workspace's
//! remembered protections, and how the decision is told in the build log.

use std::path::Path;

use abode_guard::{Decision, Plan, RememberedProtection, Report};
use abode_store::{Build, BuildReason, Transition, Workspace};
use abode_terraform::run::{self, Invocation};

use super::run::{internal, storage, BuildRun, Failure};

impl BuildRun {
    /// `terraform show -json` of the saved plan, then the guard with the
    /// template's annotations and the workspace's remembered protections; the
    /// plan JSON and the report are kept with the build and the report is
    /// written to the log.
    pub(super) async fn check_plan(
        &self,
        build: &Build,
        workspace: &Workspace,
        plan_file: &Path,
    ) -> Result<(Plan, Report, Vec<RememberedProtection>), Failure> {
        let show = Invocation::new(
            self.template_dir(),
            [
                "show",
                "-json",
                "-no-color",
                &plan_file.display().to_string(),
            ],
            &self.env,
        );
        let plan_json = run::capture(&show)
            .await
            .map_err(|error| Failure::failed(error.to_string()))?;
        let plan = abode_guard::read_plan_slice(&plan_json)
            .map_err(|error| Failure::failed(format!("cannot read the plan: {error}")))?;
        let transition = guard_transition(build);
        let memory = self
            .control
            .remembered(&workspace.id)
            .await
            .map_err(internal)?;
        // The scheduler's builds are the system's: a delete it starts (a
        // dormant deletion) destroys no protected resource without a person.
        let initiator = if crate::scheduler::is_scheduler_reason(build.reason) {
            abode_guard::Initiator::System
        } else {
            abode_guard::Initiator::Person
        };
        let report = abode_guard::evaluate_as(
            &plan,
            transition,
            initiator,
            &abode_guard::remembered_rules(&memory),
        );
        self.control
            .inner
            .config
            .metrics
            .guard_decision(report.decision.as_str());
        let plan_text = String::from_utf8_lossy(&plan_json);
        self.control
            .inner
            .store
            .set_build_plan(&self.build_id, &plan_text, &report.to_json())
            .await
            .map_err(storage)?;
        let level = match report.decision {
            Decision::Allow => "info",
            _ => "warn",
        };
        for line in abode_guard::render_text(&report, false).lines() {
            if !line.trim().is_empty() {
                self.log("guard", level, line).await;
            }
        }
        Ok((plan, report, memory))
    }
}

/// The guard is pure and has its own transition type; every stored build
/// maps to one of its kinds. A claim build is a `start` to the store and a
/// `claim` to the guard: a prebuilt workspace has never held anyone's data,
/// so what it replaces is allowed (and reported).
pub(super) fn guard_transition(build: &Build) -> abode_guard::Transition {
    match (build.transition, build.reason) {
        (Transition::Start, BuildReason::PrebuildClaim) => abode_guard::Transition::Claim,
        (Transition::Start, _) => abode_guard::Transition::Start,
        (Transition::Stop, _) => abode_guard::Transition::Stop,
        (Transition::Delete, _) => abode_guard::Transition::Delete,
    }
}

/// The protected changes that made the decision, in one line:
/// `abode_volume.home: replaced because ...; ...`.
pub(super) fn describe_changes(report: &Report, decision: Decision) -> String {
    let described: Vec<String> = report
        .protected_changes
        .iter()
        .filter(|change| change.outcome == decision)
        .map(|change| format!("{}: {}", change.address, change.reason))
        .collect();
    if described.is_empty() {
        "protected resources would be destroyed or replaced".to_string()
    } else {
        described.join("; ")
    }
}
