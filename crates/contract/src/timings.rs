//! The stages a build's time is told in (`abode builds show --timings`,
//! the API's timings, the `abode_build_stage_seconds` histograms), in the
//! order a build passes them; and what a Terraform resource's own time is
//! (its plan or its apply). Defined once for the runner that measures,
//! the daemon wire, the store that keeps and the API and CLI that show.

use std::fmt;
use std::str::FromStr;

/// One stage of a build, from its request to its agents' `ready`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// From the build's request (or its confirmation) to a provisioner's claim.
    QueueWait,
    /// The work dir laid out where Terraform runs.
    Setup,
    /// What a confirmed plan destroys, archived before its apply.
    Snapshot,
    Init,
    /// `terraform plan` and `terraform show -json` of its plan.
    Plan,
    Guard,
    /// What a delete forgets put on record.
    Retain,
    Quota,
    Apply,
    /// What the apply stored recorded (agents, protections).
    StateWrite,
    /// From the build's end to its agent's first call.
    AgentConnected,
    /// The agent's startup scripts, from `starting` to `ready`.
    Scripts,
    /// The moment the agent said it was ready (an instant).
    Ready,
}

impl Stage {
    pub const ALL: [Stage; 13] = [
        Stage::QueueWait,
        Stage::Setup,
        Stage::Snapshot,
        Stage::Init,
        Stage::Plan,
        Stage::Guard,
        Stage::Retain,
        Stage::Quota,
        Stage::Apply,
        Stage::StateWrite,
        Stage::AgentConnected,
        Stage::Scripts,
        Stage::Ready,
    ];

    /// Its name in the store, the API, the daemon wire and the metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::QueueWait => "queue_wait",
            Stage::Setup => "setup",
            Stage::Snapshot => "snapshot",
            Stage::Init => "init",
            Stage::Plan => "plan",
            Stage::Guard => "guard",
            Stage::Retain => "retain",
            Stage::Quota => "quota",
            Stage::Apply => "apply",
            Stage::StateWrite => "state_write",
            Stage::AgentConnected => "agent_connected",
            Stage::Scripts => "scripts",
            Stage::Ready => "ready",
        }
    }

    /// The stage named `name`; none for any other name.
    pub fn named(name: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|stage| stage.as_str() == name)
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stage name none of [`Stage`] names (cut at 64 characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown build stage `{0}`")]
pub struct UnknownStage(pub String);

impl FromStr for Stage {
    type Err = UnknownStage;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Stage::named(name).ok_or_else(|| UnknownStage(name.chars().take(64).collect()))
    }
}

/// Which of Terraform's runs a resource's time was spent in: its plan
/// (refreshing it, reading a data source) or its apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourcePhase {
    Plan,
    Apply,
}

impl ResourcePhase {
    pub fn as_str(self) -> &'static str {
        match self {
            ResourcePhase::Plan => "plan",
            ResourcePhase::Apply => "apply",
        }
    }

    pub fn named(name: &str) -> Option<ResourcePhase> {
        [ResourcePhase::Plan, ResourcePhase::Apply]
            .into_iter()
            .find(|phase| phase.as_str() == name)
    }
}

impl fmt::Display for ResourcePhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_reads_back_from_its_name() {
        for stage in Stage::ALL {
            assert_eq!(stage.as_str().parse::<Stage>(), Ok(stage));
        }
        assert!("queue wait".parse::<Stage>().is_err());
        assert_eq!(ResourcePhase::named("apply"), Some(ResourcePhase::Apply));
        assert_eq!(ResourcePhase::named("refresh"), None);
    }
}
