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
        // The scheduler's builds are the system's: a delete it starts (a
        // dormant deletion) destroys no protected resource without a person.
        let initiator = if crate::scheduler::is_scheduler_reason(build.reason) {
            abode_guard::Initiator::System
        } else {
            abode_guard::Initiator::Person
        };
        let Judged {
            plan,
            plan_json,
            report,
            memory,
        } = judge_plan(
            &self.control,
            &self.template_dir(),
            &self.env,
            plan_file,
            &workspace.id,
            guard_transition(build),
            initiator,
        )
        .await?;
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

/// A saved plan as the guard judged it.
pub(super) struct Judged {
    pub(super) plan: Plan,
    /// `terraform show -json` of it, as Terraform printed it.
    pub(super) plan_json: Vec<u8>,
    pub(super) report: Report,
    /// The workspace's remembered protections the guard applied.
    pub(super) memory: Vec<RememberedProtection>,
}

/// `terraform show -json` of the saved plan in `template_dir`, then the
/// guard with the template's annotations and the workspace's remembered
/// protections: the same judgement for a build and for a preview.
pub(super) async fn judge_plan(
    control: &crate::Control,
    template_dir: &Path,
    env: &[(String, String)],
    plan_file: &Path,
    workspace_id: &str,
    transition: abode_guard::Transition,
    initiator: abode_guard::Initiator,
) -> Result<Judged, Failure> {
    let show = Invocation::new(
        template_dir,
        [
            "show",
            "-json",
            "-no-color",
            &plan_file.display().to_string(),
        ],
        env,
    );
    let plan_json = run::capture(&show)
        .await
        .map_err(|error| Failure::failed(error.to_string()))?;
    let plan = abode_guard::read_plan_slice(&plan_json)
        .map_err(|error| Failure::failed(format!("cannot read the plan: {error}")))?;
    let memory = control.remembered(workspace_id).await.map_err(internal)?;
    let report = abode_guard::evaluate_as(
        &plan,
        transition,
        initiator,
        &abode_guard::remembered_rules(&memory),
    );
    Ok(Judged {
        plan,
        plan_json,
        report,
        memory,
    })
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
