//! Abode is the state backend of every build's Terraform, and its lock is
//! the fence that keeps one Terraform per workspace.
//!
//! Leases decide who *should* run a build; they cannot stop a holder that
//! was frozen (a paused VM, a stopped process) and wakes up after another
//! took over. So every build's Terraform keeps its state through Terraform's
//! own `http` backend, served by the server (`/api/v1/builds/{id}/state`),
//! with a secret that only that run knows. The run takes its workspace's
//! state lock when it starts (`state_locks` in the store); Terraform's lock,
//! every state read and every state write is answered only for the run that
//! holds it. A run whose lock was taken from it (its unjudged build queued
//! again, or a person's unlock) cannot lock, read or write the state, so
//! Terraform itself refuses to plan or apply beside another.
//!
//! A lock is released only when the run reports that its Terraform ended
//! (or by a person, audited): a build failed because its holder stopped
//! renewing its lease keeps it, and the workspace is *locked by a lost
//! holder* until then; new builds of it wait.

use abode_store::{Build, StateLock};
use serde::Deserialize;

use abode_runner::state_backend::StateBackend;
use abode_runner::{LogLevel, LogStage};

use crate::room::Host;
use crate::states::{write_successor, Fence, Written};
use abode_control::authz::Action;
use abode_control::Caller;
use abode_control::ControlError;
use abode_credentials::secrets;

/// Why a run may not touch its workspace's state: the same words whoever
/// asks (anyone who knows a build's id can), naming no build or holder.
const NOT_HOLDING: &str = "this run does not hold the workspace's state lock: another run of \
     the build took it over, a person unlocked the workspace, or the build was queued again";

/// A new run secret.
fn new_secret() -> String {
    secrets::new_session_token()
}

/// Terraform's lock information, as its `http` backend sends and reads it.
#[derive(Debug, Deserialize)]
struct LockInfo {
    #[serde(rename = "ID")]
    id: String,
}

/// What a lock request came to.
#[derive(Debug)]
pub enum LockAnswer {
    Locked,
    /// Held by another: Terraform's lock information of the holder (JSON),
    /// which Terraform prints.
    Held(String),
}

/// A lock a person released (`abode workspaces unlock`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockView {
    pub build_number: i64,
    pub holder: String,
    pub taken_at: i64,
    /// Set when the holder was found gone and its build failed.
    pub lost_at: Option<i64>,
}

impl From<StateLock> for LockView {
    fn from(lock: StateLock) -> LockView {
        LockView {
            build_number: lock.build_number,
            holder: lock.holder,
            taken_at: lock.taken_at,
            lost_at: lock.lost_at,
        }
    }
}

impl Host {
    /// Takes the workspace's state lock for a run of `build` by `holder`;
    /// the run's backend settings. A conflict when another build holds it
    /// (the claim leaves such jobs queued, so this is a race lost).
    pub(crate) async fn take_state_lock(
        &self,
        build: &Build,
        holder: &str,
    ) -> Result<StateBackend, ControlError> {
        let secret = new_secret();
        let store = &self.inner.store;
        let taken = store
            .take_state_lock(
                &build.workspace_id,
                &build.id,
                holder,
                &secrets::token_hash(&secret),
            )
            .await?;
        if !taken {
            let held = store.state_lock_of_workspace(&build.workspace_id).await?;
            return Err(ControlError::Conflict(match held {
                Some(lock) => format!(
                    "the workspace's state is locked by build #{} ({})",
                    lock.build_number,
                    abode_control::holders::describe_holder(&lock.holder)
                ),
                None => "the workspace's state lock could not be taken".into(),
            }));
        }
        Ok(StateBackend {
            url: self.inner.config.state_backend_url.clone(),
            build_id: build.id.clone(),
            secret,
        })
    }

    /// The lock of `build_id` if the run's secret opens it; otherwise a
    /// conflict saying who holds the workspace's state now.
    async fn held_lock(&self, build_id: &str, secret: &str) -> Result<StateLock, ControlError> {
        let store = &self.inner.store;
        let lock = store.state_lock_of_build(build_id).await?;
        if let Some(lock) = lock {
            if lock.secret_hash == secrets::token_hash(secret) {
                return Ok(lock);
            }
        }
        Err(ControlError::Conflict(NOT_HOLDING.to_string()))
    }

    /// Whether `secret` is the run's that holds `build_id`'s lock: asked
    /// before a request's body is read, so that nobody else makes the
    /// server take in a state-sized body.
    pub async fn holds_state_lock(&self, build_id: &str, secret: &str) -> Result<(), ControlError> {
        self.held_lock(build_id, secret).await.map(|_| ())
    }

    /// The stored state, for the run holding the lock.
    pub async fn backend_state(
        &self,
        build_id: &str,
        secret: &str,
    ) -> Result<Option<Vec<u8>>, ControlError> {
        let lock = self.held_lock(build_id, secret).await?;
        Ok(self.inner.store.state(&lock.workspace_id).await?)
    }

    /// Stores a state Terraform wrote, for the run holding the lock (and,
    /// when Terraform names its lock, holding that one), only if it follows
    /// the stored state (same lineage, serial not lower).
    pub async fn backend_put_state(
        &self,
        build_id: &str,
        secret: &str,
        terraform_lock_id: Option<&str>,
        state: Vec<u8>,
    ) -> Result<(), ControlError> {
        let lock = self.held_lock(build_id, secret).await?;
        let fence = Fence {
            secret_hash: lock.secret_hash,
            terraform_lock_id,
        };
        match write_successor(self, &lock.workspace_id, build_id, &state, Some(&fence)).await {
            Written::Saved | Written::Unchanged => Ok(()),
            Written::NotSuccessor(reason) => Err(ControlError::Conflict(format!(
                "the state was not stored: {reason}"
            ))),
            Written::Fenced => Err(ControlError::Conflict(NOT_HOLDING.to_string())),
            // Answered as an error Terraform tries again (it keeps the state
            // meanwhile); the log says why, once it can be written.
            Written::Failed(error) if error.is_transient() => {
                let why = if error.is_disk_full() {
                    "disk full"
                } else {
                    "the database is unreachable"
                };
                tracing::warn!(build = %build_id, %error, "cannot store a state now ({why}); Terraform keeps it and tries again");
                self.build_log()
                    .note(
                        build_id,
                        &LogStage::APPLY,
                        LogLevel::Warn,
                        &format!(
                        "{why}: the server cannot store the state now ({error}); Terraform keeps \
                         it and tries again"
                    ),
                    )
                    .await;
                Err(error.into())
            }
            Written::Failed(error) => Err(error.into()),
            Written::KeptChanging => Err(ControlError::Internal(
                "the stored state kept changing while this one was compared".into(),
            )),
        }
    }

    /// Terraform's lock, under the run's state lock.
    pub async fn backend_lock(
        &self,
        build_id: &str,
        secret: &str,
        info: &[u8],
    ) -> Result<LockAnswer, ControlError> {
        let parsed: LockInfo = serde_json::from_slice(info).map_err(|error| {
            ControlError::BadRequest(format!("not Terraform's lock information: {error}"))
        })?;
        let info_text = String::from_utf8_lossy(info).into_owned();
        let store = &self.inner.store;
        let lock = match self.held_lock(build_id, secret).await {
            Ok(lock) => lock,
            Err(ControlError::Conflict(reason)) => {
                return Ok(LockAnswer::Held(lock_info_json(
                    build_id,
                    "another run",
                    &reason,
                )))
            }
            Err(error) => return Err(error),
        };
        if store
            .set_terraform_lock(build_id, &lock.secret_hash, &parsed.id, &info_text)
            .await?
        {
            return Ok(LockAnswer::Locked);
        }
        let held = store.state_lock_of_build(build_id).await?;
        Ok(LockAnswer::Held(
            held.and_then(|lock| lock.terraform_lock_info)
                .unwrap_or_else(|| {
                    lock_info_json(
                        build_id,
                        &lock.holder,
                        "another Terraform of this build holds the lock",
                    )
                }),
        ))
    }

    /// Releases Terraform's lock; a conflict if the run does not hold it.
    pub async fn backend_unlock(
        &self,
        build_id: &str,
        secret: &str,
        info: &[u8],
    ) -> Result<(), ControlError> {
        let parsed: LockInfo = serde_json::from_slice(info).map_err(|error| {
            ControlError::BadRequest(format!("not Terraform's lock information: {error}"))
        })?;
        let lock = self.held_lock(build_id, secret).await?;
        if self
            .inner
            .store
            .clear_terraform_lock(build_id, &lock.secret_hash, &parsed.id)
            .await?
            || lock.terraform_lock_id.is_none()
        {
            return Ok(());
        }
        Err(ControlError::Conflict(format!(
            "the lock {} is not the one held",
            parsed.id
        )))
    }

    /// The run's Terraform ended: its state lock goes, and the workspace's
    /// next build may run. False when the run no longer held it.
    pub async fn release_state_lock(
        &self,
        build_id: &str,
        secret: &str,
    ) -> Result<bool, ControlError> {
        let store = &self.inner.store;
        let lock = store.state_lock_of_build(build_id).await?;
        let released = store
            .release_state_lock(build_id, &secrets::token_hash(secret))
            .await?;
        if released {
            if let Some(lock) = lock.filter(|lock| lock.lost_at.is_some()) {
                self.build_log().note(
                    build_id,
                    &LogStage::CLEANUP,
                    LogLevel::Info,
                    &format!(
                        "{} reported that its Terraform of this build ended; the workspace's state lock is released",
                        abode_control::holders::describe_holder(&lock.holder)
                    ),
                )
                .await;
            }
            self.jobs().freed().await;
        }
        Ok(released)
    }

    /// Releases the locks this server's runs took and none of which runs in
    /// this process any more (a release that failed, a crash between the
    /// lock and the work dir): the keeper's round, so that no workspace
    /// stays locked by a server that is alive and runs nothing of it.
    pub(crate) async fn release_abandoned_locks(&self) {
        let server = &self.inner.config.server_id;
        let store = &self.inner.store;
        let locks = match store.state_locks_of_holder(server).await {
            Ok(locks) => locks,
            Err(error) => {
                tracing::warn!(%error, "cannot read this server's state locks");
                return;
            }
        };
        for lock in locks {
            if self.builds().cancel_switches().runs(&lock.build_id) {
                continue;
            }
            match store
                .release_state_lock_of_holder(&lock.build_id, server)
                .await
            {
                Ok(true) => {
                    tracing::warn!(build = %lock.build_id, "released a state lock this server held with no run of it left");
                    self.jobs().wake_all();
                }
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(build = %lock.build_id, %error, "cannot release a state lock")
                }
            }
        }
    }

    /// A person's unlock (`abode workspaces unlock WS --build N`), after
    /// checking that the holder's Terraform no longer runs: audited like a
    /// confirmation. Only the lock of the build named, and only once that
    /// build has ended: a running build's lock is its own.
    pub async fn unlock_workspace(
        &self,
        caller: &Caller,
        reference: &str,
        build_number: i64,
    ) -> Result<LockView, ControlError> {
        let workspace = self
            .workspaces()
            .resolve(caller, reference, Action::WorkspaceUnlock)
            .await?;
        let store = &self.inner.store;
        let lock = store
            .state_lock_of_workspace(&workspace.id)
            .await?
            .ok_or_else(|| {
                ControlError::Conflict(format!("workspace \"{reference}\" is not locked"))
            })?;
        if lock.build_number != build_number {
            return Err(ControlError::Conflict(format!(
                "workspace \"{reference}\" is locked by build #{}, not #{build_number}",
                lock.build_number
            )));
        }
        let build = store.build_by_id(&lock.build_id).await?;
        if !build.status.is_final() {
            return Err(ControlError::Conflict(format!(
                "build #{} is still {}: cancel it instead; its lock goes when its Terraform ends",
                build.number, build.status
            )));
        }
        if !store
            .force_release_state_lock(&workspace.id, &lock.build_id)
            .await?
        {
            return Err(ControlError::Conflict(format!(
                "workspace \"{reference}\" is no longer locked by build #{build_number}"
            )));
        }
        self.audit_workspace(
            caller,
            &workspace.id,
            "workspace.unlock",
            &format!("{}/{}", workspace.owner_name, workspace.name),
            "success",
            Some(format!(
                "build={} holder={} lost_at={}",
                lock.build_number,
                lock.holder,
                lock.lost_at
                    .map_or("-".into(), abode_control::times::utc_text)
            )),
        )
        .await;
        self.build_log().note(
            &lock.build_id,
            &LogStage::CLEANUP,
            LogLevel::Warn,
            &format!(
                "{} unlocked the workspace's state; whatever this build's Terraform still writes is refused",
                caller.user.username
            ),
        )
        .await;
        self.jobs().freed().await;
        Ok(lock.into())
    }
}

fn lock_info_json(build_id: &str, holder: &str, reason: &str) -> String {
    serde_json::json!({
        "ID": format!("abode-{build_id}"),
        "Operation": "abode",
        "Who": holder,
        "Info": reason,
        "Version": "",
        "Created": "",
        "Path": "",
    })
    .to_string()
}
