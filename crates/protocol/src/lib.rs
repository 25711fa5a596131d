//! The JSON a provisioner daemon and the server exchange (docs/api.md,
//! "Provisioner daemons"), defined once for both sides: the server's routes
//! (`abode-api`) and the daemon's client (`abode-provisionerd`).
//!
//! Binary payloads (a template archive, a state, a plan) travel as base64
//! strings; kinds and transitions as their stored names, parsed at the
//! boundary (an unknown one is an error, never a default).
//!
//! The messages: the job, its log lines, the verdict, a state and its answer,
//! the release of the state lock, a snapshot's answer, and the end. A
//! snapshot's archive is the one body that is not JSON: streamed as it is
//! (`application/x-tar`), its caller in the query. Secrets (the run's state backend
//! key, plans, states) are never in `Debug`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use abode_contract::{BuildContext, Transition};
use abode_runner::{Ended, Failure, FailureKind, JobInputs, JobKind, StateKept, Verdict};
use base64::Engine;
use serde::{Deserialize, Serialize};

/// Encodes bytes for the wire.
pub fn encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes a base64 field, naming it in the error.
pub fn decode(field: &str, text: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|error| format!("{field} is not base64: {error}"))
}

/// Who calls: the daemon's own id and the slot (one of its `--concurrency`
/// workers) that makes the call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DaemonHello {
    pub daemon_id: String,
    pub slot: String,
    pub version: String,
}

/// `POST /provisionerd/acquire`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AcquireRequest {
    #[serde(flatten)]
    pub hello: DaemonHello,
    /// The tags the daemon was started with; they must be its key's.
    #[serde(default)]
    pub tags: Vec<String>,
    /// How long to wait for a job (at most 20 s).
    #[serde(default)]
    pub wait_seconds: Option<u64>,
}

/// A job handed to a daemon.
#[derive(Serialize, Deserialize)]
pub struct JobWire {
    pub build_id: String,
    pub kind: String,
    pub transition: String,
    pub archive: String,
    pub state: Option<String>,
    pub saved_plan: Option<String>,
    pub context: ContextWire,
    /// The run's state backend secret (`state_backend.rs`): its Terraform
    /// reaches the server's state backend with it.
    pub state_backend_key: String,
    /// A confirmed plan held before Abode was the state backend.
    #[serde(default)]
    pub local_state: bool,
    /// A workspace delete's retained resources, forgotten, not destroyed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forget: Vec<String>,
    /// Retained resources the build adopts (imports).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<abode_runner::retention::ImportTarget>,
    /// The workspace's own uid (`--workspace-uids`); none from a server
    /// that gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_uid: Option<u32>,
    /// What a confirmed plan needs snapshotted on the daemon's machine
    /// before its apply; each archive is uploaded with `PUT
    /// /provisionerd/jobs/{build}/snapshots/{index}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub snapshots: Vec<abode_runner::SnapshotOrder>,
}

/// The environment contract but for the daemon's own directories and
/// agent binary (see `runner::RunnerConfig`).
#[derive(Serialize, Deserialize)]
pub struct ContextWire {
    pub workspace_id: String,
    pub workspace_name: String,
    pub owner_id: String,
    pub owner_name: String,
    pub owner_email: String,
    pub owner_full_name: String,
    pub owner_groups: Vec<String>,
    pub template_id: String,
    pub template_name: String,
    pub template_version: String,
    pub is_prebuild: bool,
    pub is_prebuild_claim: bool,
    pub agent_url: String,
    pub parameters: BTreeMap<String, String>,
}

impl JobWire {
    pub fn from_inputs(kind: JobKind, inputs: JobInputs) -> JobWire {
        let context = inputs.context;
        JobWire {
            build_id: inputs.build_id,
            kind: kind.as_str().to_string(),
            transition: inputs.transition.as_str().to_string(),
            archive: encode(&inputs.archive),
            state: inputs.state.as_deref().map(encode),
            saved_plan: inputs.saved_plan.as_deref().map(encode),
            state_backend_key: inputs.state_backend.secret,
            local_state: inputs.local_state,
            forget: inputs.forget,
            imports: inputs.imports,
            workspace_uid: inputs.workspace_uid,
            snapshots: inputs.snapshots,
            context: ContextWire {
                workspace_id: context.workspace_id,
                workspace_name: context.workspace_name,
                owner_id: context.owner_id,
                owner_name: context.owner_name,
                owner_email: context.owner_email,
                owner_full_name: context.owner_full_name,
                owner_groups: context.owner_groups,
                template_id: context.template_id,
                template_name: context.template_name,
                template_version: context.template_version,
                is_prebuild: context.is_prebuild,
                is_prebuild_claim: context.is_prebuild_claim,
                agent_url: context.agent_url,
                parameters: context.parameters,
            },
        }
    }

    /// The job's inputs, every field checked; its Terraform reaches the
    /// state backend at `server_url`, as the daemon does.
    pub fn into_inputs(self, server_url: &str) -> Result<JobInputs, String> {
        let kind: JobKind = self.kind.parse().map_err(|error| format!("{error}"))?;
        let transition: Transition = self
            .transition
            .parse()
            .map_err(|error| format!("{error}"))?;
        let context = self.context;
        Ok(JobInputs {
            archive: decode("archive", &self.archive)?,
            state: self
                .state
                .map(|state| decode("state", &state))
                .transpose()?,
            saved_plan: self
                .saved_plan
                .map(|plan| decode("saved_plan", &plan))
                .transpose()?,
            kind,
            transition,
            context: BuildContext {
                workspace_id: context.workspace_id,
                workspace_name: context.workspace_name,
                transition,
                build_id: self.build_id.clone(),
                owner_id: context.owner_id,
                owner_name: context.owner_name,
                owner_email: context.owner_email,
                owner_full_name: context.owner_full_name,
                owner_groups: context.owner_groups,
                template_id: context.template_id,
                template_name: context.template_name,
                template_version: context.template_version,
                is_prebuild: context.is_prebuild,
                is_prebuild_claim: context.is_prebuild_claim,
                agent_url: context.agent_url,
                agent_token: None,
                // The runner's own (its `RunnerConfig`).
                agent_binary: None,
                agent_ca_cert: None,
                volumes_dir: PathBuf::new(),
                process_logs_dir: PathBuf::new(),
                process_supervisor: None,
                parameters: context.parameters,
                development: false,
                template_import: false,
            },
            state_backend: abode_runner::StateBackend {
                url: server_url.to_string(),
                build_id: self.build_id.clone(),
                secret: self.state_backend_key,
            },
            local_state: self.local_state,
            forget: self.forget,
            imports: self.imports,
            workspace_uid: self.workspace_uid,
            snapshots: self.snapshots,
            build_id: self.build_id,
        })
    }
}

/// `POST /provisionerd/jobs/{build}/heartbeat`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeartbeatAnswer {
    /// A cancel of the build was asked: interrupt Terraform.
    pub canceled: bool,
}

/// `POST /provisionerd/jobs/{build}/logs`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LogUpload {
    #[serde(flatten)]
    pub hello: DaemonHello,
    pub lines: Vec<LogLineWire>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LogLineWire {
    pub stage: String,
    pub level: String,
    pub text: String,
}

/// `POST /provisionerd/jobs/{build}/judge`: `terraform show -json` of the
/// saved plan and the binary plan, both base64.
// No `Debug`: it carries a plan or a state.
#[derive(Clone, Serialize, Deserialize)]
pub struct JudgeRequest {
    #[serde(flatten)]
    pub hello: DaemonHello,
    pub plan_json: String,
    pub plan: String,
}

/// The server's verdict on a plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VerdictWire {
    /// `apply`, `hold` or `block`.
    pub verdict: String,
    #[serde(default)]
    pub message: Option<String>,
}

impl From<&Verdict> for VerdictWire {
    fn from(verdict: &Verdict) -> VerdictWire {
        let (name, message) = match verdict {
            Verdict::Apply => ("apply", None),
            Verdict::Hold => ("hold", None),
            Verdict::Block(message) => ("block", Some(message.clone())),
        };
        VerdictWire {
            verdict: name.to_string(),
            message,
        }
    }
}

impl VerdictWire {
    pub fn parse(self) -> Result<Verdict, String> {
        match (self.verdict.as_str(), self.message) {
            ("apply", _) => Ok(Verdict::Apply),
            ("hold", _) => Ok(Verdict::Hold),
            ("block", Some(message)) => Ok(Verdict::Block(message)),
            ("block", None) => Ok(Verdict::Block("blocked by the plan guard".into())),
            (other, _) => Err(format!("unknown verdict `{other}`")),
        }
    }
}

/// `POST /provisionerd/jobs/{build}/state`: the state Terraform wrote.
// No `Debug`: it carries a plan or a state.
#[derive(Clone, Serialize, Deserialize)]
pub struct StateUpload {
    #[serde(flatten)]
    pub hello: DaemonHello,
    pub state: String,
    /// After the run's last Terraform command.
    pub last: bool,
    /// The run's state backend secret: the state is stored only while the
    /// run holds the workspace's state lock (none: a run of an older release).
    #[serde(default)]
    pub secret: Option<String>,
}

/// `POST /provisionerd/jobs/{build}/release`: the run's Terraform ended, its
/// state lock goes. Answered whether or not the daemon still holds the
/// build's lease: the secret is the run's.
// No `Debug`: it carries the run's secret.
#[derive(Clone, Serialize, Deserialize)]
pub struct ReleaseRequest {
    #[serde(flatten)]
    pub hello: DaemonHello,
    /// The run's secret; none: the daemon found a work dir of the build
    /// without one, and none of its runs of that build is left.
    #[serde(default)]
    pub secret: Option<String>,
}

/// What became of an uploaded state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StateAnswer {
    /// `saved`, `unchanged`, `missing` or `refused`.
    pub kept: String,
    #[serde(default)]
    pub reason: Option<String>,
}

impl From<&StateKept> for StateAnswer {
    fn from(kept: &StateKept) -> StateAnswer {
        let (name, reason) = match kept {
            StateKept::Missing => ("missing", None),
            StateKept::Unchanged => ("unchanged", None),
            StateKept::Saved => ("saved", None),
            StateKept::Refused(reason) | StateKept::Unavailable(reason) => {
                ("refused", Some(reason.clone()))
            }
        };
        StateAnswer {
            kept: name.to_string(),
            reason,
        }
    }
}

impl StateAnswer {
    pub fn parse(self) -> Result<StateKept, String> {
        match self.kept.as_str() {
            "missing" => Ok(StateKept::Missing),
            "unchanged" => Ok(StateKept::Unchanged),
            "saved" => Ok(StateKept::Saved),
            "refused" => Ok(StateKept::Refused(
                self.reason
                    .unwrap_or_else(|| "refused by the server".into()),
            )),
            other => Err(format!("unknown state answer `{other}`")),
        }
    }
}

/// `POST /provisionerd/jobs/{build}/complete`: how the run ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompleteRequest {
    #[serde(flatten)]
    pub hello: DaemonHello,
    /// `applied`, `held`, `failed` or `canceled` (with `message`). A held
    /// run's plan is the one the server kept when it judged it.
    pub outcome: String,
    #[serde(default)]
    pub message: Option<String>,
    /// What the run measured of its time (`abode_runner::RunTimings`), its
    /// `elapsed_us` taken as the request leaves. Read leniently: a report
    /// the server cannot read is left out, never the run's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<serde_json::Value>,
}

/// The answer to a step of the agents' shutdown scripts (`POST
/// /provisionerd/jobs/{build}/shutdown`): whether they all ended, so that
/// the apply may go on.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShutdownAnswer {
    pub done: bool,
}

/// What the server kept of a snapshot's archive a daemon uploaded (`PUT
/// /provisionerd/jobs/{build}/snapshots/{index}`: the archive is the body,
/// the caller's [`DaemonHello`] the query), once it was written, synced and
/// checked against its manifest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SnapshotAnswer {
    /// The retained record (kind `snapshot`).
    pub id: String,
    /// The manifest's files and their bytes.
    pub files: u64,
    pub bytes: u64,
}

/// The answer to a release (`POST /provisionerd/jobs/{build}/release`):
/// whether the workspace's state lock went with it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReleaseAnswer {
    pub released: bool,
}

/// The answer to a completion: the build's status once the server took it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CompleteAnswer {
    pub status: String,
}

/// A run's end as a daemon tells it.
#[derive(Debug)]
pub enum Outcome {
    Applied,
    Held,
    Failed(Failure),
}

impl Outcome {
    /// How a run's result is told.
    pub fn of(result: Result<Ended, Failure>) -> Outcome {
        match result {
            Ok(Ended::Applied) => Outcome::Applied,
            Ok(Ended::Held(_)) => Outcome::Held,
            Err(failure) => Outcome::Failed(failure),
        }
    }
}

impl CompleteRequest {
    pub fn new(hello: DaemonHello, outcome: &Result<Ended, Failure>) -> CompleteRequest {
        let (outcome, message) = match outcome {
            Ok(Ended::Applied) => ("applied", None),
            Ok(Ended::Held(_)) => ("held", None),
            Err(failure) => (failure.kind.as_str(), Some(failure.message.clone())),
        };
        CompleteRequest {
            hello,
            outcome: outcome.to_string(),
            message,
            timings: None,
        }
    }

    /// The request with the run's timings.
    pub fn with_timings(mut self, timings: Option<&abode_runner::RunTimings>) -> CompleteRequest {
        self.timings = timings.and_then(|timings| serde_json::to_value(timings).ok());
        self
    }

    /// The run's timings, if it told them readably.
    pub fn timings(&self) -> Option<abode_runner::RunTimings> {
        self.timings
            .clone()
            .and_then(|value| serde_json::from_value(value).ok())
    }

    pub fn outcome(&self) -> Result<Outcome, String> {
        let message = || self.message.clone().unwrap_or_default();
        match self.outcome.as_str() {
            "applied" => Ok(Outcome::Applied),
            "held" => Ok(Outcome::Held),
            other => match FailureKind::named(other) {
                Some(kind) => Ok(Outcome::Failed(Failure {
                    kind,
                    message: message(),
                    diagnostic: None,
                })),
                None => Err(format!("unknown outcome `{other}`")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// Values as hostile as real ones: quotes, backslashes, newlines,
    /// unicode, long, and bytes that are not UTF-8.
    fn hostile() -> Vec<String> {
        vec![
            String::new(),
            "plain".into(),
            "quote \" and back\\slash".into(),
            "line\nbreak\ttab\u{0}nul".into(),
            "ünïcødé 工作区 🚀 \u{202e}rtl".into(),
            "x".repeat(70_000),
        ]
    }

    fn context(value: &str) -> BuildContext {
        let mut context = BuildContext::development(std::path::Path::new("/base"));
        context.development = false;
        context.workspace_name = value.into();
        context.owner_email = value.into();
        context.owner_groups = vec![value.into(), "second".into()];
        context.template_version = value.into();
        context.is_prebuild_claim = true;
        context.parameters = BTreeMap::from([
            (value.to_string(), value.to_string()),
            ("other".to_string(), "[\"a\",\"b\"]".to_string()),
        ]);
        context
    }

    /// A job sent as JSON reads back the same, but for what the runner
    /// sets itself (directories, agent binary) and the agent token, which
    /// never travels.
    #[test]
    fn a_job_crosses_the_wire_unchanged() {
        let binary: Vec<u8> = (0..=255).collect();
        for value in hostile() {
            for kind in [JobKind::Build, JobKind::ApplySavedPlan] {
                let mut sent = context(&value);
                sent.agent_token = Some("secret".into());
                let inputs = JobInputs {
                    build_id: format!("build-{}", value.len()),
                    kind,
                    transition: Transition::Delete,
                    archive: binary.clone(),
                    state: (kind == JobKind::Build).then(|| value.as_bytes().to_vec()),
                    saved_plan: (kind == JobKind::ApplySavedPlan).then(|| binary.clone()),
                    context: sent.clone(),
                    state_backend: abode_runner::StateBackend {
                        url: "http://server-seen-by-the-server".into(),
                        build_id: format!("build-{}", value.len()),
                        secret: format!("run-{}", value.len()),
                    },
                    local_state: false,
                    forget: Vec::new(),
                    imports: Vec::new(),
                    workspace_uid: Some(200_001),
                    snapshots: Vec::new(),
                };
                let text = serde_json::to_string(&JobWire::from_inputs(kind, inputs)).unwrap();
                assert!(!text.contains("secret"));
                let back: JobWire = serde_json::from_str(&text).unwrap();
                let back = back
                    .into_inputs("http://server-seen-by-the-daemon")
                    .unwrap();
                assert_eq!(back.kind, kind);
                // The daemon's Terraform reaches the server as the daemon does.
                assert_eq!(back.state_backend.url, "http://server-seen-by-the-daemon");
                assert_eq!(back.state_backend.secret, format!("run-{}", value.len()));
                assert_eq!(back.transition, Transition::Delete);
                assert_eq!(back.build_id, format!("build-{}", value.len()));
                assert_eq!(back.archive, binary);
                assert_eq!(
                    back.state,
                    (kind == JobKind::Build).then(|| value.as_bytes().to_vec())
                );
                assert_eq!(
                    back.saved_plan,
                    (kind == JobKind::ApplySavedPlan).then(|| binary.clone())
                );
                let expected = BuildContext {
                    transition: Transition::Delete,
                    build_id: format!("build-{}", value.len()),
                    agent_token: None,
                    agent_binary: None,
                    agent_ca_cert: None,
                    volumes_dir: PathBuf::new(),
                    process_logs_dir: PathBuf::new(),
                    process_supervisor: None,
                    ..sent
                };
                assert_eq!(back.context, expected);
            }
        }
    }

    #[test]
    fn unknown_names_on_the_wire_are_errors() {
        let mut wire = JobWire::from_inputs(
            JobKind::Build,
            JobInputs {
                build_id: "b".into(),
                kind: JobKind::Build,
                transition: Transition::Start,
                archive: Vec::new(),
                state: None,
                saved_plan: None,
                context: context("v"),
                state_backend: abode_runner::StateBackend {
                    url: "http://server".into(),
                    build_id: "b".into(),
                    secret: "s".into(),
                },
                local_state: false,
                forget: Vec::new(),
                imports: Vec::new(),
                workspace_uid: None,
                snapshots: Vec::new(),
            },
        );
        wire.kind = "rebuild".into();
        assert!(wire
            .into_inputs("http://server")
            .unwrap_err()
            .contains("rebuild"));
        let verdict = VerdictWire {
            verdict: "maybe".into(),
            message: None,
        };
        assert!(verdict.parse().unwrap_err().contains("maybe"));
        let kept = StateAnswer {
            kept: "lost".into(),
            reason: None,
        };
        assert!(kept.parse().unwrap_err().contains("lost"));
        let hello = DaemonHello {
            daemon_id: "d".into(),
            slot: "s".into(),
            version: "0".into(),
        };
        for outcome in ["succeeded", "running", "awaiting_confirmation", "bogus"] {
            let request = CompleteRequest {
                hello: hello.clone(),
                outcome: outcome.into(),
                message: None,
                timings: None,
            };
            assert!(request.outcome().is_err(), "{outcome}");
        }
    }

    #[test]
    fn a_runs_timings_go_with_its_end_and_an_unreadable_report_is_left_out() {
        let hello = DaemonHello {
            daemon_id: "d".into(),
            slot: "s".into(),
            version: "0".into(),
        };
        let watch = abode_runner::Stopwatch::new();
        watch.stage(
            abode_contract::timings::Stage::Init,
            std::time::Instant::now(),
        );
        let timings = watch.report();
        let request =
            CompleteRequest::new(hello.clone(), &Ok(Ended::Applied)).with_timings(Some(&timings));
        let wire = serde_json::to_string(&request).unwrap();
        let back: CompleteRequest = serde_json::from_str(&wire).unwrap();
        assert_eq!(back.timings(), Some(timings));
        let odd = r#"{"daemon_id":"d","slot":"s","version":"0","outcome":"applied","timings":{"stages":[{"stage":"lunch","start_us":0,"end_us":1}]}}"#;
        let odd: CompleteRequest = serde_json::from_str(odd).unwrap();
        assert!(odd.outcome().is_ok());
        assert_eq!(odd.timings(), None);
        // An older daemon tells none.
        let old = r#"{"daemon_id":"d","slot":"s","version":"0","outcome":"applied"}"#;
        assert_eq!(
            serde_json::from_str::<CompleteRequest>(old)
                .unwrap()
                .timings(),
            None
        );
    }

    #[test]
    fn verdicts_and_state_answers_read_back() {
        for verdict in [
            Verdict::Apply,
            Verdict::Hold,
            Verdict::Block("blocked: \"x\"\n".into()),
        ] {
            let text = serde_json::to_string(&VerdictWire::from(&verdict)).unwrap();
            let back: VerdictWire = serde_json::from_str(&text).unwrap();
            assert_eq!(back.parse().unwrap(), verdict);
        }
        for kept in [
            StateKept::Missing,
            StateKept::Unchanged,
            StateKept::Saved,
            StateKept::Refused("its serial 3 is older".into()),
        ] {
            let text = serde_json::to_string(&StateAnswer::from(&kept)).unwrap();
            let back: StateAnswer = serde_json::from_str(&text).unwrap();
            assert_eq!(back.parse().unwrap(), kept);
        }
    }
}
