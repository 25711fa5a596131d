//! The abode provider driven by the real `terraform` binary, offline, through
//! the filesystem mirror `abode provider install` lays out: the full lifecycle
//! of the example template (create, stop, start, rename, drift, delete), the
//! `abode_protect` reference in the plan's configuration, and plans that must
//! fail with a readable message.
//!
//! Terraform is slow to start, so one test walks the whole lifecycle in order
//! rather than re-initialising a directory per step.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

const ABODE: &str = env!("CARGO_BIN_EXE_abode");
const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/local-workspace/main.tf"
);
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../guard/tests/fixtures");

fn require_terraform() {
    let found = Command::new("terraform")
        .arg("version")
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .is_ok_and(|output| output.status.success());
    assert!(
        found,
        "terraform is not installed or not on PATH: the provider tests need Terraform 1.x"
    );
}

/// A scratch directory that is removed when the test passes and kept (for
/// reading) when it fails.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("abode-provider-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A Terraform working directory using the abode provider from a fresh mirror.
struct Workdir {
    dir: PathBuf,
    cli_config: PathBuf,
    env: Vec<(String, String)>,
}

impl Workdir {
    fn new(root: &Path, main_tf: &str) -> Self {
        Self::installed_by(Path::new(ABODE), root, main_tf)
    }

    /// With the mirror laid out by the `abode` executable at `abode`.
    fn installed_by(abode: &Path, root: &Path, main_tf: &str) -> Self {
        let dir = root.join("template");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("main.tf"), main_tf).unwrap();
        let cli_config = root.join("terraform.rc");
        let output = Command::new(abode)
            .args(["provider", "install", "--mirror"])
            .arg(root.join("mirror"))
            .arg("--cli-config")
            .arg(&cli_config)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "abode provider install: {}",
            text(&output)
        );
        let workdir = Workdir {
            dir,
            cli_config,
            env: vec![],
        };
        workdir.ok(&["init", "-no-color"]);
        workdir
    }

    fn set(&mut self, name: &str, value: &str) {
        self.env.retain(|(n, _)| n != name);
        self.env.push((name.into(), value.into()));
    }

    /// The provider executable in this directory's mirror.
    fn mirror_provider(&self) -> PathBuf {
        let mirror = self
            .dir
            .parent()
            .unwrap()
            .join("mirror/registry.terraform.io/abode/abode");
        std::fs::read_dir(mirror)
            .unwrap()
            .flatten()
            .flat_map(|version| std::fs::read_dir(version.path()).unwrap().flatten())
            .flat_map(|platform| std::fs::read_dir(platform.path()).unwrap().flatten())
            .map(|entry| entry.path())
            .find(|path| {
                path.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with("terraform-provider-abode_v")
            })
            .expect("the provider in the mirror")
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_program(Command::new("terraform"), args)
    }

    /// `terraform args` as Abode runs it: through the mirror's provider,
    /// which serves the whole command from one process.
    fn run_launched(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(self.mirror_provider());
        cmd.args(["--launch-terraform", "terraform"]);
        self.run_program(cmd, args)
    }

    fn run_program(&self, mut cmd: Command, args: &[&str]) -> Output {
        for (name, _) in std::env::vars() {
            if name.starts_with("ABODE_") || name.starts_with("TF_") {
                cmd.env_remove(name);
            }
        }
        cmd.current_dir(&self.dir)
            .args(args)
            .env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .envs(self.env.iter().map(|(n, v)| (n, v)));
        cmd.output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "terraform {} failed:\n{}",
            args.join(" "),
            text(&output)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn fails(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            !output.status.success(),
            "terraform {} should have failed:\n{}",
            args.join(" "),
            text(&output)
        );
        text(&output)
    }

    /// `terraform plan -out` then `terraform show -json` of that plan.
    fn plan_json(&self, extra: &[&str]) -> Value {
        let mut args = vec!["plan", "-no-color", "-out=tfplan"];
        args.extend_from_slice(extra);
        self.ok(&args);
        serde_json::from_str(&self.ok(&["show", "-json", "tfplan"])).unwrap()
    }

    fn state(&self) -> Value {
        serde_json::from_str(&self.ok(&["show", "-json"])).unwrap()
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn resource<'a>(state: &'a Value, address: &str) -> Option<&'a Value> {
    state["values"]["root_module"]["resources"]
        .as_array()?
        .iter()
        .find(|r| r["address"] == address)
}

fn change<'a>(plan: &'a Value, address: &str) -> &'a Value {
    plan["resource_changes"]
        .as_array()
        .and_then(|changes| changes.iter().find(|c| c["address"] == address))
        .unwrap_or_else(|| panic!("no change for {address} in the plan"))
}

fn actions(plan: &Value, address: &str) -> Vec<String> {
    change(plan, address)["change"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

fn process_running(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let rest = stat[stat.rfind(')')? + 1..].trim_start().to_string();
            rest.chars().next()
        })
        .is_some_and(|state| state != 'Z' && state != 'X')
}

fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn process_pid(workdir: &Workdir) -> i64 {
    let state = workdir.state();
    resource(&state, "abode_process.workspace[0]").expect("the process is in the state")["values"]
        ["pid"]
        .as_i64()
        .unwrap()
}

/// Saves a real plan for the guard's fixtures, with the HCL that made it, when
/// asked to (ABODE_UPDATE_FIXTURES=1): plans hold temporary paths and fresh ids,
/// so an ordinary run must not rewrite them.
fn save_fixture(name: &str, plan: &Value, main_tf: &str) {
    if std::env::var_os("ABODE_UPDATE_FIXTURES").is_none() {
        return;
    }
    let dir = Path::new(FIXTURES).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("plan.json"),
        serde_json::to_string_pretty(plan).unwrap() + "\n",
    )
    .unwrap();
    std::fs::write(dir.join("main.tf"), main_tf).unwrap();
    std::fs::write(
        dir.join("README.md"),
        "A real plan of the abode provider, made by \
         `ABODE_UPDATE_FIXTURES=1 cargo test -p abode --test provider_lifecycle` \
         (crates/abode/tests/provider_lifecycle.rs) from the main.tf beside it.\n",
    )
    .unwrap();
}

/// A stand-in for `abode agent`: records how it was started, then stays up.
fn fake_agent(dir: &Path) -> PathBuf {
    let path = dir.join("fake-abode");
    std::fs::write(
        &path,
        "#!/bin/sh\n\
         printf '%s\\n' \"$*\" > \"$FAKE_AGENT_RECORD\"\n\
         printf 'token-length=%s\\n' \"${#ABODE_AGENT_TOKEN}\" >> \"$FAKE_AGENT_RECORD\"\n\
         exec sleep 600\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn example_template_lifecycle() {
    require_terraform();
    let scratch = Scratch::new("lifecycle");
    let root = &scratch.0;
    let main_tf = std::fs::read_to_string(EXAMPLE).unwrap();
    let volumes = root.join("volumes");
    let record = root.join("agent-record");
    let mut workdir = Workdir::new(root, &main_tf);
    workdir.set("ABODE_VOLUMES_DIR", volumes.to_str().unwrap());
    workdir.set("ABODE_AGENT_BINARY", fake_agent(root).to_str().unwrap());
    workdir.set("FAKE_AGENT_RECORD", record.to_str().unwrap());
    let home = volumes.join(format!("home-{}", abode_contract::DEV_WORKSPACE_ID));

    // The mirror holds the provider-only executable: it serves the provider when
    // Terraform starts it, tells its version, and is nothing else (no CLI).
    let mirror_copy = workdir.mirror_provider();
    let version = Command::new(&mirror_copy)
        .arg("--version")
        .output()
        .unwrap();
    assert!(version.status.success(), "{}", text(&version));
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("terraform-provider-abode {}", env!("CARGO_PKG_VERSION"))
    );
    let agent = Command::new(&mirror_copy)
        .args(["agent", "--help"])
        .output()
        .unwrap();
    assert_eq!(agent.status.code(), Some(2), "{}", text(&agent));
    assert!(
        String::from_utf8_lossy(&agent.stderr).contains("takes no arguments"),
        "{}",
        text(&agent)
    );
    let bare = Command::new(&mirror_copy).output().unwrap();
    assert!(!bare.status.success());
    assert!(
        String::from_utf8_lossy(&bare.stderr).contains("Terraform starts it"),
        "{}",
        text(&bare)
    );

    // Create (a start build).
    workdir.set("ABODE_WORKSPACE_TRANSITION", "start");
    workdir.ok(&["apply", "-no-color", "-auto-approve"]);
    assert!(home.is_dir(), "the volume directory exists");
    let first_pid = process_pid(&workdir);
    assert!(process_running(first_pid), "the process runs after create");
    wait_for("the agent to start", || record.exists());
    wait_for("the agent to record its start", || {
        std::fs::read_to_string(&record).is_ok_and(|text| text.contains("token-length"))
    });
    let recorded = std::fs::read_to_string(&record).unwrap();
    assert_eq!(
        recorded, "agent --url http://127.0.0.1:7080\ntoken-length=64\n",
        "the agent gets the URL on its command line and the token in its environment"
    );
    std::fs::write(home.join("notes.txt"), "keep me").unwrap();

    // Stop: the process goes, the volume stays untouched.
    workdir.set("ABODE_WORKSPACE_TRANSITION", "stop");
    let stop = workdir.plan_json(&[]);
    assert_eq!(actions(&stop, "abode_process.workspace[0]"), ["delete"]);
    assert_eq!(actions(&stop, "abode_volume.home"), ["no-op"]);
    workdir.ok(&["apply", "-no-color", "tfplan"]);
    wait_for("the process to stop", || !process_running(first_pid));
    assert!(home.join("notes.txt").is_file());

    // Start again: a new process, the file is still there.
    workdir.set("ABODE_WORKSPACE_TRANSITION", "start");
    workdir.ok(&["apply", "-no-color", "-auto-approve"]);
    let second_pid = process_pid(&workdir);
    assert!(process_running(second_pid));
    assert_eq!(
        std::fs::read_to_string(home.join("notes.txt")).unwrap(),
        "keep me"
    );

    // A new template version renames the volume: a replacement, and the plan's
    // configuration carries the abode_protect reference for the guard.
    let renamed_tf = crate::util::name_not_kept(&main_tf).replace("\"home-${", "\"house-${");
    assert_ne!(renamed_tf, main_tf);
    std::fs::write(workdir.dir.join("main.tf"), &renamed_tf).unwrap();
    let rename = workdir.plan_json(&[]);
    assert_eq!(actions(&rename, "abode_volume.home"), ["delete", "create"]);
    assert_eq!(
        change(&rename, "abode_volume.home")["change"]["replace_paths"],
        serde_json::json!([["name"]])
    );
    assert_eq!(
        change(&rename, "abode_volume.home")["action_reason"],
        "replace_because_cannot_update"
    );
    let protect = rename["configuration"]["root_module"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["address"] == "abode_protect.home")
        .expect("abode_protect.home in the configuration");
    let references = &protect["expressions"]["resource_id"]["references"];
    assert!(
        references
            .as_array()
            .is_some_and(|refs| refs.iter().any(|r| r == "abode_volume.home.id")),
        "resource_id references the volume: {references}"
    );
    assert_eq!(protect["expressions"]["mode"]["constant_value"], "confirm");
    save_fixture("provider-replace-protected-volume", &rename, &renamed_tf);
    std::fs::write(workdir.dir.join("main.tf"), &main_tf).unwrap();

    // The directory removed by hand: the next plan reports the drift.
    std::fs::remove_dir_all(&home).unwrap();
    let drift = workdir.plan_json(&[]);
    let drifted = drift["resource_drift"]
        .as_array()
        .and_then(|drift| drift.iter().find(|d| d["address"] == "abode_volume.home"))
        .expect("abode_volume.home in resource_drift");
    assert_eq!(drifted["change"]["actions"], serde_json::json!(["delete"]));
    assert_eq!(actions(&drift, "abode_volume.home"), ["create"]);
    save_fixture("provider-drift-volume-removed", &drift, &main_tf);

    // Delete: everything goes, no process is left running. The volume is put
    // back (with content) first, so that the destroy has data to remove.
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("notes.txt"), "bye").unwrap();
    workdir.set("ABODE_WORKSPACE_TRANSITION", "delete");
    workdir.ok(&["apply", "-no-color", "-destroy", "-auto-approve"]);
    wait_for("the process to stop", || !process_running(second_pid));
    assert!(!home.exists(), "the volume directory is deleted");
    let logs: Vec<_> = std::fs::read_dir(root.join("process-logs"))
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .collect();
    assert!(logs.is_empty(), "process logs left behind: {logs:?}");
    let state = workdir.state();
    assert!(
        state["values"].is_null() || resource(&state, "abode_volume.home").is_none(),
        "nothing left in the state: {state}"
    );
}

const VALIDATION_TF: &str = r#"
terraform {
  required_providers {
    abode = {
      source = "abode/abode"
    }
  }
}

variable "timezone" {
  default = "Europe/Paris"
}

variable "second_cron" {
  default = "* 19-23 * * 1-5"
}

data "abode_parameter" "cpus" {
  name    = "cpus"
  type    = "number"
  default = "2"
  validation {
    min   = 1
    max   = 8
    error = "cpus must be between {min} and {max}, not {value}"
  }
}

data "abode_workspace_preset" "office_hours" {
  name       = "office hours"
  parameters = { cpus = "4" }
  prebuilds {
    instances = 1
    expiration_policy {
      ttl = 86400
    }
    scheduling {
      timezone = var.timezone
      schedule {
        cron      = "* 8-18 * * 1-5"
        instances = 3
      }
      schedule {
        cron      = var.second_cron
        instances = 1
      }
    }
  }
}

variable "protect_mode" {
  default = "block"
}

variable "volume_name" {
  default = "scratch"
}

resource "abode_volume" "scratch" {
  name = var.volume_name
}

resource "abode_protect" "scratch" {
  resource_id = abode_volume.scratch.id
  mode        = var.protect_mode
}

resource "abode_agent" "main" {
  os   = "linux"
  arch = "arm64"
}

variable "app_slug" {
  default = "web"
}

variable "app_url" {
  default = "http://localhost:3000"
}

resource "abode_app" "web" {
  agent_id = abode_agent.main.id
  slug     = var.app_slug
  url      = var.app_url
  share    = "authenticated"
}

output "cpus" {
  value = data.abode_parameter.cpus.value
}
"#;

#[test]
fn invalid_declarations_and_values_fail_the_plan_readably() {
    require_terraform();
    let scratch = Scratch::new("validation");
    let mut workdir = Workdir::new(&scratch.0, VALIDATION_TF);

    let plan = workdir.plan_json(&[]);
    assert_eq!(plan["planned_values"]["outputs"]["cpus"]["value"], "2");
    assert_eq!(
        change(&plan, "abode_agent.main")["change"]["after_unknown"]["token"],
        true
    );

    // A claimed prebuild hands its agent token back: the new agent keeps it.
    workdir.set("ABODE_AGENT_TOKEN", "handed-back-token");
    let claim = workdir.plan_json(&[]);
    let agent = &change(&claim, "abode_agent.main")["change"];
    assert_eq!(agent["after"]["token"], "handed-back-token");
    assert_eq!(agent["after_sensitive"]["token"], true);
    workdir.env.clear();

    let cases: &[(&[&str], Option<&str>, &str)] = &[
        (
            &["-var", "second_cron=0 19 * * 1-5"],
            None,
            "the minute field must be `*`",
        ),
        (
            &["-var", "second_cron=* 19 * *"],
            None,
            "must have 5 fields",
        ),
        (&["-var", "second_cron=* 18-20 * * *"], None, "overlap"),
        (
            &["-var", "timezone=Mars/Olympus_Mons"],
            None,
            "timezone `Mars/Olympus_Mons` is not an IANA time zone",
        ),
        (
            &[],
            Some(r#"{"cpus": "12"}"#),
            "cpus must be between 1 and 8, not 12",
        ),
        (&[], Some(r#"{"cpus": "many"}"#), "`many` is not a number"),
        (
            &["-var", "protect_mode=maybe"],
            None,
            "abode_protect mode `maybe` is not one of `confirm`, `block`",
        ),
        (
            &["-var", "volume_name=../etc"],
            None,
            "abode_volume name must be 1 to 128 letters",
        ),
        (
            &["-var", "app_slug=Web--app"],
            None,
            "abode_app slug `Web--app` is not valid",
        ),
        (
            &["-var", "app_url=https://localhost:3000"],
            None,
            "abode_app url: an app's url is http://HOST:PORT/..., not",
        ),
    ];
    for (args, parameters, expected) in cases {
        match parameters {
            Some(json) => workdir.set("ABODE_PARAMETERS", json),
            None => workdir.env.retain(|(name, _)| name != "ABODE_PARAMETERS"),
        }
        let mut plan_args = vec!["plan", "-no-color"];
        plan_args.extend_from_slice(args);
        let message = workdir.fails(&plan_args);
        assert!(
            flatten(&message).contains(expected),
            "expected `{expected}` in:\n{message}"
        );
    }

    // A volume name may come from a sensitive variable: the diagnostic names
    // the attribute and the rule, never the value.
    let message = workdir.fails(&["plan", "-no-color", "-var", "volume_name=../hunter2-secret"]);
    assert!(
        flatten(&message).contains("abode_volume name must be") && !message.contains("hunter2"),
        "{message}"
    );

    workdir.set("ABODE_PARAMETERS", r#"{"cpus": "4"}"#);
    workdir.set("ABODE_WORKSPACE_TRANSITION", "foo");
    let message = workdir.fails(&["plan", "-no-color"]);
    assert!(
        flatten(&message).contains(
            "ABODE_WORKSPACE_TRANSITION is invalid: `foo` is not one of start, stop, delete"
        ),
        "{message}"
    );
    assert!(!message.contains("stack backtrace"), "{message}");

    // Every attribute of every schema is documented.
    workdir.env.clear();
    let schemas: Value =
        serde_json::from_str(&workdir.ok(&["providers", "schema", "-json"])).unwrap();
    let provider = &schemas["provider_schemas"]["registry.terraform.io/abode/abode"];
    let mut undocumented = vec![];
    for kind in ["resource_schemas", "data_source_schemas"] {
        for (name, schema) in provider[kind].as_object().unwrap() {
            check_documented(name, &schema["block"], &mut undocumented);
        }
    }
    assert!(undocumented.is_empty(), "undocumented: {undocumented:?}");
    assert_eq!(provider["resource_schemas"].as_object().unwrap().len(), 8);
    // workspace, workspace_owner, parameter, workspace_preset, external_auth
    assert_eq!(
        provider["data_source_schemas"].as_object().unwrap().len(),
        5
    );
}

/// Terraform wraps diagnostics at 80 columns.
fn flatten(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn check_documented(path: &str, block: &Value, undocumented: &mut Vec<String>) {
    if block["description"].as_str().is_none_or(str::is_empty) {
        undocumented.push(path.to_string());
    }
    for (name, attribute) in block["attributes"].as_object().into_iter().flatten() {
        if attribute["description"].as_str().is_none_or(str::is_empty) {
            undocumented.push(format!("{path}.{name}"));
        }
    }
    for (name, nested) in block["block_types"].as_object().into_iter().flatten() {
        check_documented(&format!("{path}.{name}"), &nested["block"], undocumented);
    }
}

/// `abode` copied somewhere alone (no `terraform-provider-abode` beside it)
/// installs itself as the provider, says so, and Terraform can use it.
#[test]
fn abode_alone_installs_itself_as_the_provider() {
    require_terraform();
    let scratch = Scratch::new("alone");
    let root = &scratch.0;
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let abode = bin.join("abode");
    std::fs::copy(ABODE, &abode).unwrap();
    let install = Command::new(&abode)
        .args(["provider", "install", "--mirror"])
        .arg(root.join("probe-mirror"))
        .arg("--cli-config")
        .arg(root.join("probe.rc"))
        .output()
        .unwrap();
    assert!(install.status.success(), "{}", text(&install));
    assert!(
        String::from_utf8_lossy(&install.stderr).contains("installing abode itself"),
        "{}",
        text(&install)
    );
    // A provider-only file of another release beside it is not installed.
    let stale = bin.join("terraform-provider-abode");
    std::fs::write(&stale, "#!/bin/sh\necho terraform-provider-abode 0.0.1\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stale, std::fs::Permissions::from_mode(0o755)).unwrap();
    let install = Command::new(&abode)
        .args(["provider", "install", "--mirror"])
        .arg(root.join("stale-mirror"))
        .arg("--cli-config")
        .arg(root.join("stale.rc"))
        .output()
        .unwrap();
    assert!(install.status.success(), "{}", text(&install));
    assert!(
        String::from_utf8_lossy(&install.stderr).contains("is not version"),
        "{}",
        text(&install)
    );
    std::fs::remove_file(&stale).unwrap();

    let workdir = Workdir::installed_by(
        &abode,
        root,
        "terraform {\n  required_providers {\n    abode = { source = \"abode/abode\" }\n  }\n}\n\
         data \"abode_workspace\" \"me\" {}\n\
         output \"transition\" { value = data.abode_workspace.me.transition }\n",
    );
    let plan = workdir.ok(&["plan", "-no-color"]);
    assert!(plan.contains("transition = \"start\""), "{plan}");
    // `abode` in the mirror serves a launched command as the small file does.
    let launched = workdir.run_launched(&["plan", "-no-color"]);
    assert!(launched.status.success(), "{}", text(&launched));
    assert!(
        text(&launched).contains("transition = \"start\""),
        "{}",
        text(&launched)
    );
}

/// Processes running the executable at `path`.
fn processes_of(path: &Path) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|entry| std::fs::read_link(entry.path().join("exe")).is_ok_and(|exe| exe == path))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Abode runs every Terraform command but `init` through the mirror's
/// provider (`--launch-terraform`): Terraform then starts no provider process
/// of its own, the plan is the one Terraform makes by itself, the provider is
/// gone when the command is, and the launcher exits with Terraform's status.
#[test]
fn a_launched_command_is_served_by_one_provider_process() {
    require_terraform();
    let scratch = Scratch::new("launch");
    let mut workdir = Workdir::new(
        &scratch.0,
        "terraform {\n  required_providers {\n    abode = { source = \"abode/abode\" }\n  }\n}\n\
         data \"abode_workspace\" \"me\" {}\n\
         resource \"terraform_data\" \"seen\" { input = data.abode_workspace.me.transition }\n\
         output \"transition\" { value = data.abode_workspace.me.transition }\n",
    );
    let provider = workdir.mirror_provider();
    let log = scratch.0.join("terraform.log");
    workdir.set("TF_LOG", "debug");
    workdir.set("TF_LOG_PATH", log.to_str().unwrap());
    let provider_starts = || {
        let starts = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|line| {
                line.contains("starting plugin") && line.contains("terraform-provider-abode")
            })
            .count();
        let _ = std::fs::remove_file(&log);
        starts
    };

    workdir.ok(&["plan", "-no-color", "-out=hand.tfplan"]);
    let by_hand = provider_starts();
    assert!(
        by_hand >= 2,
        "Terraform alone starts the provider for each walk ({by_hand})"
    );

    let launched = workdir.run_launched(&["plan", "-no-color", "-out=launched.tfplan"]);
    assert!(launched.status.success(), "{}", text(&launched));
    assert_eq!(
        provider_starts(),
        0,
        "a launched plan starts no provider of Terraform's"
    );
    assert_eq!(
        processes_of(&provider),
        Vec::<String>::new(),
        "the provider outlived its command"
    );
    let changes = |plan: &str| {
        let shown = workdir.run_launched(&["show", "-json", plan]);
        assert!(shown.status.success(), "{}", text(&shown));
        let plan: Value = serde_json::from_slice(&shown.stdout).unwrap();
        (
            plan["resource_changes"].clone(),
            plan["output_changes"].clone(),
        )
    };
    assert_eq!(changes("launched.tfplan"), changes("hand.tfplan"));
    assert!(changes("launched.tfplan")
        .0
        .to_string()
        .contains("\"start\""));

    let applied = workdir.run_launched(&["apply", "-no-color", "-auto-approve", "launched.tfplan"]);
    assert!(applied.status.success(), "{}", text(&applied));
    assert_eq!(
        provider_starts(),
        0,
        "a launched apply starts no provider of Terraform's"
    );
    let state = workdir.state();
    assert_eq!(
        resource(&state, "terraform_data.seen").unwrap()["values"]["input"],
        "start"
    );

    // Terraform's own failure is the launcher's.
    let refused = workdir.run_launched(&["plan", "-no-color", "-var=nope=1"]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(
        text(&refused).contains("undeclared variable"),
        "{}",
        text(&refused)
    );
    assert_eq!(processes_of(&provider), Vec::<String>::new());

    // A command that cannot be launched says why on one line.
    for (args, said) in [
        (
            vec!["--launch-terraform"],
            "usage: --launch-terraform [--then-show-json PLAN OUTPUT] TERRAFORM",
        ),
        (
            vec!["--launch-terraform", "/nonexistent/terraform", "plan"],
            "cannot run /nonexistent/terraform",
        ),
    ] {
        let output = Command::new(&provider).args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.starts_with("error: ") && stderr.contains(said),
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }

    // A configuration without the abode provider: the reattached one is unused.
    let plain = Workdir::new(
        &scratch.0.join("plain"),
        "resource \"terraform_data\" \"alone\" { input = \"x\" }\n",
    );
    let planned = plain.run_launched(&["plan", "-no-color"]);
    assert!(planned.status.success(), "{}", text(&planned));
    assert!(text(&planned).contains("1 to add"), "{}", text(&planned));
}

/// `--then-show-json`: after a plan that succeeded, the launcher kills what
/// the plan left running (a template's background process could otherwise
/// rewrite the plan after it was shown), then writes `terraform show -json`
/// of the plan; a JSON the plan's own code wrote never survives a failure.
#[test]
fn a_launched_plan_is_shown_once_nothing_it_started_runs() {
    let scratch = Scratch::new("then-show");
    let root = &scratch.0;
    let workdir = Workdir::new(root, "resource \"terraform_data\" \"x\" { input = 1 }\n");
    let launcher = workdir.mirror_provider();
    let output = root.join("plan.json");
    // A stand-in Terraform whose plan leaves a process behind and forges the
    // JSON, and whose show says whether that process still runs.
    let fake = root.join("fake-terraform");
    std::fs::write(
        &fake,
        "#!/bin/sh\n\
         case \"$1\" in\n\
         plan) (sleep 60 & echo $! > \"$DIR/straggler.pid\")\n\
               echo '{\"forged\":true}' > \"$OUT\"\n\
               exit \"${PLAN_STATUS:-0}\" ;;\n\
         show) [ -n \"$SHOW_FAILS\" ] && exit 1\n\
               if kill -0 \"$(cat \"$DIR/straggler.pid\")\" 2>/dev/null; then echo '{\"straggler\":\"alive\"}';\n\
               else echo '{\"straggler\":\"dead\"}'; fi ;;\n\
         esac\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let launch = |extra: &[(&str, &str)]| {
        Command::new(&launcher)
            .arg("--launch-terraform")
            .arg("--then-show-json")
            .arg(root.join("plan"))
            .arg(&output)
            .arg(&fake)
            .arg("plan")
            .env("DIR", root)
            .env("OUT", &output)
            .envs(extra.iter().copied())
            .output()
            .unwrap()
    };

    let shown = launch(&[]);
    assert!(shown.status.success(), "{}", text(&shown));
    assert_eq!(
        std::fs::read_to_string(&output).unwrap().trim(),
        "{\"straggler\":\"dead\"}"
    );
    let straggler = std::fs::read_to_string(root.join("straggler.pid")).unwrap();
    assert!(!process_running(straggler.trim().parse().unwrap()));

    for (extra, status) in [
        (vec![("PLAN_STATUS", "1")], Some(1)),
        (vec![("SHOW_FAILS", "1")], Some(0)),
    ] {
        let ran = launch(&extra);
        assert_eq!(ran.status.code(), status, "{extra:?}: {}", text(&ran));
        assert!(!output.exists(), "{extra:?}: a JSON was left");
        assert!(!root.join("plan.json.partial").exists(), "{extra:?}");
    }

    // With the real Terraform, the JSON is the one `terraform show` prints.
    let planned = Command::new(&launcher)
        .arg("--launch-terraform")
        .arg("--then-show-json")
        .arg("tfplan")
        .arg(&output)
        .arg("terraform")
        .args(["plan", "-no-color", "-out=tfplan"])
        .current_dir(&workdir.dir)
        .env("TF_CLI_CONFIG_FILE", &workdir.cli_config)
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .unwrap();
    assert!(planned.status.success(), "{}", text(&planned));
    let written: Value = serde_json::from_slice(&std::fs::read(&output).unwrap()).unwrap();
    let by_hand: Value = serde_json::from_str(&workdir.ok(&["show", "-json", "tfplan"])).unwrap();
    assert_eq!(written["resource_changes"], by_hand["resource_changes"]);
}
