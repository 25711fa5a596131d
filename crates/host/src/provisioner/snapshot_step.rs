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
//! The archive is the provisioner's, never the template's: the server reads
//! the volume (it is root when workspaces have uids of their own) and
//! writes the archive into its own snapshots dir (0700). A build an
//! external daemon runs keeps its volumes on the daemon's machine, which
//! takes no snapshot yet: a confirmed plan whose annotation asks for one in
//! so many words (`snapshot = true`, a `snapshot_command`) fails there, said
//! in one line; one left to the default is applied, with a warning in its log.

use std::path::{Path, PathBuf};
use std::time::Duration;

use abode_guard::{Action, Address, SnapshotRule};
use abode_runner::{Failure, LogLevel, LogStage};
use abode_store::{Build, NewSnapshot, Workspace};
use serde_json::Value;

use super::on_server::ServerJob;
use super::run::storage;

/// How long a `snapshot_command` may run (a cloud disk snapshot is queued,
/// not waited for, by `aws ec2 create-snapshot`).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// What one destroyed or replaced resource needs before the apply.
struct Order {
    address: String,
    resource_type: String,
    provider: String,
    /// Its attributes before the plan, sensitive values hidden.
    attributes: Value,
    /// Its files are archived (an `abode_volume`).
    archive: bool,
    /// An annotation says `snapshot = true` in so many words.
    asked: bool,
    /// `snapshot_command`s of the annotations covering it.
    commands: Vec<Result<String, String>>,
    expires_at: Option<i64>,
    expire_action: String,
}

/// Takes every snapshot the confirmed plan of `build` asks for, or fails
/// with nothing applied. `embedded`: the build runs on this server's own
/// provisioners (where its volumes are).
pub(super) async fn take(
    job: &ServerJob,
    build: &Build,
    workspace: &Workspace,
    embedded: bool,
) -> Result<(), Failure> {
    // Destroying a retained resource on purpose snapshots nothing.
    if super::retain_step::destroys_retained(build) {
        return Ok(());
    }
    let orders = orders(job, build).await?;
    if orders.is_empty() {
        return Ok(());
    }
    if !embedded {
        // Asked for in so many words: refused. Left to the default: said.
        let asked: Vec<&str> = orders
            .iter()
            .filter(|o| o.asked || !o.commands.is_empty())
            .map(|o| o.address.as_str())
            .collect();
        if !asked.is_empty() {
            return Err(Failure::failed(format!(
                "this confirmed plan destroys {} whose abode_protect asks for a snapshot first, and external provisioners take no snapshots yet: run it on the server's provisioners; nothing was applied",
                asked.join(", ")
            )));
        }
        for order in &orders {
            job.note(
                &LogStage::APPLY,
                LogLevel::Warn,
                &format!(
                    "no snapshot of {}: external provisioners take none yet (set snapshot = true on its abode_protect to refuse such a plan here instead)",
                    order.address
                ),
            )
            .await;
        }
        return Ok(());
    }
    for order in &orders {
        for command in &order.commands {
            run_command(job, build, workspace, order, command).await?;
        }
        if order.archive {
            archive(job, build, workspace, order).await?;
        }
    }
    Ok(())
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
            asked: snapshot_rules.iter().any(|rule| rule.archive == Some(true)),
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

async fn run_command(
    job: &ServerJob,
    build: &Build,
    workspace: &Workspace,
    order: &Order,
    command: &Result<String, String>,
) -> Result<(), Failure> {
    let command = match command {
        Ok(command) => command,
        Err(why) => return Err(Failure::failed(format!("{why}; nothing was applied"))),
    };
    let config = &job.host().inner.config;
    job.note(
        &LogStage::APPLY,
        LogLevel::Info,
        &format!(
            "snapshot of {}: running its snapshot_command",
            order.address
        ),
    )
    .await;
    let dir = config.work_dir().join(format!("{}-snapshot", build.id));
    let made = prepare_dir(&dir, config.terraform_isolation.as_deref()).await;
    let outcome = match made {
        Ok(()) => {
            let mut env = config.terraform_env.clone();
            env.extend(command_env(build, workspace, order));
            abode_terraform::shell::run_shell(abode_terraform::shell::ShellRun {
                isolation: config.terraform_isolation.as_deref(),
                dir: &dir,
                command,
                env,
                timeout: COMMAND_TIMEOUT,
            })
            .await
        }
        Err(error) => Err(error),
    };
    let _ = tokio::fs::remove_dir_all(&dir).await;
    let outcome = outcome.map_err(|error| {
        Failure::failed(format!(
            "the snapshot_command of {} could not run: {error}; nothing was applied",
            order.address
        ))
    })?;
    for line in outcome
        .output
        .lines()
        .filter(|line| !line.trim().is_empty())
    {
        job.note(
            &LogStage::APPLY,
            LogLevel::Info,
            &format!("snapshot_command: {line}"),
        )
        .await;
    }
    if outcome.succeeded() {
        job.note(
            &LogStage::APPLY,
            LogLevel::Info,
            &format!(
                "snapshot of {}: its snapshot_command succeeded",
                order.address
            ),
        )
        .await;
        return Ok(());
    }
    let last = outcome
        .output
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    let what = if outcome.timed_out {
        format!(
            "did not end within {} minutes",
            COMMAND_TIMEOUT.as_secs() / 60
        )
    } else if outcome.not_found() {
        format!("was not found (exit 127: {last})")
    } else {
        match outcome.code {
            Some(code) if last.is_empty() => format!("failed with exit status {code}"),
            Some(code) => format!("failed with exit status {code}: {last}"),
            None => "was killed by a signal".to_string(),
        }
    };
    Err(Failure::failed(format!(
        "the snapshot_command of {} {what}; nothing was applied (the volume is as it was: fix the command, then run the build again and confirm its plan)",
        order.address
    )))
}

/// The command's own directory, the sandbox user's.
async fn prepare_dir(
    dir: &Path,
    isolation: Option<&abode_terraform::isolation::Isolation>,
) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let _ = tokio::fs::remove_dir_all(dir).await;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    if let Some(isolation) = isolation {
        isolation.hand_over(dir).map_err(std::io::Error::other)?;
    }
    Ok(())
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
    let name = order
        .attributes
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    let volume = config.volumes_dir().join(&name);
    if !plain || !volume.is_dir() {
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
    let record = host
        .inner
        .store
        .insert_snapshot(
            &build.id,
            build
                .confirmed_by
                .as_deref()
                .unwrap_or(&build.initiator_name),
            &NewSnapshot {
                id: id.clone(),
                address: order.address.clone(),
                resource_type: order.resource_type.clone(),
                provider: order.provider.clone(),
                import_id: name.clone(),
                attributes: order.attributes.to_string(),
                expires_at: order.expires_at,
                expire_action: order.expire_action.clone(),
                archive: file_name,
                archive_bytes: i64::try_from(bytes).unwrap_or(i64::MAX),
            },
        )
        .await;
    if let Err(error) = record {
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

/// Writes the archive beside `target` and renames it when whole and on
/// disk; the snapshots dir is private to the server.
fn write_archive(
    dir: &Path,
    volume: &Path,
    target: &Path,
    meta: &abode_volume_archive::ExportMeta,
) -> Result<(abode_volume_archive::ExportSummary, u64), String> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    let mut partial: PathBuf = target.to_path_buf();
    partial.set_extension("tar.partial");
    let result = (|| {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&partial)
            .map_err(|error| format!("cannot create {}: {error}", partial.display()))?;
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
