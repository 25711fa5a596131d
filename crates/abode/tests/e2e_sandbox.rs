//! A template is code the platform runs: what it can reach is what its
//! sandbox shows it (issue 29, docs/security.md). A hostile template, pushed
//! and built by a template admin, and previewed on the workspace it built,
//! tries to read the server's database, its `server-id`, another build's
//! work dir and `/proc/<server>/environ` with `file()`, `filebase64()`,
//! `fileset()` and a command of its own (a `local-exec`: what an `external`
//! data source would run, with the same reach; Abode's Terraform runs offline
//! and has no `hashicorp/external` to download). Every read fails, and none
//! of the platform's secrets appears in the build log, the preview's answer
//! or the server's log; the same template reads its own work dir and the
//! path the operator gave it with `--terraform-mount`.
//!
//! And the workspace the example template makes is a light container: its
//! shell is not root nor the server's user, it reads neither the data dir nor
//! the server's `/proc`, and a stop leaves none of its processes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::fs;
use std::path::{Path, PathBuf};

use util::{require_terraform, Platform};

/// In the server's environment only: a template must never see it.
const SERVER_SECRET: &str = "server-secret-29-never-in-a-template";
/// In a stand-in for another build's work dir.
const OTHER_BUILD_SECRET: &str = "other-build-secret-29";
/// What the operator's mount holds.
const ALLOWED: &str = "allowed-content-29";

/// The paths the template tries, and where it reports.
struct Targets {
    data: String,
    database: String,
    server_id: String,
    other: String,
    environ: String,
    outside: String,
}

/// HCL that computes what each read gave, as JSON in `local.result`.
fn probes(targets: &Targets) -> String {
    format!(
        r#"terraform {{
  required_providers {{
    abode = {{
      source = "abode/abode"
    }}
  }}
}}

data "abode_workspace" "me" {{}}

locals {{
  targets = {{
    database  = "{database}"
    server_id = "{server_id}"
    other     = "{other}"
    environ   = "{environ}"
  }}
  by_file       = [for name, path in local.targets : name if can(file(path))]
  by_filebase64 = [for name, path in local.targets : name if can(filebase64(path))]
  listed = concat(
    tolist(try(fileset("{data}", "*"), [])),
    [for file in try(fileset("{data}/work", "*/template/*"), []) : "work/${{file}}"],
  )
  own     = can(file("${{path.module}}/main.tf"))
  mounted = try(file("{outside}/allowed.txt"), "unreadable")
  result = jsonencode({{
    file       = local.by_file
    filebase64 = local.by_filebase64
    listed     = local.listed
    own        = local.own
    mounted    = local.mounted
  }})
}}
"#,
        database = targets.database,
        server_id = targets.server_id,
        other = targets.other,
        environ = targets.environ,
        data = targets.data,
        outside = targets.outside,
    )
}

/// Version 1, built: the functions' results and a command's tries are
/// written to the operator's mount.
fn built(targets: &Targets) -> String {
    format!(
        r#"{probes}
resource "terraform_data" "probe" {{
  count = data.abode_workspace.me.start_count
  input = local.result
  provisioner "local-exec" {{
    command = <<-EOT
      printf '%s' '${{local.result}}' > {outside}/build-functions.json
      for f in {database} {server_id} {other} {environ}; do
        if cat "$f" > /dev/null 2>&1; then echo "read $f"; else echo "denied $f"; fi
      done > {outside}/build-commands.txt
      ls -a {data} > {outside}/build-ls.txt 2>&1 || true
    EOT
  }}
}}
"#,
        probes = probes(targets),
        outside = targets.outside,
        database = targets.database,
        server_id = targets.server_id,
        other = targets.other,
        environ = targets.environ,
        data = targets.data,
    )
}

/// Version 2, previewed: the results are the plan's error, which is all a
/// preview shows of a template.
fn previewed(targets: &Targets) -> String {
    format!(
        r#"{probes}
resource "terraform_data" "probe" {{
  input = "x"
  lifecycle {{
    precondition {{
      # At push (a template import: the placeholder workspace) it passes.
      condition     = data.abode_workspace.me.id == "00000000-0000-4000-8000-000000000001"
      error_message = "probe ${{local.result}}"
    }}
  }}
}}
"#,
        probes = probes(targets)
    )
}

/// The JSON object that follows `marker` in `text`.
fn json_after(text: &str, marker: &str) -> serde_json::Value {
    let start = text
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker:?} in:\n{text}"))
        + marker.len();
    let rest = &text[start..];
    let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<serde_json::Value>();
    stream
        .next()
        .unwrap_or_else(|| panic!("no JSON after {marker:?}:\n{text}"))
        .unwrap()
}

/// What the template saw: nothing of the platform, its own files, the mount.
fn assert_contained(seen: &serde_json::Value, other_build: &str, when: &str) {
    assert_eq!(
        seen["file"],
        serde_json::json!([]),
        "{when}: file() read {seen}"
    );
    assert_eq!(
        seen["filebase64"],
        serde_json::json!([]),
        "{when}: filebase64() read {seen}"
    );
    let listed: Vec<&str> = seen["listed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|name| name.as_str())
        .collect();
    for forbidden in ["abode.db", "server-id", "server.log"] {
        assert!(
            !listed.contains(&forbidden),
            "{when}: fileset() listed {forbidden}: {listed:?}"
        );
    }
    assert!(
        !listed.iter().any(|name| name.contains(other_build)),
        "{when}: fileset() listed another build's work dir: {listed:?}"
    );
    assert_eq!(seen["own"], true, "{when}: its own work dir: {seen}");
    assert_eq!(
        seen["mounted"], ALLOWED,
        "{when}: the operator's mount: {seen}"
    );
}

/// Nothing secret of the platform in `text`.
fn assert_no_platform_secrets(text: &str, server_id: &str, what: &str) {
    for secret in [
        SERVER_SECRET,
        OTHER_BUILD_SECRET,
        server_id,
        "SQLite format 3",
    ] {
        assert!(!text.contains(secret), "{what} holds {secret:?}:\n{text}");
    }
}

#[test]
fn a_hostile_template_reads_nothing_of_the_platform_in_a_build_or_a_preview() {
    require_terraform();
    let platform =
        Platform::start_with_env(util::FAST_AGENT_FLAGS, &[("SERVER_SECRET", SERVER_SECRET)]);
    platform.login_owner();
    let admin = platform.login_new_user("tadmin", "template-admin,member");
    let data = platform.data_dir();
    // A stand-in for another workspace's build, where work dirs are.
    let other_build = "00000000-other-build";
    let other = data.join("work").join(other_build);
    fs::create_dir_all(other.join("template")).unwrap();
    fs::write(other.join("template/main.tf"), OTHER_BUILD_SECRET).unwrap();
    fs::write(platform.outside().join("allowed.txt"), ALLOWED).unwrap();
    let server_pid = platform.server_pid().unwrap();
    let server_id = platform.server_id();
    let targets = Targets {
        data: data.display().to_string(),
        database: data.join("abode.db").display().to_string(),
        server_id: data.join("server-id").display().to_string(),
        other: other.join("template/main.tf").display().to_string(),
        environ: format!("/proc/{server_pid}/environ"),
        outside: platform.outside().display().to_string(),
    };
    // The server can read them all: the paths are right.
    for path in [
        &targets.database,
        &targets.server_id,
        &targets.other,
        &targets.environ,
    ] {
        assert!(fs::read(path).is_ok(), "{path}");
    }

    let dir = platform.root().join("hostile");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("main.tf"), built(&targets)).unwrap();
    let dir_arg = dir.to_str().unwrap();
    platform
        .run_as(
            &admin,
            &["templates", "push", "hostile", "-d", dir_arg],
            None,
        )
        .ok();
    let created = platform
        .run_as(&admin, &["create", "dev", "--template", "hostile"], None)
        .ok();
    let build_functions =
        fs::read_to_string(platform.outside().join("build-functions.json")).unwrap();
    let seen: serde_json::Value = serde_json::from_str(&build_functions).unwrap();
    assert_contained(&seen, other_build, "in a build");
    let commands = fs::read_to_string(platform.outside().join("build-commands.txt")).unwrap();
    assert_eq!(commands.lines().count(), 4, "{commands}");
    assert!(
        commands.lines().all(|line| line.starts_with("denied ")),
        "a command of the template read: {commands}"
    );
    let listed = fs::read_to_string(platform.outside().join("build-ls.txt")).unwrap();
    for forbidden in ["abode.db", "server-id", "supervised"] {
        assert!(
            !listed.lines().any(|name| name == forbidden),
            "ls showed {forbidden}: {listed}"
        );
    }
    let log = platform
        .run_as(&admin, &["builds", "logs", "dev", "1"], None)
        .ok();
    assert_no_platform_secrets(&created.stdout, &server_id, "the create's output");
    assert_no_platform_secrets(&log.stdout, &server_id, "the build log");

    // Version 2, previewed on the workspace: the plan fails with what it saw.
    fs::write(dir.join("main.tf"), previewed(&targets)).unwrap();
    platform
        .run_as(
            &admin,
            &["templates", "push", "hostile", "-d", dir_arg],
            None,
        )
        .ok();
    let preview = platform.run_as(
        &admin,
        &[
            "templates",
            "versions",
            "preview",
            "hostile",
            "2",
            "-o",
            "json",
        ],
        None,
    );
    let seen = json_after(&preview.stdout.replace("\\\"", "\""), "probe ");
    assert_contained(&seen, other_build, "in a preview");
    assert_no_platform_secrets(&preview.stdout, &server_id, "the preview's answer");
    assert_no_platform_secrets(&preview.stderr, &server_id, "the preview's errors");
    assert_no_platform_secrets(&platform.server_log(), &server_id, "the server's log");
}

#[test]
fn the_example_workspace_is_a_light_container_that_a_stop_empties() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    platform.push_example();
    platform.run(&["create", "dev", "--template", "local"]).ok();
    platform.wait_for_agent("dev", "ready", std::time::Duration::from_secs(60));
    let data = platform.data_dir();
    let server_pid = platform.server_pid().unwrap();
    let id = platform.run(&["ssh", "dev", "--", "id", "-u"]).ok();
    let uid: u32 = id.stdout.trim().parse().unwrap();
    assert_ne!(uid, 0, "the workspace's shell is root");
    let server_uid = std::fs::metadata(format!("/proc/{server_pid}"))
        .map(|meta| std::os::unix::fs::MetadataExt::uid(&meta))
        .unwrap();
    assert_ne!(
        uid, server_uid,
        "the workspace's shell is the server's user"
    );
    for path in [
        data.join("abode.db"),
        data.join("server-id"),
        Path::new(&format!("/proc/{server_pid}/environ")).to_path_buf(),
    ] {
        let cat = platform.run(&["ssh", "dev", "--", "cat", path.to_str().unwrap()]);
        assert_ne!(
            cat.code,
            Some(0),
            "the workspace read {}: {cat}",
            path.display()
        );
    }
    // Another workspace's home, with a file its owner wrote: out of reach.
    let before: std::collections::BTreeSet<_> = std::fs::read_dir(platform.volumes_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    platform
        .run(&["create", "other", "--template", "local"])
        .ok();
    platform.wait_for_agent("other", "ready", std::time::Duration::from_secs(60));
    platform
        .run(&[
            "ssh",
            "other",
            "--",
            "sh",
            "-c",
            "echo private > \"$HOME/diary\"",
        ])
        .ok();
    let other_home = std::fs::read_dir(platform.volumes_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| !before.contains(path))
        .expect("the other workspace's volume");
    assert!(other_home.join("diary").is_file());
    let diary = other_home.join("diary");
    for command in [
        vec!["cat", diary.to_str().unwrap()],
        vec!["ls", other_home.to_str().unwrap()],
    ] {
        let mut args = vec!["ssh", "dev", "--"];
        args.extend(command);
        let run = platform.run(&args);
        assert_ne!(
            run.code,
            Some(0),
            "dev reached the other workspace's home: {run}"
        );
        assert!(!run.stdout.contains("private"), "{run}");
    }
    assert!(!platform.spawned_processes().is_empty());
    platform.run(&["stop", "other"]).ok();
    platform.run(&["stop", "dev"]).ok();
    util::assert_no_processes_left(&platform, "after the stop");
}

/// A data dir under a directory every sandbox shows (`/opt`) would be a
/// template's to read: refused at start in one line.
#[test]
fn a_data_dir_every_sandbox_would_show_is_refused_at_start() {
    let data_dir = PathBuf::from(format!("/opt/abode-e2e-{}", std::process::id()));
    let output = std::process::Command::new(util::abode_bin())
        .args(["server", "--address", "127.0.0.1:0", "--data-dir"])
        .arg(&data_dir)
        .env_remove("ABODE_DATABASE_URL")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&data_dir);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains(&format!("the data dir {}", data_dir.display()))
            && last.contains("under a system directory every Terraform sandbox shows"),
        "{stderr}"
    );
}

/// The `ABODE_AGENT_TOKEN`s of the workspace processes of `platform`, read
/// from their environments (the test's privilege, not a neighbour's).
fn agent_tokens(platform: &Platform) -> std::collections::BTreeSet<String> {
    let mut tokens = std::collections::BTreeSet::new();
    for pid in platform.spawned_processes() {
        let Ok(environ) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        for var in environ.split(|byte| *byte == 0) {
            if let Some(token) = var.strip_prefix(b"ABODE_AGENT_TOKEN=") {
                if !token.is_empty() {
                    tokens.insert(String::from_utf8_lossy(token).into_owned());
                }
            }
        }
    }
    tokens
}

/// Every process's command line, as a user of the machine who is nobody
/// the platform knows (a uid of its own) reads them.
fn command_lines_as_a_neighbour() -> String {
    let script = r#"for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f" 2>/dev/null; echo; done"#;
    let output = if nix::unistd::geteuid().is_root() {
        std::process::Command::new("setpriv")
            .args([
                "--reuid=4242",
                "--regid=4242",
                "--clear-groups",
                "--",
                "sh",
                "-c",
                script,
            ])
            .output()
            .unwrap()
    } else {
        std::process::Command::new("sh")
            .args(["-c", script])
            .output()
            .unwrap()
    };
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Issue 46: the environment of a workspace process (its agent token) was
/// on `bwrap`'s command line, which every user of the machine reads in
/// `/proc/<pid>/cmdline`. While two workspaces run, a neighbour reads every
/// command line and finds neither token; the agents, given them, connect.
#[test]
fn no_command_line_shows_a_workspace_agent_token() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    platform.push_example();
    for name in ["one", "two"] {
        platform.run(&["create", name, "--template", "local"]).ok();
        platform.wait_for_agent(name, "ready", std::time::Duration::from_secs(60));
    }
    let tokens = agent_tokens(&platform);
    assert_eq!(tokens.len(), 2, "one token per workspace: {tokens:?}");
    let seen = command_lines_as_a_neighbour();
    // The neighbour does see the sandboxes' command lines.
    assert!(seen.contains("bwrap"), "{seen}");
    for token in &tokens {
        assert!(
            !seen.contains(token.as_str()),
            "an agent token on a command line:\n{seen}"
        );
    }
    // The program's environment is the one the template gave, no more.
    let env = platform
        .run(&["ssh", "one", "--", "sh", "-c", "echo \"home=$HOME\""])
        .ok();
    assert!(env.stdout.contains("home="), "{env}");
    platform.run(&["stop", "one"]).ok();
    platform.run(&["stop", "two"]).ok();
    util::assert_no_processes_left(&platform, "after the stops");
}

/// What a hostile build asks the process supervisor, as JSON on one line:
/// about a process of another workspace, on its own socket, and on the
/// machine's.
const SUPERVISOR_PROBE: &str = r#"
import json, os, socket, sys

victim, victim_workspace, machine = sys.argv[1], sys.argv[2], sys.argv[3]

def ask(path, request):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(path)
        s.sendall((json.dumps(request) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return json.loads(data)
    except Exception as error:
        return {"unreachable": str(error)}

own = os.environ["ABODE_PROCESS_SUPERVISOR"]
print(json.dumps({
    "status": ask(own, {"op": "status", "id": victim}),
    "stop": ask(own, {"op": "stop", "id": victim, "grace_seconds": 1}),
    "open": ask(own, {"op": "open", "workspace_id": victim_workspace,
                      "socket": "/tmp/stolen.sock"}),
    "machine": ask(machine, {"op": "stop", "id": victim, "grace_seconds": 1}),
}))
"#;

/// Issue 46: the supervisor stopped any recorded process for any build. A
/// template's `local-exec` in a build of workspace B asks it about, and to
/// stop, workspace A's agent process by its id: to B that process does not
/// exist, the machine's socket is out of its reach, its own socket opens no
/// other, and A's process keeps running.
#[test]
fn a_build_neither_stops_nor_sees_another_workspaces_process() {
    require_terraform();
    let platform = Platform::start();
    platform.login_owner();
    platform.push_example();
    platform
        .run(&["create", "victim", "--template", "local"])
        .ok();
    platform.wait_for_agent("victim", "ready", std::time::Duration::from_secs(60));
    let records = util::names_in(&platform.data_dir().join("supervised"));
    assert_eq!(records.len(), 1, "{records:?}");
    let victim_id = records[0].clone();
    let victim_pid: u32 = victim_id.split('-').next().unwrap().parse().unwrap();
    let victim_workspace = platform.show("victim")["id"].as_str().unwrap().to_string();

    let outside = platform.outside();
    fs::write(outside.join("probe.py"), SUPERVISOR_PROBE).unwrap();
    let machine = platform.data_dir().join("supervisor.sock");
    assert!(machine.exists(), "the machine's socket is where it was");
    let dir = platform.root().join("attacker");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("main.tf"),
        format!(
            r#"terraform {{
  required_providers {{
    abode = {{
      source = "abode/abode"
    }}
  }}
}}

data "abode_workspace" "me" {{}}

resource "terraform_data" "probe" {{
  count = data.abode_workspace.me.start_count
  provisioner "local-exec" {{
    command = "python3 {outside}/probe.py {victim_id} {victim_workspace} {machine} > {outside}/replies.json"
  }}
}}
"#,
            outside = outside.display(),
            machine = machine.display(),
        ),
    )
    .unwrap();
    platform
        .run(&["templates", "push", "attacker", "-d", dir.to_str().unwrap()])
        .ok();
    platform
        .run(&["create", "attacker", "--template", "attacker"])
        .ok();
    let replies: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(outside.join("replies.json")).unwrap()).unwrap();
    assert_eq!(
        replies["status"],
        serde_json::json!({"reply": "status", "running": false}),
        "another workspace's process is not there for this build: {replies:#}"
    );
    assert_eq!(
        replies["stop"],
        serde_json::json!({"reply": "stopped"}),
        "{replies:#}"
    );
    assert_eq!(replies["open"]["reply"], "error", "{replies:#}");
    assert!(
        replies["machine"]["unreachable"].is_string(),
        "the machine's socket is in the build's reach: {replies:#}"
    );
    // A's process was never signalled: the same process runs, its agent too.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let stat = fs::read_to_string(format!("/proc/{victim_pid}/stat")).unwrap_or_default();
    let state = stat.rsplit(')').next().unwrap_or("").trim_start();
    assert!(
        !state.is_empty() && !state.starts_with('Z'),
        "workspace A's process was stopped by B's build"
    );
    assert_eq!(
        util::names_in(&platform.data_dir().join("supervised")),
        records,
        "A's record is kept"
    );
    platform.wait_for_agent("victim", "ready", std::time::Duration::from_secs(10));
    // A's own builds still stop it.
    platform.run(&["stop", "victim"]).ok();
    util::assert_no_processes_left(&platform, "after the victim's stop");
}
