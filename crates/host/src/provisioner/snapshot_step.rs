//! A snapshot before a confirmed destroy (issue 47): before the
//! provisioner applies a plan a person confirmed, every protected resource
//! the plan destroys or replaces is snapshotted as its `abode_protect` says.
//! An `abode_volume`'s files are archived (`snapshot`, true by default for
//! a volume) in the checksummed format of `abode retained export`, as a
//! retained record of kind `snapshot`; a `snapshot_command` runs, sandboxed
//! like Terraform and with its environment, with the resource's attributes
//! in `ABODE_SNAPSHOT_*` and `ABODE_ATTR_*`. Any of it failing fails the
//! build before anything is applied: the volume is as it was, and the plan
//! can be made and confirmed again.
//!
//! Where the volume is, the snapshot is taken. A build on the server's own
//! provisioners takes it here, before the run is handed out ([`take`]):
//! the server reads the volume (it is root when workspaces have uids of
//! their own). A build an external daemon runs keeps its volumes on the
//! daemon's machine: the run gets one `SnapshotOrder` per resource
//! (`abode_runner::snapshot`), runs the commands in the daemon's sandbox
//! with the daemon's environment, archives the volume there and streams it
//! to `PUT /provisionerd/jobs/{build}/snapshots/{index}`, which lands in
//! [`keep_uploaded`]. Either way the archive is the provisioner's, never
//! the template's, and the server keeps it in its own snapshots dir (0700):
//! written as `*.partial` under an exclusive lock, synced, checked against
//! its manifest (an upload), renamed, recorded. A `*.partial` nobody holds
//! the lock of was left by a crash and is removed at start and before each
//! new archive ([`sweep_partials`]).

use std::path::{Path, PathBuf};

use abode_control::ControlError;
use abode_guard::{Action, Address, SnapshotRule};
use abode_protocol::SnapshotAnswer;
use abode_runner::{ArchiveOrder, Failure, LogLevel, LogStage, SnapshotOrder};
use abode_store::{Build, NewSnapshot, Workspace};
use serde_json::Value;

use super::on_server::ServerJob;
use super::run::storage;

/// What one destroyed or replaced resource needs before the apply.
struct Order {
    address: String,
    resource_type: String,
    provider: String,
    /// Its attributes before the plan, sensitive values hidden.
    attributes: Value,
    /// Its files are archived (an `abode_volume`).
    archive: bool,
    /// `snapshot_command`s of the annotations covering it.
    commands: Vec<Result<String, String>>,
    expires_at: Option<i64>,
    expire_action: String,
}

impl Order {
    /// The volume's name (an `abode_volume`'s `name`; empty for another type).
    fn volume_name(&self) -> String {
        self.attributes
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    }
}

/// Takes every snapshot the confirmed plan of `build` asks for, or fails
/// with nothing applied. `embedded`: the build runs on this server's own
/// provisioners (where its volumes are), and they are taken here; for a
/// daemon's run, the orders it takes on its machine before its apply.
pub(super) async fn take(
    job: &ServerJob,
    build: &Build,
    workspace: &Workspace,
    embedded: bool,
) -> Result<Vec<SnapshotOrder>, Failure> {
    // Destroying a retained resource on purpose snapshots nothing.
    if super::retain_step::destroys_retained(build) {
        return Ok(Vec::new());
    }
    let orders = orders(job, build).await?;
    if orders.is_empty() {
        return Ok(Vec::new());
    }
    if !embedded {
        return for_daemon(job, build, workspace, &orders).await;
    }
    let started = job.stage_starts();
    let taken = take_here(job, build, workspace, &orders).await;
    job.stage_ended(abode_contract::timings::Stage::Snapshot, started)
        .await;
    taken.map(|()| Vec::new())
}

/// The snapshots of an embedded run, taken on this server.
async fn take_here(
    job: &ServerJob,
    build: &Build,
    workspace: &Workspace,
    orders: &[Order],
) -> Result<(), Failure> {
    let config = &job.host().inner.config;
    for order in orders {
        for command in &order.commands {
            let command = usable(command)?;
            let mut env = config.terraform_env.clone();
            env.extend(command_env(build, workspace, order));
            abode_runner::snapshot::run_command(
                job,
                config.terraform_isolation.as_deref(),
                &config.work_dir().join(format!("{}-snapshot", build.id)),
                env,
                &order.address,
                command,
            )
            .await?;
        }
        if order.archive {
            archive(job, build, workspace, order).await?;
        }
    }
    Ok(())
}

/// A `snapshot_command` as the annotation gave it, or why it is not one.
fn usable(command: &Result<String, String>) -> Result<&str, Failure> {
    command
        .as_deref()
        .map_err(|why| Failure::failed(format!("{why}; nothing was applied")))
}

/// What a daemon's run takes before its apply: every command checked now,
/// each archive named (its record's id) and timed by this server.
async fn for_daemon(
    job: &ServerJob,
    build: &Build,
    workspace: &Workspace,
    orders: &[Order],
) -> Result<Vec<SnapshotOrder>, Failure> {
    let exported_at = abode_control::times::utc_text(job.host().now_ms());
    let mut handed = Vec::with_capacity(orders.len());
    for (index, order) in orders.iter().enumerate() {
        let commands = order
            .commands
            .iter()
            .map(|command| usable(command).map(str::to_string))
            .collect::<Result<Vec<String>, Failure>>()?;
        handed.push(SnapshotOrder {
            index: u32::try_from(index).unwrap_or(u32::MAX),
            address: order.address.clone(),
            commands,
            env: command_env(build, workspace, order),
            archive: order.archive.then(|| ArchiveOrder {
                volume: order.volume_name(),
                retained_id: abode_store::new_id(),
                workspace: workspace.name.clone(),
                owner: workspace.owner_name.clone(),
                exported_at: exported_at.clone(),
            }),
        });
    }
    let addresses: Vec<&str> = orders.iter().map(|o| o.address.as_str()).collect();
    job.note(
        &LogStage::APPLY,
        LogLevel::Info,
        &format!(
            "snapshot of {}: taken by the external provisioner, where the volume is, before it applies",
            addresses.join(", ")
        ),
    )
    .await;
    Ok(handed)
}

/// The protected resources the confirmed plan destroys or replaces, with
/// what their annotations (and the workspace's remembered rules) say.
async fn orders(job: &ServerJob, build: &Build) -> Result<Vec<Order>, Failure> {
    let host = job.host();
    let store = &host.inner.store;
    let stored = store.build_by_id(&build.id).await.map_err(storage)?;
    let Some(report) = stored.guard_report else {
        return Ok(Vec::new());
    };
    let plan_json = store
        .build_plan_json(&build.id)
        .await
        .map_err(storage)?
        .ok_or_else(|| {
            Failure::failed(
                "the plan JSON of this confirmed build is gone, so what to snapshot is unknown; nothing was applied",
            )
        })?;
    let plan = abode_guard::read_plan_slice(plan_json.as_bytes())
        .map_err(|error| Failure::failed(format!("cannot read the plan: {error}")))?;
    let annotations = abode_guard::annotations(&plan).rules;
    let remembered = host
        .held()
        .remembered(&build.workspace_id)
        .await
        .map_err(super::run::internal)?;
    let json: Value = serde_json::from_str(&plan_json).unwrap_or(Value::Null);
    let changes = json
        .get("resource_changes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let now = host.now_ms();
    let mut orders = Vec::new();
    for change in &report.protected_changes {
        let destroys = matches!(
            change.action,
            Action::Delete | Action::Replace | Action::ReplaceCreateBeforeDestroy
        );
        if !destroys || change.deposed.is_some() {
            continue;
        }
        let address = Address::parse(&change.address).ok();
        let covering: Vec<&abode_guard::Rule> = annotations
            .iter()
            .filter(|rule| rule.covers(address.as_ref(), &change.resource_type))
            .collect();
        let snapshot_rules: Vec<&SnapshotRule> =
            covering.iter().map(|rule| &rule.snapshot).collect();
        let archive = SnapshotRule::archives(&snapshot_rules, &change.resource_type);
        let mut commands: Vec<Result<String, String>> = Vec::new();
        for rule in &snapshot_rules {
            if let Some(command) = &rule.command {
                if !commands.contains(command) {
                    commands.push(command.clone());
                }
            }
        }
        if !archive && commands.is_empty() {
            continue;
        }
        let planned = changes
            .iter()
            .find(|c| c.get("address").and_then(Value::as_str) == Some(&change.address));
        let before = planned
            .and_then(|c| c.pointer("/change/before"))
            .cloned()
            .unwrap_or(Value::Null);
        let sensitive = planned
            .and_then(|c| c.pointer("/change/before_sensitive"))
            .cloned()
            .unwrap_or(Value::Null);
        // Kept as long as the resource's delete rule would keep it.
        let resource = address.as_ref().map(Address::resource);
        let retain = covering
            .iter()
            .filter_map(|rule| rule.retain)
            .chain(
                remembered
                    .iter()
                    .filter(|m| Address::parse(&m.address).ok().map(|a| a.resource()) == resource)
                    .filter_map(|m| m.retain),
            )
            .reduce(abode_guard::RetainRule::keeping_longest);
        orders.push(Order {
            address: change.address.clone(),
            resource_type: change.resource_type.clone(),
            provider: planned
                .and_then(|c| c.get("provider_name"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            attributes: super::retain_step::hide_sensitive(before, &sensitive),
            archive,
            commands,
            expires_at: retain
                .and_then(|rule| rule.retain_for_secs)
                .and_then(|secs| i64::try_from(secs).ok())
                .map(|secs| now.saturating_add(secs.saturating_mul(1000))),
            expire_action: retain
                .map(|rule| rule.expire)
                .unwrap_or_default()
                .as_str()
                .to_string(),
        });
    }
    Ok(orders)
}

/// `ABODE_ATTR_NAME` for an attribute `name`: upper case, any character
/// but a letter or digit as `_`.
fn attribute_variable(name: &str) -> String {
    let mut variable = String::from("ABODE_ATTR_");
    variable.extend(name.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        }
    }));
    variable
}

/// The variables a `snapshot_command` gets besides Terraform's environment.
fn command_env(build: &Build, workspace: &Workspace, order: &Order) -> Vec<(String, String)> {
    let mut env = vec![
        ("ABODE_SNAPSHOT_ADDRESS".to_string(), order.address.clone()),
        (
            "ABODE_SNAPSHOT_TYPE".to_string(),
            order.resource_type.clone(),
        ),
        (
            "ABODE_SNAPSHOT_ATTRIBUTES".to_string(),
            order.attributes.to_string(),
        ),
        (
            "ABODE_SNAPSHOT_WORKSPACE".to_string(),
            workspace.name.clone(),
        ),
        (
            "ABODE_SNAPSHOT_WORKSPACE_ID".to_string(),
            workspace.id.clone(),
        ),
        (
            "ABODE_SNAPSHOT_OWNER".to_string(),
            workspace.owner_name.clone(),
        ),
        ("ABODE_SNAPSHOT_BUILD_ID".to_string(), build.id.clone()),
    ];
    if let Some(attributes) = order.attributes.as_object() {
        for (name, value) in attributes {
            let text = match value {
                Value::String(text) => text.clone(),
                Value::Number(number) => number.to_string(),
                Value::Bool(flag) => flag.to_string(),
                Value::Null => continue,
                other => other.to_string(),
            };
            env.push((attribute_variable(name), text));
        }
    }
    env
}

/// Archives a volume's files into a snapshot record.
async fn archive(
    job: &ServerJob,
    build: &Build,
    workspace: &Workspace,
    order: &Order,
) -> Result<(), Failure> {
    let host = job.host();
    let config = &host.inner.config;
    let name = order.volume_name();
    let volume = config.volumes_dir().join(&name);
    if !abode_volume_archive::is_plain_name(&name) || !volume.is_dir() {
        job.note(
            &LogStage::APPLY,
            LogLevel::Warn,
            &format!(
                "snapshot of {}: its volume {name:?} has no directory on this machine, so there are no files to archive",
                order.address
            ),
        )
        .await;
        return Ok(());
    }
    let id = abode_store::new_id();
    let file_name = format!("{id}.tar");
    let dir = config.snapshots_dir();
    let meta = abode_volume_archive::ExportMeta {
        volume: name.clone(),
        retained_id: id.clone(),
        workspace: workspace.name.clone(),
        owner: workspace.owner_name.clone(),
        exported_at: abode_control::times::utc_text(host.now_ms()),
    };
    let target = dir.join(&file_name);
    // How long it took is told (benches/snapshot.sh reads it); a duration,
    // not a time: the injected clock is not for measuring.
    let started = std::time::Instant::now();
    let written = tokio::task::spawn_blocking({
        let (dir, target) = (dir.clone(), target.clone());
        move || write_archive(&dir, &volume, &target, &meta)
    })
    .await
    .map_err(|error| {
        Failure::failed(format!("the snapshot of {} failed: {error}", order.address))
    })?;
    let took = started.elapsed().as_secs_f64();
    let (summary, bytes) = written.map_err(|error| {
        Failure::failed(format!(
            "cannot snapshot {} before applying: {error}; nothing was applied (the volume is as it was)",
            order.address
        ))
    })?;
    if let Err(error) = record(job, build, order, &id, bytes).await {
        let _ = tokio::fs::remove_file(&target).await;
        return Err(Failure::failed(format!(
            "cannot record the snapshot of {}: {error}; nothing was applied",
            order.address
        )));
    }
    job.note(
        &LogStage::APPLY,
        LogLevel::Info,
        &format!(
            "snapshot of {}: {} files, {} bytes archived as retained record {id} in {took:.3} s (abode retained restore {id} --to WORKSPACE)",
            order.address, summary.files, summary.bytes
        ),
    )
    .await;
    Ok(())
}

/// The retained record (kind `snapshot`) of the archive `{id}.tar` of
/// `bytes` in the snapshots dir.
async fn record(
    job: &ServerJob,
    build: &Build,
    order: &Order,
    id: &str,
    bytes: u64,
) -> Result<(), abode_store::StoreError> {
    job.host()
        .inner
        .store
        .insert_snapshot(
            &build.id,
            build
                .confirmed_by
                .as_deref()
                .unwrap_or(&build.initiator_name),
            &NewSnapshot {
                id: id.to_string(),
                address: order.address.clone(),
                resource_type: order.resource_type.clone(),
                provider: order.provider.clone(),
                import_id: order.volume_name(),
                attributes: order.attributes.to_string(),
                expires_at: order.expires_at,
                expire_action: order.expire_action.clone(),
                archive: format!("{id}.tar"),
                archive_bytes: i64::try_from(bytes).unwrap_or(i64::MAX),
            },
        )
        .await
        .map(|_| ())
}

/// Keeps the archive a daemon's run made of its order `index` (its upload,
/// streamed in `body`) as the snapshot record the archive's manifest names:
/// written beside its name as `*.partial` under an exclusive lock, synced,
/// checked against its manifest (every file's SHA-256, and the volume the
/// order names), renamed without replacing anything, recorded. Anything
/// short of that keeps nothing and refuses the upload in one line, and the
/// daemon applies nothing.
pub(crate) async fn keep_uploaded<S, T, E>(
    job: &ServerJob,
    index: u32,
    body: S,
) -> Result<SnapshotAnswer, ControlError>
where
    S: futures_util::Stream<Item = Result<T, E>> + Send,
    T: AsRef<[u8]>,
    E: std::fmt::Display,
{
    use futures_util::StreamExt;
    use tokio::io::AsyncWriteExt;
    let build = job.build();
    if job.kind() != abode_store::JobKind::ApplySavedPlan
        || super::retain_step::destroys_retained(build)
    {
        return Err(ControlError::Conflict(format!(
            "build {} takes no snapshot: only a confirmed plan's apply does",
            build.id
        )));
    }
    let orders = orders(job, build)
        .await
        .map_err(|failure| ControlError::Conflict(failure.message))?;
    let order = usize::try_from(index)
        .ok()
        .and_then(|index| orders.get(index))
        .filter(|order| order.archive)
        .ok_or_else(|| {
            ControlError::Conflict(format!(
                "build {} has no volume to archive as its snapshot {index}",
                build.id
            ))
        })?;
    let dir = job.host().inner.config.snapshots_dir();
    let partial = dir.join(format!("upload-{}.tar.partial", abode_store::new_id()));
    let cannot = |error: String| {
        ControlError::Conflict(format!(
            "the server cannot keep the snapshot of {}: {error}",
            order.address
        ))
    };
    let locked = tokio::task::spawn_blocking({
        let (dir, partial) = (dir.clone(), partial.clone());
        move || create_partial(&dir, &partial)
    })
    .await
    .map_err(|error| cannot(error.to_string()))?
    .map_err(cannot)?;
    let written: Result<(), ControlError> = async {
        let mut out = tokio::fs::File::from_std(
            locked
                .try_clone()
                .map_err(|error| cannot(error.to_string()))?,
        );
        let mut body = std::pin::pin!(body);
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|error| {
                ControlError::BadRequest(format!("the snapshot's upload was cut off: {error}"))
            })?;
            out.write_all(chunk.as_ref())
                .await
                .map_err(|error| cannot(error.to_string()))?;
        }
        out.flush()
            .await
            .map_err(|error| cannot(error.to_string()))?;
        out.sync_all()
            .await
            .map_err(|error| cannot(error.to_string()))
    }
    .await;
    if let Err(error) = written {
        let _ = tokio::fs::remove_file(&partial).await;
        return Err(error);
    }
    let checked = tokio::task::spawn_blocking({
        let partial = partial.clone();
        move || -> Result<(abode_volume_archive::VerifyReport, u64), String> {
            let file = std::fs::File::open(&partial).map_err(|error| error.to_string())?;
            let bytes = file.metadata().map_err(|error| error.to_string())?.len();
            let report = abode_volume_archive::verify(std::io::BufReader::new(file))
                .map_err(|error| error.to_string())?;
            Ok((report, bytes))
        }
    })
    .await
    .map_err(|error| error.to_string())
    .and_then(|checked| checked);
    let kept = match checked {
        Ok((report, bytes)) => keep_checked(job, build, order, &dir, &partial, report, bytes).await,
        Err(error) => Err(ControlError::BadRequest(format!(
            "the snapshot of {} is not an archive this server reads: {error}; nothing was kept",
            order.address
        ))),
    };
    let _ = tokio::fs::remove_file(&partial).await;
    drop(locked);
    kept
}

/// An uploaded archive that verified: named as its manifest says (never
/// over another file), recorded.
async fn keep_checked(
    job: &ServerJob,
    build: &Build,
    order: &Order,
    dir: &Path,
    partial: &Path,
    report: abode_volume_archive::VerifyReport,
    bytes: u64,
) -> Result<SnapshotAnswer, ControlError> {
    let expected = order.volume_name();
    let id = report.meta.retained_id.clone();
    if !report.ok() {
        let first = report
            .problems
            .first()
            .map(ToString::to_string)
            .unwrap_or_default();
        return Err(ControlError::BadRequest(format!(
            "the snapshot of {} does not match its manifest ({} problems, first: {first}); nothing was kept",
            order.address,
            report.problems.len()
        )));
    }
    if report.meta.volume != expected || !abode_volume_archive::is_plain_name(&id) {
        return Err(ControlError::BadRequest(format!(
            "the snapshot of {} is an archive of the volume {:?} as record {id:?}, not of {expected:?} as a new record; nothing was kept",
            order.address, report.meta.volume
        )));
    }
    let answer = SnapshotAnswer {
        id: id.clone(),
        files: report.files,
        bytes: report.bytes,
    };
    let target = dir.join(format!("{id}.tar"));
    // A link never replaces: an archive of that name stays as it is.
    match std::fs::hard_link(partial, &target) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            // The same upload again (its answer was lost): answered again.
            let stored = job.host().inner.store.retained_by_id(&id).await;
            return match stored {
                Ok(record) if record.build_id == build.id && record.address == order.address => {
                    Ok(answer)
                }
                _ => Err(ControlError::Conflict(format!(
                    "a snapshot archive {id}.tar exists already; nothing was kept"
                ))),
            };
        }
        Err(error) => {
            return Err(ControlError::Conflict(format!(
                "the server cannot keep the snapshot of {}: {error}",
                order.address
            )))
        }
    }
    let _ = std::fs::File::open(dir).and_then(|dir| dir.sync_all());
    if let Err(error) = record(job, build, order, &id, bytes).await {
        let _ = tokio::fs::remove_file(&target).await;
        return Err(ControlError::Conflict(format!(
            "cannot record the snapshot of {}: {error}; nothing was kept",
            order.address
        )));
    }
    tracing::info!(build = %build.id, retained = %id, address = %order.address, bytes, "kept a snapshot an external provisioner took");
    Ok(answer)
}

/// Held while a `*.partial` is made and locked, and while they are swept,
/// so that a sweep in this process never takes a new one for a crash's.
static PARTIALS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Makes the snapshots dir (0700) and a new `partial` in it (0600), locked
/// for as long as the file handed back is open; stale ones are swept
/// first.
fn create_partial(dir: &Path, partial: &Path) -> Result<std::fs::File, String> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    sweep_partials(dir);
    let _making = PARTIALS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(partial)
        .map_err(|error| format!("cannot create {}: {error}", partial.display()))?;
    file.try_lock()
        .map_err(|error| format!("cannot lock {}: {error}", partial.display()))?;
    Ok(file)
}

/// Removes the `*.partial` archives of `dir` that no one writes (nobody
/// holds their lock: a crash left them), each said in the server's log;
/// their names.
pub(crate) fn sweep_partials(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::OpenOptionsExt;
    let _sweeping = PARTIALS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".partial") {
            continue;
        }
        let path = entry.path();
        // Not followed: a link is nobody's archive.
        let Ok(file) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
        else {
            continue;
        };
        if file.try_lock().is_err() {
            continue;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => {
                tracing::warn!(file = %path.display(), "removed a snapshot archive a crash left half-written");
                removed.push(name);
            }
            Err(error) => {
                tracing::warn!(file = %path.display(), %error, "cannot remove a snapshot archive a crash left half-written");
            }
        }
    }
    removed
}

/// Writes the archive beside `target` and renames it when whole and on
/// disk; the snapshots dir is private to the server.
fn write_archive(
    dir: &Path,
    volume: &Path,
    target: &Path,
    meta: &abode_volume_archive::ExportMeta,
) -> Result<(abode_volume_archive::ExportSummary, u64), String> {
    let mut partial: PathBuf = target.to_path_buf();
    partial.set_extension("tar.partial");
    let file = create_partial(dir, &partial)?;
    let result = (|| {
        let summary =
            abode_volume_archive::export(volume, &file, meta).map_err(|e| e.to_string())?;
        file.sync_all().map_err(|error| error.to_string())?;
        let bytes = file.metadata().map_err(|error| error.to_string())?.len();
        std::fs::rename(&partial, target).map_err(|error| error.to_string())?;
        Ok((summary, bytes))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A `*.partial` a crash left (nobody holds its lock) goes; one being
    /// written (locked) stays, as do archives and links.
    #[test]
    fn only_partials_nobody_writes_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().join("snapshots");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("left.tar.partial"), b"half").unwrap();
        std::fs::write(dir.join("kept.tar"), b"whole").unwrap();
        std::fs::write(dir.join("elsewhere"), b"x").unwrap();
        std::os::unix::fs::symlink(dir.join("elsewhere"), dir.join("link.tar.partial")).unwrap();
        let writing = create_partial(&dir, &dir.join("writing.tar.partial")).unwrap();
        // Made after a sweep of its own, which took the crash's.
        assert!(!dir.join("left.tar.partial").exists());
        std::fs::write(dir.join("left-again.tar.partial"), b"half").unwrap();
        assert_eq!(sweep_partials(&dir), ["left-again.tar.partial"]);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "elsewhere",
                "kept.tar",
                "link.tar.partial",
                "writing.tar.partial"
            ]
        );
        // Its writer gone (a crash closes it), it is a crash's too.
        drop(writing);
        assert_eq!(sweep_partials(&dir), ["writing.tar.partial"]);
        assert!(sweep_partials(&dir.join("missing")).is_empty());
    }
}
