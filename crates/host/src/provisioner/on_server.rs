//! A build's job as the server sees it, wherever its Terraform runs.
//!
//! [`ServerJob`] is the server's half of every build: it hands out the job's
//! inputs, writes its log, judges its plan with the guard, keeps its state
//! (only a successor of the stored one), records what an apply made, and
//! records the end. An embedded worker uses it directly as its
//! [`BuildHost`]; an external daemon reaches the same methods through the
//! provisioner daemon routes (`abode-api`, `daemon_jobs.rs`), so a build is
//! judged and recorded the same way whichever provisioner ran it. The rules
//! that keep a runner from deciding for the server are here, once, for both:
//! a confirmed plan is never judged again, the plan held is the one the
//! guard judged (kept at the verdict), and a run may end `applied` only
//! after an `allow` (or a confirmation) and `held` only after a `confirm`.

use abode_contract::timings::Stage;
use abode_guard::Decision;
use abode_store::{
    Build, BuildStatus, JobKind, NewProtection, PrebuildPart, SavedPlan, Transition, Workspace,
};

use abode_protocol::Outcome;
use abode_runner::{
    BuildHost, Failure, JobInputs, LogLevel, LogSink, LogStage, StateBackend, StateKept, Verdict,
    STALE_PLAN_MESSAGE,
};

use super::ephemeral::EphemeralValues;
use super::guard_step::{describe_changes, guard_transition, judge_plan, Judged};
use super::quota_step;
use super::retain_step;
use super::run::{build_context, internal, storage};
use crate::room::Host;
use crate::states;
use abode_control::agents::agents_in_state;
use abode_control::ControlError;
use abode_credentials::secrets;

/// One claimed build's job, on the server.
pub struct ServerJob {
    host: Host,
    build: Build,
    workspace: Workspace,
    /// The lease holder running it (this server, or `provisioner:KEY_ID/KEY/ID`).
    holder: String,
    /// The holder's worker (a provisioner of this server, a daemon's slot)
    /// that claimed it, when known: the job is that claim's only.
    worker: Option<String>,
    kind: JobKind,
    /// What the build is to the prebuilt workspaces, worked out once when
    /// the job is loaded: its environment, its guard transition (a claim)
    /// and what follows its end read it here.
    prebuild: Option<PrebuildPart>,
    /// The build's ephemeral parameter values: masked in what the server
    /// keeps of the run (its log, its plan JSON).
    ephemeral: EphemeralValues,
}

/// How a run ended, as the server records it: a held build keeps the plan
/// its guard judged.
enum Recorded {
    Applied,
    Held(SavedPlan),
}

impl ServerJob {
    pub(crate) async fn load(
        host: &Host,
        build_id: &str,
        holder: &str,
        worker: Option<&str>,
        kind: JobKind,
    ) -> Result<ServerJob, Failure> {
        let store = &host.inner.store;
        let build = store.build_by_id(build_id).await.map_err(storage)?;
        let workspace = store
            .workspace_by_id(&build.workspace_id)
            .await
            .map_err(storage)?;
        let version = store
            .template_version_by_id(&build.template_version_id)
            .await
            .map_err(storage)?;
        let ephemeral = EphemeralValues::of(&version, &build);
        let prebuild = build.reason.prebuild_part();
        Ok(ServerJob {
            host: host.clone(),
            prebuild,
            build,
            workspace,
            holder: holder.to_string(),
            worker: worker.map(str::to_string),
            kind,
            ephemeral,
        })
    }

    pub fn build(&self) -> &Build {
        &self.build
    }

    pub(super) fn kind(&self) -> JobKind {
        self.kind
    }

    pub(super) fn host(&self) -> &Host {
        &self.host
    }

    /// `text` with the build's ephemeral values masked, as its log is.
    pub(super) fn masked(&self, text: &str) -> String {
        self.ephemeral.mask(text).into_owned()
    }

    /// A line of the build's log, masked like every other.
    pub(super) async fn note(&self, stage: &LogStage, level: LogLevel, text: &str) {
        self.log(stage, level, text).await;
    }

    /// What a runner needs to run the job; the build's first log line is
    /// written. A confirmed plan is handed out only for the state it was
    /// made from. The workspace's state lock is taken for the run of
    /// `holder` (`state_backend.rs`), last, so that nothing else can fail
    /// once it is taken.
    pub async fn inputs(&self) -> Result<JobInputs, Failure> {
        let kind = self.kind;
        self.queue_wait_ended().await;
        let holder = self.holder.as_str();
        let store = &self.host.inner.store;
        let (build, workspace) = (&self.build, &self.workspace);
        let archive = store
            .template_version_archive(&build.template_version_id)
            .await
            .map_err(storage)?;
        let state = store.state(&workspace.id).await.map_err(storage)?;
        let mut context = build_context(&self.host.inner.config, build, self.prebuild, workspace)?;
        // The owner's groups as they are at this build (`Everyone` included
        // for a person): `abode_workspace_owner.groups`.
        context.owner_groups = store
            .user_group_names(&workspace.owner_id)
            .await
            .map_err(storage)?;
        let mut snapshots = Vec::new();
        let saved_plan = match kind {
            JobKind::Build => {
                self.log(
                    &LogStage::SETUP,
                    LogLevel::Info,
                    &format!(
                        "build #{} ({}) of {}/{} on template {} version {}",
                        build.number,
                        build.transition,
                        build.owner_name,
                        build.workspace_name,
                        workspace.template_name,
                        build.template_version
                    ),
                )
                .await;
                None
            }
            JobKind::ApplySavedPlan => {
                let saved = store
                    .saved_plan(&build.id)
                    .await
                    .map_err(storage)?
                    .ok_or_else(|| Failure::failed("the saved plan of this build is gone"))?;
                self.log(
                    &LogStage::SETUP,
                    LogLevel::Info,
                    &format!(
                        "applying the saved plan {} confirmed by {}",
                        saved.digest,
                        build.confirmed_by.as_deref().unwrap_or("someone")
                    ),
                )
                .await;
                let state_digest = secrets::sha256_hex(state.as_deref().unwrap_or_default());
                if saved.state_digest != state_digest {
                    return Err(Failure::failed(STALE_PLAN_MESSAGE));
                }
                // What the plan destroys is archived first, or nothing is
                // applied (`snapshot_step.rs`): here, or by the daemon
                // where the volume is.
                let embedded = self.holder == self.host.inner.config.server_id;
                snapshots = super::snapshot_step::take(self, build, workspace, embedded).await?;
                Some(saved.plan)
            }
        };
        let local_state = kind == JobKind::ApplySavedPlan
            && store
                .saved_plan_on_local_state(&build.id)
                .await
                .map_err(storage)?;
        let (forget, imports) = match kind {
            JobKind::Build => {
                let forget = retain_step::retained_by_delete(&self.host, build)
                    .await?
                    .into_iter()
                    .map(|m| m.address)
                    .collect::<Vec<_>>();
                let adopt = retain_step::to_adopt(&self.host, build, workspace).await?;
                (forget, retain_step::import_targets(&adopt))
            }
            JobKind::ApplySavedPlan => (Vec::new(), Vec::new()),
        };
        // The workspace's own uid, given at its first build and kept.
        let workspace_uid = match self.host.inner.config.workspace_uids {
            Some((first, last)) => Some(
                store
                    .workspace_uid(&workspace.id, first, last)
                    .await
                    .map_err(|error| match error {
                        abode_store::StoreError::Conflict(_) => Failure::failed(format!(
                            "every uid of --workspace-uids {first}-{last} is given: widen the range"
                        )),
                        other => storage(other),
                    })?,
            ),
            None => None,
        };
        let state_backend = self
            .host
            .take_state_lock(build, holder)
            .await
            .map_err(internal)?;
        Ok(JobInputs {
            build_id: build.id.clone(),
            kind: super::run::run_kind(kind),
            transition: build.transition,
            archive,
            state,
            context,
            saved_plan,
            state_backend,
            local_state,
            forget,
            imports,
            workspace_uid,
            snapshots,
        })
    }

    /// Records how the run ended (held, or finished with its status, its
    /// notices and the plan retention), counts it, and tells the prebuild
    /// pools and the lifecycle scheduler; the status it ended in, or the
    /// error that kept its end from being recorded (the job is still held:
    /// a daemon tells it again).
    ///
    /// What the runner tells is checked against the server's own decisions
    /// first: a refused end is a conflict, and nothing is recorded.
    pub async fn finish(&self, told: Outcome) -> Result<BuildStatus, ControlError> {
        let result = match told {
            Outcome::Applied => {
                self.may_end_applied().await?;
                Ok(Recorded::Applied)
            }
            Outcome::Held => {
                let decision = self.decision().await?;
                if self.kind != JobKind::Build || decision != Some(Decision::Confirm) {
                    return Err(refused_end(&self.build, "held", decision));
                }
                // The plan the server judged, never one told now.
                let plan = self
                    .judged_plan()
                    .await
                    .map_err(|failure| ControlError::Conflict(failure.message))?;
                Ok(Recorded::Held(plan))
            }
            Outcome::Failed(failure) => Err(failure),
        };
        self.record_end(result).await
    }

    /// A run may end `applied` only after the server judged its plan
    /// `allow`, or for a confirmed plan.
    pub async fn may_end_applied(&self) -> Result<(), ControlError> {
        if self.kind == JobKind::ApplySavedPlan {
            return Ok(());
        }
        match self.decision().await? {
            Some(Decision::Allow) => Ok(()),
            other => Err(refused_end(&self.build, "applied", other)),
        }
    }

    async fn record_end(
        &self,
        result: Result<Recorded, Failure>,
    ) -> Result<BuildStatus, ControlError> {
        let host = &self.host;
        let build_id = self.build.id.as_str();
        if self.kind == JobKind::ApplySavedPlan {
            // Single use: whatever the apply did, this plan is never applied again.
            if let Err(error) = host.inner.store.delete_saved_plan(build_id).await {
                tracing::error!(build = %build_id, %error, "cannot delete a saved plan");
            }
        }
        if self.build.transition == Transition::Delete {
            // Whatever the delete did, each record is now open or void.
            abode_control::retention::settle(
                &self.host.inner.store,
                self.host.build_log(),
                self.host.notifications(),
                &self.build.id,
            )
            .await;
        }
        let (status, error, held) = match result {
            Ok(Recorded::Applied) => (BuildStatus::Succeeded, None, None),
            Ok(Recorded::Held(plan)) => (BuildStatus::AwaitingConfirmation, None, Some(plan)),
            Err(failure) => {
                self.log(&LogStage::CLEANUP, LogLevel::Error, &failure.message)
                    .await;
                (
                    super::run::failed_status(failure.kind),
                    Some(failure.message),
                    None,
                )
            }
        };
        let started = self.build.started_at.unwrap_or(self.build.created_at);
        super::count_build_end(host, &self.build, status, started);
        match held {
            Some(plan) => host.held().hold(build_id, plan).await,
            None => {
                let done = match status {
                    BuildStatus::Succeeded => "build succeeded".to_string(),
                    other => format!("build {other}"),
                };
                let level = if status == BuildStatus::Succeeded {
                    LogLevel::Info
                } else {
                    LogLevel::Error
                };
                self.log(&LogStage::CLEANUP, level, &done).await;
                let notices = host
                    .notifications()
                    .end_notices_of(build_id, status, error.as_deref())
                    .await;
                if let Err(error) = host
                    .inner
                    .store
                    .finish_build_notifying(build_id, status, error.as_deref(), &notices)
                    .await
                {
                    tracing::error!(build = %build_id, %error, "cannot record the end of a build");
                    return Err(error.into());
                }
            }
        }
        super::prune_plans(host, build_id).await;
        host.build_log().written();
        tracing::info!(build = %build_id, status = %status, "build finished");
        if let Some(part) = self.prebuild {
            host.prebuilds().build_ended(build_id, part, status).await;
        }
        host.scheduler().build_ended(&self.build, status).await;
        host.build_ended_chain(&self.build, status).await;
        Ok(status)
    }

    /// The guard's decision on this build's plan as stored now, if it was
    /// judged (the job may have been loaded before).
    async fn decision(&self) -> Result<Option<Decision>, ControlError> {
        let build = self.host.inner.store.build_by_id(&self.build.id).await?;
        Ok(abode_control::guard_decision(&build))
    }

    /// Keeps the plan sent to be judged when the guard held it: the plan
    /// held is the one judged, whatever the runner says later.
    async fn keep_judged_plan(&self, plan: Vec<u8>) -> Result<(), Failure> {
        let store = &self.host.inner.store;
        let state = store.state(&self.workspace.id).await.map_err(storage)?;
        let saved = SavedPlan {
            digest: secrets::sha256_hex(&plan),
            state_digest: secrets::sha256_hex(state.as_deref().unwrap_or_default()),
            plan,
        };
        store
            .put_saved_plan(&self.build.id, &saved)
            .await
            .map_err(storage)
    }

    /// The plan kept when the guard held it (`keep_judged_plan`).
    async fn judged_plan(&self) -> Result<SavedPlan, Failure> {
        self.host
            .inner
            .store
            .saved_plan(&self.build.id)
            .await
            .map_err(storage)?
            .ok_or_else(|| Failure::failed("the plan the guard held is gone"))
    }

    /// The state as stored now, for what an apply made.
    pub async fn stored_state(&self) -> Result<Vec<u8>, Failure> {
        self.host
            .inner
            .store
            .state(&self.workspace.id)
            .await
            .map_err(storage)?
            .ok_or_else(|| Failure::failed("no state was stored after the apply"))
    }
}

/// Why a run may not end as it told.
fn refused_end(build: &Build, outcome: &str, decision: Option<Decision>) -> ControlError {
    let decision = match decision {
        Some(decision) => decision.as_str(),
        None => "none yet",
    };
    ControlError::Conflict(format!(
        "build #{} cannot end `{outcome}`: the server's decision on its plan is {decision}",
        build.number
    ))
}

impl LogSink for ServerJob {
    async fn log(&self, stage: &LogStage, level: LogLevel, text: &str) {
        let text = self.ephemeral.mask(text);
        self.host
            .build_log()
            .note(&self.build.id, stage, level, &text)
            .await;
    }
}

/// Why a plan was not judged.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    /// The build's plan was judged already, and this is another plan: the
    /// first verdict stands for a build (a runner that could ask again
    /// could turn a hold into an apply with a plan that looks harmless).
    #[error("build #{number}'s plan was judged already ({decision}); the first verdict stands, and another plan is not judged")]
    AlreadyJudged { number: i64, decision: &'static str },
    #[error("{}", .0.message)]
    Failed(Failure),
}

impl From<Failure> for JudgeError {
    fn from(failure: Failure) -> Self {
        JudgeError::Failed(failure)
    }
}

impl From<JudgeError> for ControlError {
    fn from(error: JudgeError) -> Self {
        match error {
            already @ JudgeError::AlreadyJudged { .. } => {
                ControlError::AlreadyJudged(already.to_string())
            }
            JudgeError::Failed(failure) => ControlError::Conflict(failure.message),
        }
    }
}

impl ServerJob {
    /// The verdict a plan already judged for this build still stands for:
    /// the same plan asked again (a daemon whose first answer was lost
    /// asks again) gets the first verdict; another plan is refused.
    /// `plan_json` is the plan as the server keeps it (`plan_to_keep`).
    async fn standing_verdict(&self, plan_json: &[u8]) -> Result<Option<Verdict>, JudgeError> {
        let store = &self.host.inner.store;
        let build = store.build_by_id(&self.build.id).await.map_err(storage)?;
        let Some(report) = build.guard_report else {
            return Ok(None);
        };
        if let Some(refusal) = &build.refusal {
            // Refused before apply (quota_step.rs): the refusal stands too.
            return Ok(Some(Verdict::Block(format!(
                "build #{} was refused by {refusal}; nothing was applied",
                build.number
            ))));
        }
        let judged = store
            .build_plan_json(&self.build.id)
            .await
            .map_err(storage)?;
        if judged.as_deref().map(str::as_bytes) != Some(plan_json) {
            return Err(JudgeError::AlreadyJudged {
                number: build.number,
                decision: report.decision.as_str(),
            });
        }
        Ok(Some(match report.decision {
            Decision::Allow => Verdict::Apply,
            Decision::Confirm => Verdict::Hold,
            Decision::Block => Verdict::Block(format!(
                "blocked by the plan guard: {}",
                describe_changes(&report, Decision::Block)
            )),
        }))
    }

    /// The guard with the template's annotations and the workspace's
    /// remembered protections; the plan JSON and the report are kept with
    /// the build and the report is written to the log. Once per build: the
    /// first verdict stands ([`JudgeError::AlreadyJudged`]).
    pub async fn judge_once(
        &self,
        plan_json: Vec<u8>,
        plan: Vec<u8>,
    ) -> Result<Verdict, JudgeError> {
        let (build, host) = (&self.build, &self.host);
        if self.kind != JobKind::Build {
            return Err(Failure::failed(
                "a confirmed plan is applied as it was confirmed: it is not judged again",
            )
            .into());
        }
        // Two `abode_env`s that set one name for one agent: refused before
        // anything is applied, naming both.
        // An `abode_script` whose agent_id names no agent of the plan.
        if let Some(problem) = script_without_agent(&plan_json) {
            return Err(Failure::failed(format!("{problem}; nothing was applied")).into());
        }
        if let Some(problem) = env_duplicate(&plan_json) {
            return Err(Failure::failed(format!("{problem}; nothing was applied")).into());
        }
        // What is kept of the plan: its ephemeral values masked.
        let kept_plan = self.ephemeral.plan_to_keep(&plan_json);
        if let Some(verdict) = self.standing_verdict(&kept_plan).await? {
            return Ok(verdict);
        }
        let guarding = self.stage_starts();
        // The scheduler's builds are the system's: a delete it starts (a
        // dormant deletion) destroys no protected resource without a person.
        let initiator = if build.reason.is_scheduler() || retain_step::destroys_retained(build) {
            abode_guard::Initiator::System
        } else {
            abode_guard::Initiator::Person
        };
        let retained = retain_step::retained_by_delete(host, build).await?;
        let adopted = retain_step::to_adopt(host, build, &self.workspace).await?;
        let mut extra_rules = retain_step::adoption_rules(&adopted);
        extra_rules.extend(retain_step::destroy_rules(host, build).await?);
        let Judged { report } = judge_plan(
            host,
            &plan_json,
            &self.workspace.id,
            guard_transition(build.transition, self.prebuild),
            initiator,
            &retain_step::addresses(&retained),
            extra_rules,
        )
        .await?;
        host.inner
            .config
            .metrics
            .guard_decision(report.decision.as_str());
        let plan_text = String::from_utf8_lossy(&kept_plan);
        // Only while this holder still runs the build: a run that lost it
        // (frozen, then queued again elsewhere) writes nothing over the new
        // run's plan, and applies nothing. And only if no verdict came
        // first (two judges at once: the store lets one write).
        if !host
            .inner
            .store
            .set_judged_plan(&build.id, &self.holder, &plan_text, &report)
            .await
            .map_err(storage)?
        {
            let judged = host
                .inner
                .store
                .build_by_id(&build.id)
                .await
                .map_err(storage)?
                .guard_report;
            if let Some(first) = judged {
                return Err(JudgeError::AlreadyJudged {
                    number: build.number,
                    decision: first.decision.as_str(),
                });
            }
            return Err(Failure::failed(format!(
                "{} before its plan was judged; nothing was applied",
                abode_runner::LEASE_LOST
            ))
            .into());
        }
        let level = match report.decision {
            Decision::Allow => LogLevel::Info,
            _ => LogLevel::Warn,
        };
        for line in abode_guard::render_text(&report, false).lines() {
            if !line.trim().is_empty() {
                self.log(&LogStage::GUARD, level, line).await;
            }
        }
        self.stage_ended(Stage::Guard, guarding).await;
        // What the delete forgets is on record before anything is applied.
        if report.decision != Decision::Block && !report.retained.is_empty() {
            let retaining = self.stage_starts();
            let before = host
                .inner
                .store
                .state(&self.workspace.id)
                .await
                .map_err(storage)?;
            let records = retain_step::new_records(
                &plan_json,
                &report,
                &retained,
                before.as_deref(),
                host.inner.config.clock.now_ms(),
            );
            host.inner
                .store
                .insert_retained(&build.id, &build.initiator_name, &records)
                .await
                .map_err(storage)?;
            self.stage_ended(Stage::Retain, retaining).await;
        }
        // The cost of what the plan leaves, reserved before any apply (and
        // refused when it does not fit the owner's budget).
        if report.decision != Decision::Block {
            let charging = self.stage_starts();
            let charge =
                quota_step::charge(&self.host, &self.build, &self.holder, &plan_json).await;
            self.stage_ended(Stage::Quota, charging).await;
            for (level, line) in &charge.lines {
                self.note(&LogStage::QUOTA, *level, line).await;
            }
            if let quota_step::Charged::Refused(message) = charge.outcome? {
                return Ok(Verdict::Block(message));
            }
        }
        match report.decision {
            Decision::Allow => Ok(Verdict::Apply),
            Decision::Block => {
                let message = format!(
                    "blocked by the plan guard: {}",
                    describe_changes(&report, Decision::Block)
                );
                host.audit_system("build.blocked", build, Some(message.clone()))
                    .await;
                Ok(Verdict::Block(message))
            }
            Decision::Confirm => {
                let digest = secrets::sha256_hex(&plan);
                self.log(
                    &LogStage::GUARD,
                    LogLevel::Warn,
                    &format!(
                        "held for confirmation: {}; nothing was applied. Review, then confirm with: abode builds confirm {}/{} {} --digest {digest}",
                        describe_changes(&report, Decision::Confirm),
                        build.owner_name,
                        build.workspace_name,
                        build.number
                    ),
                )
                .await;
                self.keep_judged_plan(plan).await?;
                Ok(Verdict::Hold)
            }
        }
    }
}

/// The first `abode_env` of the plan that sets a name another one sets for
/// the same agent (`abode_contract::env`). Only a plan that names the type
/// is parsed.
fn env_duplicate(plan_json: &[u8]) -> Option<String> {
    const TYPE: &[u8] = b"\"abode_env\"";
    if !plan_json.windows(TYPE.len()).any(|window| window == TYPE) {
        return None;
    }
    let plan = serde_json::from_slice::<serde_json::Value>(plan_json).ok()?;
    abode_contract::env::duplicates_in_plan(&plan)
        .into_iter()
        .next()
}

/// The first `abode_script` of the plan whose `agent_id` names no
/// `abode_agent` of it (`abode_contract::script`).
fn script_without_agent(plan_json: &[u8]) -> Option<String> {
    const TYPE: &[u8] = b"\"abode_script\"";
    if !plan_json.windows(TYPE.len()).any(|window| window == TYPE) {
        return None;
    }
    let plan = serde_json::from_slice::<serde_json::Value>(plan_json).ok()?;
    abode_contract::script::unknown_agents_in_plan(&plan)
        .into_iter()
        .next()
}

impl BuildHost for ServerJob {
    async fn judge(&self, plan_json: Vec<u8>, plan: Vec<u8>) -> Result<Verdict, Failure> {
        self.judge_once(plan_json, plan)
            .await
            .map_err(|error| match error {
                JudgeError::Failed(failure) => failure,
                already => Failure::failed(already.to_string()),
            })
    }

    async fn keep_state(&self, state: Vec<u8>, _last: bool, secret: &str) -> StateKept {
        states::keep_state_bytes(&self.host, &self.build.id, state, Some(secret)).await
    }

    async fn applied(&self) -> Result<(), Failure> {
        self.may_end_applied().await.map_err(internal)?;
        let state = self.stored_state().await?;
        self.record_applied(state).await
    }

    async fn holds_lease(&self) -> bool {
        match self
            .host
            .inner
            .store
            .claimed_job_kind(&self.build.id, &self.holder, self.worker.as_deref())
            .await
        {
            Ok(kind) => kind.is_some(),
            // Unknown is not held: nothing is judged or applied on a guess.
            Err(error) => {
                tracing::error!(build = %self.build.id, %error, "cannot read whether this server still holds the build's lease");
                false
            }
        }
    }

    async fn agents_shut_down(&self) -> bool {
        match self.shut_down_agents().await {
            Ok(done) => done,
            // The stop goes on: a shutdown script never holds it.
            Err(failure) => {
                self.note(
                    &LogStage::SHUTDOWN,
                    LogLevel::Warn,
                    &format!(
                        "cannot ask the agents to run their shutdown scripts; the build goes on: {}",
                        failure.message
                    ),
                )
                .await;
                true
            }
        }
    }

    async fn timings(&self, timings: abode_runner::RunTimings) {
        self.run_timings(timings).await;
    }

    async fn release_state_lock(&self, backend: &StateBackend) {
        if let Err(error) = self
            .host
            .release_state_lock(&backend.build_id, &backend.secret)
            .await
        {
            tracing::error!(build = %self.build.id, %error, "cannot release the workspace's state lock; an owner can (`abode workspaces unlock`)");
        }
    }
}

impl ServerJob {
    /// Protections remembered from the applied plan; a start's agents read
    /// from its state; a delete's workspace marked deleted.
    pub async fn record_applied(&self, state: Vec<u8>) -> Result<(), Failure> {
        let (build, workspace) = (&self.build, &self.workspace);
        let store = &self.host.inner.store;
        let plan_json = store
            .build_plan_json(&build.id)
            .await
            .map_err(storage)?
            .unwrap_or_default();
        let plan = abode_guard::read_plan_slice(plan_json.as_bytes())
            .map_err(|error| Failure::failed(format!("cannot read the plan: {error}")))?;
        let memory = self
            .host
            .held()
            .remembered(&workspace.id)
            .await
            .map_err(internal)?;
        let remembered = abode_guard::protections_after_apply(
            &plan,
            guard_transition(build.transition, self.prebuild),
            &[],
            &memory,
        );
        let remembered: Vec<NewProtection> = remembered
            .into_iter()
            .map(|protection| NewProtection {
                address: protection.address,
                mode: protection.mode.as_str().to_string(),
                retain_expire: protection
                    .retain
                    .map(|rule| rule.expire.as_str().to_string()),
                retain_for_secs: protection
                    .retain
                    .and_then(|rule| rule.retain_for_secs)
                    .and_then(|secs| i64::try_from(secs).ok()),
            })
            .collect();
        store
            .replace_protections(&workspace.id, &build.id, &remembered)
            .await
            .map_err(storage)?;
        match build.transition {
            Transition::Start => {
                let read = agents_in_state(&state).map_err(|error| {
                    Failure::failed(format!("the state after apply is not valid JSON: {error}"))
                })?;
                for problem in &read.app_problems {
                    self.log(
                        &LogStage::APPLY,
                        LogLevel::Warn,
                        &format!("an app is left out: {problem}"),
                    )
                    .await;
                }
                let agents = read.agents;
                if !agents.is_empty() {
                    let names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
                    self.log(
                        &LogStage::APPLY,
                        LogLevel::Info,
                        &format!("workspace agent(s): {}", names.join(", ")),
                    )
                    .await;
                }
                store
                    .replace_agents(&workspace.id, &build.id, &agents)
                    .await
                    .map_err(storage)?;
                retain_step::close_adopted(self, build, workspace).await;
            }
            Transition::Delete => {
                retain_step::close_destroyed(self, build).await;
                store
                    .replace_agents(&workspace.id, &build.id, &[])
                    .await
                    .map_err(storage)?;
                store
                    .mark_workspace_deleted(&workspace.id)
                    .await
                    .map_err(storage)?;
            }
            Transition::Stop => {}
        }
        Ok(())
    }
}
