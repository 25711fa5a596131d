//! Retain on delete (issue 32) through the real CLI, server, Terraform and
//! provider: an intentional delete keeps what it retains (Terraform forgets
//! it, the platform keeps a record), and a new workspace adopts it in place,
//! or waits for a person when the adoption would replace it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::fs;

use util::{
    example_with, only_subdir, push_template as push, require_terraform, Platform, NAME_NOT_KEPT,
};

fn retained(platform: &Platform, extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["retained", "list", "--output", "json"];
    args.extend_from_slice(extra);
    platform.run(&args).ok().json().as_array().unwrap().clone()
}

/// The example's `dev` with a file in its home, deleted with `--retain`:
/// the volume's directory and its record's id.
fn retained_home(platform: &Platform) -> (std::path::PathBuf, String) {
    push(platform, "local", 1, &example_with(&[]));
    platform.run(&["create", "dev", "--template", "local"]).ok();
    let volume = only_subdir(&platform.volumes_dir());
    fs::write(volume.join("notes.txt"), "keep me\n").unwrap();
    platform.run(&["delete", "dev", "--retain"]).ok();
    let id = retained(platform, &[])[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    (volume, id)
}

fn state_addresses(platform: &Platform, workspace_name: &str) -> Vec<String> {
    let sql = format!(
        "SELECT s.state FROM workspace_states s JOIN workspaces w ON w.id = s.workspace_id \
         WHERE w.name = '{workspace_name}'"
    );
    let state: Option<Vec<u8>> = util::on_sqlite(platform, |mut connection| async move {
        sqlx::query_scalar(&sql)
            .fetch_optional(&mut connection)
            .await
            .unwrap()
    });
    let Some(state) = state else {
        return Vec::new();
    };
    let state: serde_json::Value = serde_json::from_slice(&state).unwrap();
    state["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}.{}",
                r["type"].as_str().unwrap(),
                r["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn a_retained_home_outlives_its_workspace_and_is_adopted_in_place() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    push(&platform, "local", 1, &example_with(&[]));
    platform.run(&["create", "dev", "--template", "local"]).ok();
    let volume = only_subdir(&platform.volumes_dir());
    fs::write(volume.join("notes.txt"), "keep me\n").unwrap();

    // A plain delete of a template without a retain rule retains nothing;
    // asking to retain keeps the volume.
    let deleted = platform.run(&["delete", "dev", "--retain"]).ok();
    assert!(
        deleted
            .stdout
            .contains("retained: abode_volume.home (until "),
        "{deleted}"
    );
    assert!(deleted.stdout.contains("to forget"), "{deleted}");
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    let addresses = state_addresses(&platform, "dev");
    assert!(
        !addresses.iter().any(|a| a == "abode_volume.home"),
        "the state still holds the volume: {addresses:?}"
    );
    let records = retained(&platform, &[]);
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert_eq!(record["address"], "abode_volume.home");
    assert_eq!(record["status"], "open");
    assert_eq!(record["workspace"], "dev");
    assert_eq!(
        record["import_id"].as_str().unwrap(),
        volume.file_name().unwrap().to_str().unwrap()
    );
    let id = record["id"].as_str().unwrap().to_string();
    let shown = platform
        .run(&["retained", "show", &id, "--output", "json"])
        .ok()
        .json();
    assert_eq!(shown["id"], id.as_str());

    // The volume leaves the platform as a file, checked by its manifest.
    let export = platform.root().join("home.tar");
    platform
        .run(&["retained", "export", &id, "--to", export.to_str().unwrap()])
        .ok();
    platform
        .run(&["retained", "verify", export.to_str().unwrap()])
        .ok();
    let mut bytes = fs::read(&export).unwrap();
    let at = bytes
        .windows(b"keep me".len())
        .position(|w| w == b"keep me")
        .unwrap();
    bytes[at] ^= 1;
    let flipped = platform.root().join("flipped.tar");
    fs::write(&flipped, &bytes).unwrap();
    let bad = platform
        .run(&["retained", "verify", flipped.to_str().unwrap()])
        .fails_with(1, &["1 problem"]);
    assert!(bad.stdout.contains("notes.txt"), "{bad}");
    platform
        .run(&["retained", "export", &id, "--to", export.to_str().unwrap()])
        .fails_with(1, &["exists"]);

    // What nothing knows is listed; the retained volume is known.
    let orphans = platform
        .run(&["volumes", "orphans", "--output", "json"])
        .ok()
        .json();
    assert_eq!(orphans, serde_json::json!([]));
    fs::create_dir_all(platform.volumes_dir().join("stray")).unwrap();
    let orphans = platform
        .run(&["volumes", "orphans", "--output", "json"])
        .ok()
        .json();
    assert_eq!(orphans[0]["name"], "stray", "{orphans}");
    fs::remove_dir(platform.volumes_dir().join("stray")).unwrap();

    // Adopted into a new workspace under another name, with the example
    // template as shipped (its volume keeps the name it was created with):
    // imported, not created, and no hold.
    let created = platform
        .run(&["create", "work", "--template", "local", "--adopt", &id])
        .ok();
    assert!(
        created.stdout.contains("adopted: abode_volume.home"),
        "{created}"
    );
    assert!(created.stdout.contains("imported"), "{created}");
    assert_eq!(platform.show("work")["latest_build"]["status"], "succeeded");
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    assert_eq!(
        util::names_in(&platform.volumes_dir()),
        vec![volume.file_name().unwrap().to_str().unwrap().to_string()],
        "a new volume was created"
    );
    assert!(retained(&platform, &[]).is_empty());
    let closed = retained(&platform, &["--closed"]);
    assert_eq!(closed[0]["status"], "adopted", "{closed:?}");

    // Adopting a closed record is refused in one line, nothing created.
    platform
        .run(&["create", "again", "--template", "local", "--adopt", &id])
        .fails_with(1, &["only an open record can be adopted"]);
}

#[test]
fn an_adoption_that_would_replace_the_volume_waits_for_a_person() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let (volume, id) = retained_home(&platform);

    // A template that names its volume after the workspace, and does not
    // keep the name it was created with: a new workspace would replace the
    // adopted volume, so the build is held.
    push(&platform, "local", 2, &example_with(&[NAME_NOT_KEPT]));
    let held = platform.run(&["create", "work", "--template", "local", "--adopt", &id]);
    assert_eq!(held.code, Some(3), "{held}");
    assert!(held.stderr.contains("abode_volume.home"), "{held}");
    assert!(held.stderr.contains("name"), "{held}");
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    assert_eq!(retained(&platform, &[])[0]["status"], "open");
    assert!(
        held.stderr
            .contains("protected by the retained resource abode_volume.home"),
        "{held}"
    );

    // Discarded, and the workspace deleted: a new workspace of that name
    // adopts nothing it did not ask for.
    platform.run(&["builds", "cancel", "work", "1"]).ok();
    platform.run(&["delete", "work"]).ok();
    platform
        .run(&["create", "work", "--template", "local"])
        .ok();
    assert_eq!(
        util::names_in(&platform.volumes_dir()).len(),
        2,
        "the new workspace took the retained volume"
    );
    assert_eq!(retained(&platform, &[])[0]["status"], "open");
    assert_eq!(
        fs::read_to_string(volume.join("notes.txt")).unwrap(),
        "keep me\n"
    );
}

#[test]
fn a_template_rule_retains_on_a_plain_delete_and_no_retain_is_for_owners() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let rule = (
        "  mode        = \"confirm\"\n",
        "  mode        = \"confirm\"\n  on_delete   = \"retain\"\n  retain_for  = \"30d\"\n",
    );
    // A retain rule on what Terraform cannot forget fails the push.
    let dir = platform.root().join("templates/bad");
    fs::create_dir_all(&dir).unwrap();
    let bad = format!(
        "{}\nresource \"abode_protect\" \"me\" {{\n  resource_id = data.abode_workspace.me.id\n  on_delete   = \"retain\"\n}}\n",
        example_with(&[])
    );
    fs::write(dir.join("main.tf"), bad).unwrap();
    platform
        .run(&["templates", "push", "bad", "-d", dir.to_str().unwrap()])
        .fails_with(
            1,
            &["abode_protect.me", "on_delete", "data.abode_workspace.me"],
        );
    push(&platform, "local", 1, &example_with(&[rule]));
    let bob = platform.login_new_user("bob", "member");
    platform
        .run_as(&bob, &["create", "dev", "--template", "local"], None)
        .ok();
    platform
        .run_as(&bob, &["create", "scratch", "--template", "local"], None)
        .ok();

    // A member may not destroy what the template retains.
    let refused = platform.run_as(&bob, &["delete", "scratch", "--no-retain"], None);
    assert_eq!(refused.code, Some(1), "{refused}");
    assert!(refused.stderr.contains("protection"), "{refused}");

    let deleted = platform.run_as(&bob, &["delete", "dev"], None).ok();
    assert!(
        deleted.stdout.contains("retained: abode_volume.home"),
        "{deleted}"
    );
    let mine = platform
        .run_as(&bob, &["retained", "list", "--output", "json"], None)
        .ok()
        .json();
    assert_eq!(mine.as_array().unwrap().len(), 1, "{mine}");
    assert!(mine[0]["expires_at"].is_string(), "{mine}");

    // The owner destroys on purpose; nothing is retained.
    let before = retained(&platform, &["--all"]).len();
    platform.run(&["delete", "bob/scratch", "--no-retain"]).ok();
    assert_eq!(retained(&platform, &["--all"]).len(), before);
    let audit = platform
        .run(&["audit", "--action", "build.start", "--output", "json"])
        .ok()
        .json();
    assert!(audit.to_string().contains("retain=none"), "{audit}");

    // An owner hands bob's record to alice.
    // A template admin reads the record but may not take the files away.
    let carol = platform.login_new_user("carol", "template-admin");
    let record_id = mine[0]["id"].as_str().unwrap();
    platform
        .run_as(&carol, &["retained", "show", record_id], None)
        .ok();
    let export = platform.root().join("carol.tar");
    let refused = platform.run_as(
        &carol,
        &[
            "retained",
            "export",
            record_id,
            "--to",
            export.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(refused.code, Some(1), "{refused}");
    assert!(!export.exists());
    // The dashboard lists bob's record, with where it came from.
    let page = platform.dashboard_page("bob", "bob-password", "/retained");
    assert!(page.contains("abode_volume.home"), "{page}");
    assert!(page.contains("bob/dev"), "{page}");
    assert!(page.contains("Extend"), "{page}");
    let id = mine[0]["id"].as_str().unwrap();
    let assigned = platform
        .run(&["retained", "assign", id, "alice", "--output", "json"])
        .ok()
        .json();
    assert_eq!(assigned["owner"], "alice");
    let extended = platform
        .run(&["retained", "extend", id, "7d", "--output", "json"])
        .ok()
        .json();
    assert!(extended["expires_at"].as_str().unwrap() > mine[0]["expires_at"].as_str().unwrap());
    platform
        .run(&["retained", "extend", id, "soon"])
        .fails_with(1, &["not a duration"]);
    platform
        .run(&["retained", "show", "no-such-record"])
        .fails_with(1, &["not found"]);
}

/// Waits until `workspace`'s build `number` logged `text`.
fn wait_for_log(platform: &Platform, workspace: &str, number: &str, text: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let log = platform.run(&["builds", "logs", workspace, number]);
        if log.stdout.contains(text) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "build {number} never logged {text:?}:\n{log}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_server_killed_mid_delete_never_loses_a_retained_volume() {
    require_terraform();
    let mut platform = Platform::start();
    platform.login_owner();
    let rule = (
        "  mode        = \"confirm\"\n",
        "  mode        = \"confirm\"\n  on_delete   = \"retain\"\n",
    );
    push(&platform, "local", 1, &example_with(&[rule]));
    // Killed once when the plan is judged, once while it is applied.
    for (workspace, kill_at) in [("one", "[guard]"), ("two", "[apply]")] {
        platform
            .run(&["create", workspace, "--template", "local"])
            .ok();
        let volume = platform
            .show(workspace)
            .get("id")
            .and_then(|id| id.as_str())
            .map(|id| platform.volumes_dir().join(format!("home-{id}")))
            .unwrap();
        fs::write(volume.join("notes.txt"), "keep me\n").unwrap();
        let mut delete = platform.spawn(&["delete", workspace]);
        wait_for_log(&platform, workspace, "2", kill_at);
        platform.kill_server();
        let _ = delete.kill();
        let _ = delete.wait();
        platform.start_server_again();
        // The delete ends one way or the other once the server is back.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        loop {
            let builds = platform
                .run(&["builds", "list", workspace, "--output", "json"])
                .json();
            let status = builds[0]["status"].as_str().unwrap_or("").to_string();
            if !matches!(status.as_str(), "pending" | "running") {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{builds}");
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        assert_eq!(
            fs::read_to_string(volume.join("notes.txt")).unwrap(),
            "keep me\n",
            "the retained volume of {workspace} was destroyed"
        );
        let in_state = state_addresses(&platform, workspace)
            .iter()
            .any(|a| a == "abode_volume.home");
        let in_record = retained(&platform, &[])
            .iter()
            .any(|r| r["workspace"] == workspace && r["address"] == "abode_volume.home");
        assert!(
            in_state || in_record,
            "{workspace}'s volume is neither in its state nor in a retained record"
        );
        // Once the delete has ended, its records are settled.
        let pending: Vec<serde_json::Value> = retained(&platform, &["--closed"])
            .into_iter()
            .filter(|r| r["status"] == "pending")
            .collect();
        assert!(pending.is_empty(), "{pending:?}");
    }
}

#[test]
fn the_owner_is_told_when_retained_a_week_before_expiry_and_at_expiry_once_each() {
    require_terraform();
    let platform = Platform::start_with_metrics(None, &["--autobuild-poll-interval", "1"]);
    platform.login_owner();
    let rule = (
        "  mode        = \"confirm\"\n",
        "  mode        = \"confirm\"\n  on_delete   = \"retain\"\n  retain_for  = \"8d\"\n",
    );
    push(&platform, "local", 1, &example_with(&[rule]));
    platform.run(&["create", "dev", "--template", "local"]).ok();
    platform.run(&["delete", "dev"]).ok();
    let told = |kind: &str| {
        platform
            .run(&["notifications", "list", "--output", "json"])
            .ok()
            .json()
            .as_array()
            .unwrap()
            .iter()
            .filter(|message| message["kind"] == kind)
            .count()
    };
    assert_eq!(told("resource_retained"), 1);
    platform.wait_for_passes("scheduler", 2);
    assert_eq!(told("retained_expiring"), 0, "told too early");

    // A day and a bit later the record expires within a week.
    for _ in 0..2 {
        platform.advance_clock(std::time::Duration::from_secs(12 * 3600 + 60));
        platform.run(&["users", "me"]).ok();
    }
    platform.wait_for_passes("scheduler", 2);
    assert_eq!(told("retained_expiring"), 1);
    assert_eq!(told("retained_expired"), 0);
    platform.wait_for_passes("scheduler", 2);
    assert_eq!(told("retained_expiring"), 1, "told twice");

    // A week later it has expired: told once, and it is still kept.
    for _ in 0..14 {
        platform.advance_clock(std::time::Duration::from_secs(12 * 3600 + 60));
        platform.run(&["users", "me"]).ok();
    }
    platform.wait_for_passes("scheduler", 2);
    platform.wait_for_passes("scheduler", 2);
    assert_eq!(told("retained_expired"), 1);
    assert_eq!(told("retained_expiring"), 1);
    // Its expiry queued its destroy as the system, held for a person.
    let id = retained(&platform, &[])[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let digest = loop {
        let shown = platform
            .run(&["retained", "show", &id, "--output", "json"])
            .ok()
            .json();
        if shown["destroy_build"]["status"] == "awaiting_confirmation" {
            assert_eq!(shown["destroy_build"]["reason"], "retained_expired");
            break shown["destroy_build"]["plan_digest"]
                .as_str()
                .unwrap()
                .to_string();
        }
        assert!(std::time::Instant::now() < deadline, "{shown}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(retained(&platform, &[])[0]["status"], "open");
    platform
        .run(&["retained", "destroy", &id, "--digest", &digest])
        .ok();
    assert_eq!(retained(&platform, &["--closed"])[0]["status"], "destroyed");
}

/// The digest in `abode retained destroy`'s confirm line.
fn destroy_digest(run: &util::Run) -> String {
    run.stderr
        .split("--digest ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no confirm line:\n{run}"))
        .to_string()
}

#[test]
fn a_retained_volume_is_destroyed_only_by_a_confirmed_plan() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    let (volume, id) = retained_home(&platform);

    let held = platform.run(&["retained", "destroy", &id]);
    assert_eq!(held.code, Some(3), "{held}");
    assert!(held.stderr.contains("abode_volume.home"), "{held}");
    let digest = destroy_digest(&held);
    assert!(
        volume.join("notes.txt").exists(),
        "destroyed before a confirmation"
    );
    // A second destroy while one waits is refused; a wrong digest confirms nothing.
    platform
        .run(&["retained", "destroy", &id])
        .fails_with(1, &["being destroyed already"]);
    platform
        .run(&["retained", "destroy", &id, "--digest", "00"])
        .fails_with(1, &["64 hexadecimal"]);
    platform
        .run(&["retained", "destroy", &id, "--digest", &"0".repeat(64)])
        .fails_with(1, &["digest"]);
    assert!(volume.join("notes.txt").exists());

    platform
        .run(&["retained", "destroy", &id, "--digest", &digest])
        .ok();
    assert!(!volume.exists(), "the volume is still there");
    let closed = retained(&platform, &["--closed"]);
    assert_eq!(closed[0]["status"], "destroyed", "{closed:?}");
    let audit = platform
        .run(&["audit", "--action", "build.confirm", "--output", "json"])
        .ok()
        .json();
    assert!(audit.to_string().contains(&digest), "{audit}");
    // A destroyed record is not destroyed again.
    platform
        .run(&["retained", "destroy", &id])
        .fails_with(1, &["only an open record"]);
}
