//! The quota step of a build, right after the guard's verdict on the same
//! plan and before any apply: the plan's daily cost (`abode-cost`) is
//! written to the log and reserved on the build; with `--quota-enforce`, a
//! start (create, update, claim) whose cost would take its owner past their
//! budget is refused here, so nothing is created; a prebuild's start is
//! judged against the `prebuilds` actor's budget. A stop or delete is never
//! refused: it only ever lowers what the owner spends.

use abode_runner::{Failure, LogLevel};
use abode_store::{Build, Reservation, Transition};

use super::run::storage;
use crate::room::Host;

/// What the quota step decided.
pub(super) enum Charged {
    /// Go on to the guard's verdict.
    Proceed,
    /// Refused before apply: the build ends with this one-line reason.
    Refused(String),
}

/// The quota step's lines for the build's log (the caller writes them,
/// masked like every other, whatever the outcome) and its outcome.
pub(super) struct Charge {
    pub(super) lines: Vec<(LogLevel, String)>,
    pub(super) outcome: Result<Charged, Failure>,
}

/// The cost of `plan_json`, reserved for `build`, whose job `holder` holds.
pub(super) async fn charge(host: &Host, build: &Build, holder: &str, plan_json: &[u8]) -> Charge {
    let mut lines = Vec::new();
    let outcome = reserve(host, build, holder, plan_json, &mut lines).await;
    Charge { lines, outcome }
}

async fn reserve(
    host: &Host,
    build: &Build,
    holder: &str,
    plan_json: &[u8],
    lines: &mut Vec<(LogLevel, String)>,
) -> Result<Charged, Failure> {
    // Every start, a prebuild's too: a prebuild waiting in its pool is
    // charged to the `prebuilds` actor's budget (its groups'), a claim to
    // the claimer's.
    let enforce = host.inner.config.quota_enforce && build.transition == Transition::Start;
    let cost = match abode_cost::daily_cost(plan_json) {
        Ok(cost) => cost,
        Err(error) => {
            if enforce {
                host.inner.config.metrics.quota_refusal("cost");
                let message =
                    format!("refused by quota: the plan's daily cost cannot be told: {error}");
                lines.push((LogLevel::Error, message.clone()));
                return Ok(Charged::Refused(message));
            }
            lines.push((LogLevel::Warn, format!("daily cost unknown: {error}")));
            return Ok(Charged::Proceed);
        }
    };
    // abode-cost caps the total at i64::MAX.
    let total = i64::try_from(cost.total).unwrap_or(i64::MAX);
    lines.push((LogLevel::Info, format!("daily cost: {}", cost.describe())));
    let reservation = host
        .inner
        .store
        .reserve_build_cost(&build.id, holder, total, enforce)
        .await
        .map_err(storage)?;
    match reservation {
        Reservation::Reserved => Ok(Charged::Proceed),
        Reservation::NotHolder => Err(Failure::failed(format!(
            "{} before its cost was reserved; nothing was applied",
            abode_runner::LEASE_LOST
        ))),
        Reservation::OverBudget { usage, cost } => {
            host.inner.config.metrics.quota_refusal("quota");
            for line in abode_control::quota_text::budget_lines(&usage) {
                lines.push((LogLevel::Warn, line));
            }
            let message = abode_control::quota_text::refusal_line(
                &build.workspace_name,
                &build.owner_name,
                cost,
                &usage,
            );
            lines.push((LogLevel::Error, message.clone()));
            host.audit_system("build.refused", build, Some(message.clone()))
                .await;
            Ok(Charged::Refused(message))
        }
    }
}
