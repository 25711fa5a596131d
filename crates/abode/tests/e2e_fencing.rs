//! One Terraform per workspace, ever (issue 26): Abode is every build's
//! state backend and its lock is the fence. Two servers on one PostgreSQL
//! database with a short job lease, and a template whose every creation and
//! destruction appends to a ledger outside the workspace. A server is
//! frozen (SIGSTOP, as a paused VM is) at the worst moments; the ledger, not
//! the stored state, says whether anything was created twice or left
//! behind.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use util::{fixture, psql, require_terraform, FreshDatabase, Platform};

/// A server on `database`; its Terraform runs write their ledgers in the
/// database's shared dir, which every server of it mounts.
fn server(database: &FreshDatabase, provisioners: &str) -> Platform {
    let shared = database.shared_dir();
    Platform::start_on(
        Some(&database.url),
        &[
            "--job-lease",
            "2",
            "--cancel-grace",
            "5",
            "--provisioners",
            provisioners,
            "--terraform-mount",
            shared.to_str().unwrap(),
        ],
    )
}

fn push_ledger(platform: &Platform) {
    let template = fixture("ledger");
    platform
        .run(&[
            "templates",
            "push",
            "ledger",
            "-d",
            template.to_str().unwrap(),
        ])
        .ok();
}

fn create(
    platform: &Platform,
    workspace: &str,
    ledger: &Path,
    seconds: u32,
) -> std::process::Child {
    platform.spawn(&[
        "create",
        workspace,
        "--template",
        "ledger",
        "--parameter",
        &format!("ledger={}", ledger.display()),
        "--parameter",
        &format!("seconds={seconds}"),
    ])
}

/// The lease holder of a workspace's build, once a provisioner claimed it,
/// and whether its plan was judged yet.
fn claimed(database: &FreshDatabase, workspace: &str, number: u32) -> Option<(String, bool)> {
    let row = psql(
        &database.url,
        &format!(
            "SELECT j.lease_holder || '|' || (b.plan_json IS NOT NULL)::text FROM jobs j \
             JOIN builds b ON b.id = j.build_id JOIN workspaces w ON w.id = b.workspace_id \
             WHERE w.name = '{workspace}' AND b.number = {number} AND j.status = 'claimed'"
        ),
    )
    .unwrap();
    let (holder, judged) = row.split_once('|')?;
    Some((holder.to_string(), judged == "true"))
}

#[track_caller]
fn wait_until<T>(what: &str, timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn log_of(platform: &Platform, workspace: &str, number: u32) -> String {
    platform
        .run(&["builds", "logs", workspace, &number.to_string()])
        .stdout
}

#[track_caller]
fn wait_for_log(platform: &Platform, workspace: &str, number: u32, needle: &str) -> String {
    wait_until(
        &format!("build #{number} of {workspace} logging {needle:?}"),
        Duration::from_secs(120),
        || {
            let log = log_of(platform, workspace, number);
            log.contains(needle).then_some(log)
        },
    )
}

/// Each resource's (creations, destructions), by the id Terraform gave it.
fn ledger(path: &Path) -> BTreeMap<String, (u32, u32)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut counts: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(kind), Some(_name), Some(id)) = (words.next(), words.next(), words.next()) else {
            panic!("a ledger line that is not `kind name id`: {line:?}");
        };
        let entry = counts.entry(id.to_string()).or_default();
        match kind {
            "create" => entry.0 += 1,
            "destroy" => entry.1 += 1,
            other => panic!("unknown ledger entry {other:?}"),
        }
    }
    counts
}

/// The `terraform_data.thing` instances the stored state has.
fn stored_things(platform: &Platform, workspace: &str) -> usize {
    let file = platform
        .root()
        .join(format!("{workspace}-{}.tfstate", rand_suffix()));
    platform
        .run(&[
            "workspaces",
            "state",
            workspace,
            "-f",
            file.to_str().unwrap(),
        ])
        .ok();
    let state: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    state["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|resource| resource["type"] == "terraform_data")
        .map(|resource| resource["instances"].as_array().unwrap().len())
        .sum()
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[test]
fn a_server_frozen_while_it_plans_never_applies_the_build_another_took_over() {
    require_terraform();
    let database = FreshDatabase::create();
    let a = server(&database, "1");
    a.login_owner();
    push_ledger(&a);
    let ledger_file: PathBuf = database.shared_dir().join("ledger");
    let a_id = a.server_id();

    // A claims the build and is frozen before its plan is judged (if it was
    // quicker than the freeze, the try is let go and made again).
    let mut spawned = Vec::new();
    let mut workspace = String::new();
    for attempt in 0..5 {
        workspace = format!("one-{attempt}");
        spawned.push(create(&a, &workspace, &ledger_file, 0));
        let (holder, _) = wait_until("a claim", Duration::from_secs(60), || {
            claimed(&database, &workspace, 1)
        });
        assert_eq!(holder, a_id);
        a.freeze_server();
        let (_, judged) = claimed(&database, &workspace, 1).unwrap();
        if !judged {
            break;
        }
        a.thaw_server();
        a.wait_for_build_status(&workspace, "succeeded");
        assert!(attempt < 4, "A judged every plan before it could be frozen");
    }

    // B takes the build over once A's lease ran out, and runs it to its end.
    let b = server(&database, "1");
    b.login_existing_owner();
    let build = b.wait_for_build_status(&workspace, "succeeded");
    assert_eq!(build["number"], 1, "{build:#}");
    let log = log_of(&b, &workspace, 1);
    assert!(
        log.contains("stopped renewing its lease before this build's plan was judged"),
        "{log}"
    );

    // A wakes up where it stopped: it finds its lease gone and says so.
    a.thaw_server();
    let log = wait_for_log(&b, &workspace, 1, "lost its lease on this build");
    assert!(log.contains(&a_id), "{log}");

    // Every resource was created once, and the stored state has them all.
    let created = ledger(&ledger_file);
    let mine: Vec<_> = created.values().collect();
    assert_eq!(mine.len(), 3, "{created:?}");
    assert!(mine.iter().all(|&&counts| counts == (1, 0)), "{created:?}");
    assert_eq!(stored_things(&b, &workspace), 3);
    // A recorded no end over B's.
    let build = b.show(&workspace)["latest_build"].clone();
    assert_eq!(build["status"], "succeeded", "{build:#}");
    spawned.into_iter().for_each(util::finish);
}

#[test]
fn a_holder_frozen_mid_apply_keeps_the_workspace_locked_until_it_reports_or_a_person_unlocks() {
    require_terraform();
    let database = FreshDatabase::create();
    let first = server(&database, "1");
    let second = server(&database, "1");
    first.login_owner();
    second.login_existing_owner();
    push_ledger(&first);
    let servers = [&first, &second];
    let other_than = |id: &str| -> (&Platform, &Platform) {
        if first.server_id() == id {
            (&first, &second)
        } else {
            (&second, &first)
        }
    };

    // (2) Frozen mid-apply; the build is failed by the other server, whose
    // stop waits; the frozen one resumes, its apply finishes under its lock,
    // and the stop then destroys everything.
    let ledger_two = database.shared_dir().join("ledger-two");
    let mut spawned = vec![create(&first, "two", &ledger_two, 6)];
    let (holder, _) = wait_until("a claim", Duration::from_secs(60), || {
        claimed(&database, "two", 1)
    });
    let (frozen, awake) = other_than(&holder);
    wait_for_log(awake, "two", 1, "Provisioning with 'local-exec'");
    frozen.freeze_server();
    awake.wait_for_build_status("two", "failed");
    let shown = awake.show("two");
    assert_eq!(
        shown["locked_by_lost_holder"]["build_number"], 1,
        "{shown:#}"
    );
    assert_eq!(
        shown["locked_by_lost_holder"]["holder"], holder,
        "{shown:#}"
    );
    let text = awake.run(&["show", "two"]).ok().stdout;
    assert!(text.contains("Locked:"), "{text}");
    assert!(text.contains("abode workspaces unlock"), "{text}");
    let listed = awake.run(&["list"]).ok().stdout;
    assert!(listed.contains("(locked by #1)"), "{listed}");

    spawned.push(awake.spawn(&["stop", "two"]));
    wait_for_log(
        awake,
        "two",
        2,
        "waiting: the workspace is locked by build #1",
    );
    frozen.thaw_server();
    wait_for_log(
        awake,
        "two",
        1,
        "reported that its Terraform of this build ended",
    );
    awake.wait_for_build_status("two", "succeeded");
    let entries = ledger(&ledger_two);
    assert_eq!(entries.len(), 3, "{entries:?}");
    assert!(
        entries.values().all(|&counts| counts == (1, 1)),
        "every resource created once and destroyed once: {entries:?}"
    );
    assert_eq!(stored_things(awake, "two"), 0);

    // (3) Frozen mid-apply again; this time an owner unlocks (audited), the
    // next build runs, and the frozen holder's late state write is refused.
    let ledger_three = database.shared_dir().join("ledger-three");
    spawned.push(create(&first, "three", &ledger_three, 6));
    let (holder, _) = wait_until("a claim", Duration::from_secs(60), || {
        claimed(&database, "three", 1)
    });
    let (frozen, awake) = other_than(&holder);
    wait_for_log(awake, "three", 1, "Provisioning with 'local-exec'");
    frozen.freeze_server();
    awake.wait_for_build_status("three", "failed");
    // Not the lock of another build, nor of one that is not locked.
    awake
        .run(&["workspaces", "unlock", "three", "--build", "2"])
        .fails_with(1, &["locked by build #1, not #2"]);
    spawned.push(awake.spawn(&["stop", "three"]));
    wait_for_log(
        awake,
        "three",
        2,
        "waiting: the workspace is locked by build #1",
    );
    awake
        .run(&["workspaces", "unlock", "three", "--build", "1"])
        .ok();
    let audited = psql(
        &database.url,
        "SELECT count(*) FROM audit_events WHERE action = 'workspace.unlock'",
    )
    .unwrap();
    assert_eq!(audited, "1");
    awake.wait_for_build_status("three", "succeeded");
    frozen.thaw_server();
    let log = wait_for_log(awake, "three", 1, "lost its lease on this build");
    assert!(
        log.contains("Failed to save state") && log.contains("response code 409"),
        "the late state write is refused:\n{log}"
    );
    // What it made is kept in its work dir, never stored over the newer
    // build's state.
    assert!(
        log.contains(
            "cannot save the Terraform state: build #2 of this workspace came after this one"
        ),
        "{log}"
    );
    // The stop ran on the state stored before the freeze: what the frozen
    // apply made afterwards is in no stored state (the person who unlocked
    // took that on), and nothing was created twice.
    assert_eq!(stored_things(awake, "three"), 0);
    let entries = ledger(&ledger_three);
    assert!(
        entries.values().all(|&(created, _)| created == 1),
        "{entries:?}"
    );
    for platform in servers {
        platform.thaw_server();
    }
    spawned.into_iter().for_each(util::finish);
}

/// The workspace's home volume (`home-<id>`) under the platform's volumes dir.
fn home_volume(platform: &Platform) -> PathBuf {
    std::fs::read_dir(platform.volumes_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("home-"))
        })
        .expect("a home volume")
}

/// A data dir copied beside its original (a restore tried out, a cloned
/// machine) carries the original's server id and a state whose volumes name
/// the original's paths. Started as it is, it is refused; with a new id, its
/// delete removes its own volume and nothing under the original's volumes
/// dir.
#[test]
fn a_copied_data_dir_is_refused_and_with_a_new_id_touches_only_its_own_volumes() {
    require_terraform();
    let mut original = Platform::start();
    original.login_owner();
    let template = fixture("append-apply");
    original
        .run(&["templates", "push", "app", "-d", template.to_str().unwrap()])
        .ok();
    original.run(&["create", "dev", "--template", "app"]).ok();
    let home = home_volume(&original);
    assert!(home.join("applies").is_file());
    // A copy made the way people make them: the files, the server stopped.
    original.kill_server();
    let copied = tempfile::tempdir().unwrap();
    let copy_dir = copied.path().join("data");
    util::copy_dir(&original.data_dir(), &copy_dir);
    original.start_server_again();

    // Started as it is, beside the original: refused in one line.
    let refused = std::process::Command::new(util::abode_bin())
        .args(["server", "--address", "127.0.0.1:0", "--data-dir"])
        .arg(&copy_dir)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    let line = stderr.lines().last().unwrap_or_default();
    assert!(
        line.contains("is live in the database as another server")
            && line.contains("abode server new-id --data-dir"),
        "{stderr}"
    );

    // Given an id of its own, it starts, and its delete removes its own
    // copy of the volume, never the original's.
    let copy = Platform::start_prepared(None, util::FAST_AGENT_FLAGS, |data_dir| {
        util::copy_dir(&copy_dir, data_dir);
        let new_id = std::process::Command::new(util::abode_bin())
            .args(["server", "new-id", "--data-dir"])
            .arg(data_dir)
            .output()
            .unwrap();
        assert!(new_id.status.success(), "{new_id:?}");
        assert!(String::from_utf8_lossy(&new_id.stdout).starts_with("server-"));
    });
    assert_ne!(copy.server_id(), original.server_id());
    copy.login_existing_owner();
    let copied_home = home_volume(&copy);
    copy.run(&["delete", "dev"]).ok();
    assert!(!copied_home.exists(), "the copy's own volume is deleted");
    assert!(
        home.join("applies").is_file(),
        "the original's volume is untouched"
    );
    // The original still has its workspace, and builds it.
    original.run(&["stop", "dev"]).ok();
    assert!(home.join("applies").is_file());
}

/// (4) The same with an external daemon frozen mid-apply: the build is
/// failed when its lease runs out, the workspace stays locked by the lost
/// daemon, its Terraform stores what it made through the state backend, and
/// once the daemon wakes and reports that Terraform ended, the waiting stop
/// destroys everything.
#[test]
fn a_daemon_frozen_mid_apply_keeps_the_workspace_locked_until_it_reports() {
    require_terraform();
    let platform = Platform::start_with(&["--provisioners", "0", "--job-lease", "3"]);
    platform.login_owner();
    let key = util::create_key(&platform, "builders", &[]);
    let daemon = util::Daemon::start(&platform, "d1", &key, &[]);
    push_ledger(&platform);
    let ledger_file = platform.outside().join("ledger");
    let mut spawned = vec![create(&platform, "four", &ledger_file, 6)];
    wait_for_log(&platform, "four", 1, "Provisioning with 'local-exec'");
    daemon.freeze();

    platform.wait_for_build_status("four", "failed");
    let shown = platform.show("four");
    let lock = &shown["locked_by_lost_holder"];
    assert_eq!(lock["build_number"], 1, "{shown:#}");
    let holder = lock["holder"].as_str().unwrap();
    assert!(
        holder.starts_with("provisioner:") && holder.contains("/builders/"),
        "{shown:#}"
    );
    spawned.push(platform.spawn(&["stop", "four"]));
    wait_for_log(
        &platform,
        "four",
        2,
        "waiting: the workspace is locked by build #1",
    );

    daemon.thaw();
    wait_for_log(
        &platform,
        "four",
        1,
        "reported that its Terraform of this build ended",
    );
    let stop = platform.wait_for_build_status("four", "succeeded");
    assert_eq!(stop["number"], 2, "{stop:#}");
    let entries = ledger(&ledger_file);
    assert_eq!(entries.len(), 3, "{entries:?}");
    assert!(
        entries.values().all(|&counts| counts == (1, 1)),
        "every resource created once and destroyed once: {entries:?}"
    );
    spawned.into_iter().for_each(util::finish);
}

/// A template may not keep its state anywhere but Abode: a backend block is
/// refused at push with where it is; one that gets past the push (a JSON
/// override file, which the push does not read) fails the build after
/// `init`, before anything is planned.
#[test]
fn a_template_with_its_own_backend_is_refused() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let template = |files: &[(&str, &str)]| {
        let dir = platform.root().join(format!("template-{}", rand_suffix()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        dir
    };
    let main_tf = "terraform {\n  required_providers {\n    abode = {\n      source = \"abode/abode\"\n    }\n  }\n}\n\nresource \"terraform_data\" \"x\" {}\n";
    let declared = template(&[
        ("main.tf", main_tf),
        (
            "state.tf",
            "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n  }\n}\n",
        ),
    ]);
    platform
        .run(&["templates", "push", "own", "-d", declared.to_str().unwrap()])
        .fails_with(
            1,
            &[
                "state.tf:2:3",
                "declares its own state backend (backend \"s3\")",
            ],
        );

    let sneaked = template(&[
        ("main.tf", main_tf),
        (
            "zz_override.tf.json",
            r#"{"terraform": {"backend": {"local": {"path": "elsewhere.tfstate"}}}}"#,
        ),
    ]);
    platform
        .run(&[
            "templates",
            "push",
            "sneaky",
            "-d",
            sneaked.to_str().unwrap(),
        ])
        .ok();
    let created = platform.run(&["create", "dev", "--template", "sneaky"]);
    assert_eq!(created.code, Some(1), "{created}");
    let build = platform.show("dev")["latest_build"].clone();
    assert_eq!(build["status"], "failed", "{build:#}");
    let error = build["error"].as_str().unwrap();
    assert!(
        error.contains("the template replaces Abode's state backend (local)"),
        "{error}"
    );
    assert!(
        !platform
            .run(&["builds", "logs", "dev", "1"])
            .stdout
            .contains("[plan]"),
        "nothing was planned"
    );
}

/// During a long apply, Terraform hands the state to the server as it goes
/// (when a resource is made at least 20 s after the last save): a server, a
/// disk or a work dir lost in the middle loses at most that, never the
/// whole apply.
#[test]
fn a_long_apply_saves_its_state_to_the_server_as_it_goes() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let template = fixture("long-apply");
    platform
        .run(&[
            "templates",
            "push",
            "long",
            "-d",
            template.to_str().unwrap(),
        ])
        .ok();
    let create = platform.spawn(&["create", "dev", "--template", "long"]);
    let stored = || {
        let file = platform.root().join(format!("state-{}", rand_suffix()));
        let run = platform.run(&["workspaces", "state", "dev", "-f", file.to_str().unwrap()]);
        (run.code == Some(0)).then(|| std::fs::read_to_string(&file).unwrap())
    };
    // `first` reaches the stored state while `second` is still being made.
    let state = wait_until(
        "a state saved during the apply",
        Duration::from_secs(60),
        || stored().filter(|state| state.contains("\"first\"")),
    );
    assert!(!state.contains("\"second\""), "{state}");
    let build = platform.show("dev")["latest_build"].clone();
    assert_eq!(build["status"], "running", "{build:#}");
    platform.wait_for_build_status("dev", "succeeded");
    assert!(stored().unwrap().contains("\"second\""));
    util::finish(create);
}

/// A second server process started on a data dir a live server uses (same
/// host, same id) is refused in one line; the first one goes on.
#[test]
fn a_second_server_on_a_live_data_dir_is_refused() {
    require_terraform();
    let database = FreshDatabase::create();
    let first = server(&database, "1");
    let second = std::process::Command::new(util::abode_bin())
        .args([
            "server",
            "--address",
            "127.0.0.1:0",
            "--database-url",
            &database.url,
        ])
        .arg("--data-dir")
        .arg(first.data_dir())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{stderr}");
    assert!(
        stderr
            .lines()
            .last()
            .unwrap_or_default()
            .contains("already runs on this data dir"),
        "{stderr}"
    );
    first.login_owner();
}
