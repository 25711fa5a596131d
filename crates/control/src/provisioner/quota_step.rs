//! The quota step of a build, right after the guard's verdict on the same
//! plan and before any apply: the plan's daily cost (`abode-cost`) is
//! written to the log and reserved on the build; with `--quota-enforce`, a
//! start (create, update, claim) whose cost would take its owner past their
//! budget is refused here, so nothing is created; a prebuild's start is
//! judged against the `prebuilds` actor's budget. A stop or delete is never
//! refused: it only ever lowers what the owner spends.

use abode_runner::{Failure, LogLevel};
use abode_store::{Reservation, Transition};

use super::on_server::ServerJob;
use super::run::storage;

/// What the quota step decided.
pub(super) enum Charged {
    /// Go on to the guard's verdict.
    Proceed,
    /// Refused before apply: the build ends with this one-line reason.
    Refused(String),
}

/// The cost of `plan_json`, logged and reserved for the build.
pub(super) async fn charge(job: &ServerJob, plan_json: &[u8]) -> Result<Charged, Failure> {
    let control = job.control();
    let build = job.build();
    // Every start, a prebuild's too: a prebuild waiting in its pool is
    // charged to the `prebuilds` actor's budget (its groups'), a claim to
    // the claimer's.
    let enforce = control.inner.config.quota_enforce && build.transition == Transition::Start;
    let cost = match abode_cost::daily_cost(plan_json) {
        Ok(cost) => cost,
        Err(error) => {
            if enforce {
                control.inner.config.metrics.quota_refusal("cost");
                let message =
                    format!("refused by quota: the plan's daily cost cannot be told: {error}");
                job.note("quota", LogLevel::Error, &message).await;
                return Ok(Charged::Refused(message));
            }
            job.note(
                "quota",
                LogLevel::Warn,
                &format!("daily cost unknown: {error}"),
            )
            .await;
            return Ok(Charged::Proceed);
        }
    };
    // abode-cost caps the total at i64::MAX.
    let total = i64::try_from(cost.total).unwrap_or(i64::MAX);
    job.note(
        "quota",
        LogLevel::Info,
        &format!("daily cost: {}", cost.describe()),
    )
    .await;
    let reservation = control
        .inner
        .store
        .reserve_build_cost(&build.id, job.holder(), total, enforce)
        .await
        .map_err(storage)?;
    match reservation {
        Reservation::Reserved => Ok(Charged::Proceed),
        Reservation::NotHolder => Err(Failure::failed(format!(
            "{} before its cost was reserved; nothing was applied",
            abode_runner::LEASE_LOST
        ))),
        Reservation::OverBudget { usage, cost } => {
            control.inner.config.metrics.quota_refusal("quota");
            for line in crate::create_estimate::budget_lines(&usage) {
                job.note("quota", LogLevel::Warn, &line).await;
            }
            let message = crate::create_estimate::refusal_line(
                &build.workspace_name,
                &build.owner_name,
                cost,
                &usage,
            );
            job.note("quota", LogLevel::Error, &message).await;
            control
                .audit_system("build.refused", build, Some(message.clone()))
                .await;
            Ok(Charged::Refused(message))
        }
    }
}
