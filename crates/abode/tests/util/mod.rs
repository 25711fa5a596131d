//! The end-to-end harness: a real `abode server` on a free loopback port with a
//! temporary data dir, and the real `abode` CLI run against it with a temporary
//! config dir.
//!
//! Everything the server starts (Terraform, the provider, workspace processes
//! and their agents) inherits a marker variable; dropping the [`Platform`] kills
//! the server and every process carrying the marker, so a failed test leaves
//! nothing running. A failing test prints the server's log.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod authority;

use std::fs;
use std::io::Write;
use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The variable every process of one platform inherits (not `ABODE_*`: the
/// provider strips those from workspace processes).
const MARKER_VAR: &str = "E2E_ABODE_PLATFORM";

/// Fails the test with one clear line when Terraform is missing.
pub fn require_terraform() {
    let found = Command::new("terraform")
        .arg("version")
        .env("CHECKPOINT_DISABLE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        found,
        "terraform is not installed or not on PATH: the end-to-end tests need Terraform 1.x"
    );
}

/// The `abode` binary under test.
pub fn abode_bin() -> &'static str {
    env!("CARGO_BIN_EXE_abode")
}

/// The repository's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A folder of this crate's test fixtures.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/e2e_fixtures")
        .join(name)
}

/// What a CLI run gave.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub command: String,
}

impl Run {
    pub fn from_output(command: String, output: Output) -> Run {
        Run {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            command,
        }
    }

    /// Asserts exit 0 and returns self.
    #[track_caller]
    pub fn ok(self) -> Run {
        assert_eq!(self.code, Some(0), "`{}` failed:\n{self}", self.command);
        self
    }

    /// Asserts the exit status and that stderr holds exactly one `error:` line
    /// containing every one of `needles` (case-insensitive).
    #[track_caller]
    pub fn fails_with(self, code: i32, needles: &[&str]) -> Run {
        assert_eq!(self.code, Some(code), "`{}`:\n{self}", self.command);
        let errors: Vec<&str> = self
            .stderr
            .lines()
            .filter(|line| line.starts_with("error:"))
            .collect();
        assert_eq!(
            errors.len(),
            1,
            "expected one error line from `{}`:\n{self}",
            self.command
        );
        let line = errors[0].to_lowercase();
        for needle in needles {
            assert!(
                line.contains(&needle.to_lowercase()),
                "`{}`: error line lacks {needle:?}:\n{self}",
                self.command
            );
        }
        self
    }

    /// Parses stdout as JSON.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|err| panic!("`{}` did not print JSON ({err}):\n{self}", self.command))
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// A running server with its own data dir, and a CLI session directory.
pub struct Platform {
    root: tempfile::TempDir,
    pub url: String,
    server: Option<Child>,
    marker: String,
    port: u16,
    /// The port of the server's `--prometheus-address`, when it has one.
    metrics_port: Option<u16>,
    extra: Vec<String>,
    /// `--database-url` for the server; None keeps the embedded SQLite store.
    database_url: Option<String>,
    /// Extra variables in the server's environment.
    server_env: Vec<(String, String)>,
}

/// Extra server flags the tests use: short agent timeouts so that health
/// changes show within seconds.
pub const FAST_AGENT_FLAGS: &[&str] = &[
    "--agent-connect-timeout",
    "8",
    "--agent-heartbeat-interval",
    "1",
    "--agent-heartbeat-timeout",
    "5",
];

impl Platform {
    /// Pushes the example template (examples/local-workspace) as `local`.
    /// Pushes the e2e fixture `fixture` as template `name`.
    pub fn push_fixture(&self, name: &str, fixture_name: &str) {
        let dir = fixture(fixture_name);
        self.run(&["templates", "push", name, "-d", dir.to_str().unwrap()])
            .ok();
    }

    pub fn push_example(&self) {
        let example = repo_root().join("examples/local-workspace");
        self.run(&[
            "templates",
            "push",
            "local",
            "-d",
            example.to_str().unwrap(),
        ])
        .ok();
    }

    /// Starts a server with the test defaults and waits until it answers.
    pub fn start() -> Platform {
        Platform::start_with(FAST_AGENT_FLAGS)
    }

    /// Starts a server with extra flags.
    pub fn start_with(extra: &[&str]) -> Platform {
        Platform::start_on(None, extra)
    }

    /// Starts a server with extra flags and extra variables in its
    /// environment.
    pub fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Platform {
        Platform::with_env(Platform::start_on(None, extra), env)
    }

    /// [`Platform::start_with_env`] with a metrics listener, as
    /// [`Platform::start_with_metrics`].
    pub fn start_with_env_and_metrics(extra: &[&str], env: &[(&str, &str)]) -> Platform {
        Platform::with_env(Platform::start_with_metrics(None, extra), env)
    }

    /// `platform`'s server started again with `env` added.
    fn with_env(mut platform: Platform, env: &[(&str, &str)]) -> Platform {
        platform.stop_server();
        platform.server_env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        platform.spawn_until_ready(true);
        platform
    }

    /// Starts a server with extra flags (on the database at `database_url`
    /// when given) that serves its Prometheus metrics on a port of its own
    /// ([`Platform::scrape`], [`Platform::wait_for_passes`]).
    pub fn start_with_metrics(database_url: Option<&str>, extra: &[&str]) -> Platform {
        Platform::start_inner(database_url, extra, true, |_| {})
    }

    /// Starts a server with extra flags, keeping its data in the database at
    /// `database_url` (PostgreSQL) instead of SQLite when given.
    pub fn start_on(database_url: Option<&str>, extra: &[&str]) -> Platform {
        Platform::start_prepared(database_url, extra, |_| {})
    }

    /// Like [`Platform::start_on`], calling `prepare` with the (not yet
    /// existing) data dir before the server first starts: to put there what
    /// an earlier release left behind.
    pub fn start_prepared(
        database_url: Option<&str>,
        extra: &[&str],
        prepare: impl FnOnce(&Path),
    ) -> Platform {
        Platform::start_inner(database_url, extra, false, prepare)
    }

    /// [`Platform::start_prepared`] with a metrics listener, as
    /// [`Platform::start_with_metrics`].
    pub fn start_prepared_with_metrics(
        database_url: Option<&str>,
        extra: &[&str],
        prepare: impl FnOnce(&Path),
    ) -> Platform {
        Platform::start_inner(database_url, extra, true, prepare)
    }

    fn start_inner(
        database_url: Option<&str>,
        extra: &[&str],
        metrics: bool,
        prepare: impl FnOnce(&Path),
    ) -> Platform {
        let root = tempfile::Builder::new()
            .prefix("abode-e2e-")
            .tempdir()
            .unwrap();
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}");
        let marker = root.path().display().to_string();
        let mut platform = Platform {
            root,
            url,
            server: None,
            marker,
            port,
            metrics_port: metrics.then(free_port),
            extra: extra.iter().map(|arg| arg.to_string()).collect(),
            database_url: database_url.map(str::to_string),
            server_env: Vec::new(),
        };
        prepare(&platform.data_dir());
        let outside = platform.outside();
        fs::create_dir_all(&outside).unwrap();
        // Sandboxed Terraform (nobody) writes its ledgers there.
        fs::set_permissions(&outside, fs::Permissions::from_mode(0o1777)).unwrap();
        platform.spawn_until_ready(true);
        platform
    }

    /// Starts the server and waits until it answers. A free port is only
    /// free until someone binds it: when the server could not listen
    /// because another process took its port meanwhile, it is started again,
    /// on new ports if `may_move` (nothing knows its address yet), else on
    /// the same ones a little later.
    fn spawn_until_ready(&mut self, may_move: bool) {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let log_start = self.server_log().len();
            self.spawn_server();
            let Err(status) = self.wait_until_ready() else {
                return;
            };
            let log = self.server_log();
            let this_run = log.get(log_start..).unwrap_or(&log);
            let port_taken = this_run.contains("Address already in use");
            assert!(
                port_taken && attempts < 10,
                "abode server exited with {status} before answering:\n{log}"
            );
            eprintln!("abode server could not listen (a port was taken), starting it again");
            if may_move {
                self.port = free_port();
                self.url = format!("http://127.0.0.1:{}", self.port);
                self.metrics_port = self.metrics_port.map(|_| free_port());
            } else {
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }

    fn spawn_server(&mut self) {
        let root = &self.root;
        let port = self.port;
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(root.path().join("server.log"))
            .unwrap();
        let server = Command::new(abode_bin())
            .arg("server")
            .arg("--address")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--data-dir")
            .arg(root.path().join("data"))
            .args(&self.extra)
            .args(self.metrics_port.iter().flat_map(|port| {
                [
                    "--prometheus-address".to_string(),
                    format!("127.0.0.1:{port}"),
                ]
            }))
            // Time-dependent tests move this clock instead of sleeping.
            .arg("--clock-offset-file")
            .arg(self.clock_offset_file())
            .args(
                self.database_url
                    .iter()
                    .flat_map(|url| ["--database-url", url.as_str()]),
            )
            // Templates that leave traces for a test write them here, the one
            // path of the machine their sandbox shows them.
            .arg("--terraform-mount")
            .arg(self.outside())
            // The marker reaches what Terraform starts only because it is passed.
            .arg("--terraform-env")
            .arg(MARKER_VAR)
            .envs(
                self.server_env
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            )
            .env(MARKER_VAR, &self.marker)
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env_remove("ABODE_URL")
            .env_remove("ABODE_TOKEN")
            .env_remove("ABODE_DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.server = Some(server);
    }

    /// Stops the server (SIGTERM) and starts it again on the same address
    /// and data dir; workspace processes keep running meanwhile.
    pub fn restart_server(&mut self) {
        self.stop_server();
        self.spawn_until_ready(false);
    }

    /// [`Platform::restart_server`] with `env` added to the server's
    /// environment (a setting changed between two runs).
    pub fn restart_server_with_env(&mut self, env: &[(&str, &str)]) {
        self.stop_server();
        self.server_env
            .extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        self.spawn_until_ready(false);
    }

    /// Kills the server with SIGKILL, as a crash or the OOM killer would:
    /// it runs no clean-up, and what it started (Terraform, its providers,
    /// workspace processes) is left as it is.
    pub fn kill_server(&mut self) {
        if let Some(mut server) = self.server.take() {
            signal(server.id(), "KILL");
            let _ = server.wait();
        }
    }

    /// Freezes the server (SIGSTOP), as a paused VM or a long stop of the
    /// process would: it answers nothing and renews nothing until
    /// [`Platform::thaw_server`]. What it started runs on.
    pub fn freeze_server(&self) {
        if let Some(server) = &self.server {
            signal(server.id(), "STOP");
        }
    }

    /// Lets a frozen server go on (SIGCONT) where it stopped.
    pub fn thaw_server(&self) {
        if let Some(server) = &self.server {
            signal(server.id(), "CONT");
        }
    }

    /// A directory outside the data dir that every Terraform run of this
    /// platform (and of its daemons) sees read-write (`--terraform-mount`):
    /// where templates leave what a test checks (ledgers, gates).
    pub fn outside(&self) -> PathBuf {
        self.root.path().join("outside")
    }

    /// The server's id (its data dir's `server-id`).
    pub fn server_id(&self) -> String {
        fs::read_to_string(self.data_dir().join("server-id"))
            .unwrap()
            .trim()
            .to_owned()
    }

    /// Starts the server again on the same address and data dir (after
    /// [`Platform::kill_server`]).
    pub fn start_server_again(&mut self) {
        assert!(self.server.is_none(), "the server still runs");
        self.spawn_until_ready(false);
    }

    fn stop_server(&mut self) {
        if let Some(mut server) = self.server.take() {
            signal(server.id(), "CONT");
            signal(server.id(), "TERM");
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = server.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = server.kill();
            let _ = server.wait();
        }
    }

    /// Waits until the server answers; how it exited if it did first.
    fn wait_until_ready(&mut self) -> Result<(), std::process::ExitStatus> {
        let client = abode_client::Client::new(&self.url, None);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if client.health().is_ok() {
                return Ok(());
            }
            if let Some(server) = self.server.as_mut() {
                if let Ok(Some(status)) = server.try_wait() {
                    self.server = None;
                    return Err(status);
                }
            }
            assert!(
                Instant::now() < deadline,
                "abode server did not answer within 60 s:\n{}",
                self.server_log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The port of the server's metrics listener (started with
    /// [`Platform::start_with_metrics`]).
    pub fn metrics_port(&self) -> u16 {
        self.metrics_port
            .expect("the server was started without --prometheus-address")
    }

    /// `GET /metrics` on the server's metrics listener; the body.
    pub fn scrape(&self) -> String {
        scrape(self.metrics_port())
    }

    /// The value of one series (`name{labels}` as the exposition writes it)
    /// in a scrape now; 0 when the series is not there yet.
    pub fn metric(&self, series: &str) -> f64 {
        sample(&self.scrape(), series).unwrap_or(0.0)
    }

    /// How many passes of the background loop `task` ended on this server
    /// (`abode_background_passes_total{task}`).
    pub fn passes(&self, task: &str) -> u64 {
        self.metric(&format!("abode_background_passes_total{{task=\"{task}\"}}")) as u64
    }

    /// Waits (a minute at most) until `count` more passes of `task` ended
    /// than when called. With `count` of 2 or more (one more than the
    /// loop's concurrent workers), a whole pass ran after the call: what
    /// the test asserts next was seen by the loop, not merely waited for.
    pub fn wait_for_passes(&self, task: &str, count: u64) {
        let from = self.passes(task);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let now = self.passes(task);
            if now >= from + count {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the {task} loop did not run {count} passes within a minute \
                 ({from} then {now})\nserver log:\n{}",
                self.server_log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The file holding how far (milliseconds) the server's clock runs
    /// ahead of the system's (`--clock-offset-file`).
    pub fn clock_offset_file(&self) -> PathBuf {
        self.root.path().join("clock-offset")
    }

    /// Moves the server's clock forward by `by`, at once: deadlines,
    /// expiries and heartbeat judgements see the time pass without the
    /// test waiting for it.
    pub fn advance_clock(&self, by: Duration) {
        let file = self.clock_offset_file();
        let offset: i64 = fs::read_to_string(&file)
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(0);
        let by = i64::try_from(by.as_millis()).unwrap();
        // Written whole and renamed, so the server never reads half a number.
        let next = file.with_extension("next");
        fs::write(&next, (offset + by).to_string()).unwrap();
        fs::rename(&next, &file).unwrap();
    }

    /// The server's process id, while it runs.
    pub fn server_pid(&self) -> Option<u32> {
        self.server.as_ref().map(Child::id)
    }

    /// The temporary root of this platform (data dir, config dirs, scratch).
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    pub fn data_dir(&self) -> PathBuf {
        self.root.path().join("data")
    }

    /// Where `abode_volume` keeps volumes (`<data-dir>/volumes`).
    pub fn volumes_dir(&self) -> PathBuf {
        self.data_dir().join("volumes")
    }

    /// The default CLI config dir (the first user's session).
    pub fn config_dir(&self) -> PathBuf {
        self.root.path().join("config")
    }

    pub fn server_log(&self) -> String {
        fs::read_to_string(self.root.path().join("server.log")).unwrap_or_default()
    }

    /// An `abode` command with the default session.
    pub fn cmd(&self, args: &[&str]) -> Command {
        self.cmd_as(&self.config_dir(), args)
    }

    /// An `abode` command with the session stored in `config_dir`.
    pub fn cmd_as(&self, config_dir: &Path, args: &[&str]) -> Command {
        let mut command = Command::new(abode_bin());
        command
            .args(args)
            .env("ABODE_CONFIG_DIR", config_dir)
            .env_remove("ABODE_URL")
            .env_remove("ABODE_TOKEN")
            .env(MARKER_VAR, &self.marker)
            .stdin(Stdio::null());
        command
    }

    /// Runs `abode ARGS` with the default session.
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_as(&self.config_dir(), args, None)
    }

    /// Runs `abode ARGS` with the session in `config_dir`, feeding `stdin`.
    /// `abode ssh WORKSPACE` as the person of `config_dir`, running a shell
    /// that says `up` and then waits: returned once it said it.
    pub fn open_ssh_session(&self, config_dir: &Path, workspace: &str) -> std::process::Child {
        let mut session = self
            .cmd_as(
                config_dir,
                &["ssh", workspace, "--", "sh", "-c", "echo up; sleep 600"],
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(session.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line, "up\n");
        session
    }

    pub fn run_as(&self, config_dir: &Path, args: &[&str], stdin: Option<&str>) -> Run {
        let mut command = self.cmd_as(config_dir, args);
        let text = format!("abode {}", args.join(" "));
        if stdin.is_some() {
            command.stdin(Stdio::piped());
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().unwrap();
            pipe.write_all(input.as_bytes()).unwrap();
        }
        Run::from_output(text, child.wait_with_output().unwrap())
    }

    /// Runs `abode ARGS` with the default session on a pseudo-terminal (its
    /// stdin, stdout and stderr are all the terminal), typing `input`: through
    /// util-linux's `script`, which passes what it reads to the terminal and
    /// prints what the command writes there (the typed text echoed included).
    pub fn run_on_terminal(&self, args: &[&str], input: &str) -> Run {
        let quoted: Vec<String> = std::iter::once(abode_bin())
            .chain(args.iter().copied())
            .map(shell_quote)
            .collect();
        let mut command = Command::new("script");
        command
            .args(["-q", "-e", "-c", &quoted.join(" "), "/dev/null"])
            .env("ABODE_CONFIG_DIR", self.config_dir())
            .env_remove("ABODE_URL")
            .env_remove("ABODE_TOKEN")
            .env(MARKER_VAR, &self.marker)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .expect("the terminal tests need `script` (util-linux or bsdutils)");
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input.as_bytes()).unwrap();
        drop(pipe);
        let text = format!("abode {} (on a terminal)", args.join(" "));
        Run::from_output(text, child.wait_with_output().unwrap())
    }

    /// Creates the first user `alice` (owner) and logs the default session in.
    pub fn login_owner(&self) {
        self.run_as(
            &self.config_dir(),
            &[
                "login",
                &self.url,
                "--first-user",
                "--username",
                "alice",
                "--email",
                "alice@example.com",
                "--password-stdin",
            ],
            Some("correct horse battery\n"),
        )
        .ok();
    }

    /// Logs the default session in as `alice`, the owner [`Platform::login_owner`]
    /// created through another server on the same database.
    pub fn login_existing_owner(&self) {
        self.run_as(
            &self.config_dir(),
            &[
                "login",
                &self.url,
                "--username",
                "alice",
                "--password-stdin",
            ],
            Some("correct horse battery\n"),
        )
        .ok();
    }

    /// A dashboard session of `username`, signed in through the login form
    /// over plain HTTP: an agent that follows no redirect, and the session
    /// cookie (`abode_session=...`).
    fn dashboard_session(&self, username: &str, password: &str) -> (ureq::Agent, String) {
        let base = self.url.trim_end_matches('/').to_string();
        let agent = ureq::AgentBuilder::new().redirects(0).build();
        let login = dashboard_answer(agent.get(&format!("{base}/login")).call());
        let presession = set_cookie(&login, "abode_presession");
        let body = login.into_string().unwrap();
        let csrf = csrf_of(&body);
        let signed = dashboard_answer(
            agent
                .post(&format!("{base}/login"))
                .set("Cookie", &presession)
                .send_form(&[
                    ("csrf", csrf.as_str()),
                    ("username", username),
                    ("password", password),
                ]),
        );
        assert_eq!(signed.status(), 303, "sign-in as {username}");
        let session = set_cookie(&signed, "abode_session");
        (agent, session)
    }

    /// The dashboard's page at `path` as `username`, signed in through the
    /// login form over plain HTTP: its HTML (status 200 asserted).
    pub fn dashboard_page(&self, username: &str, password: &str, path: &str) -> String {
        let base = self.url.trim_end_matches('/').to_string();
        let (agent, session) = self.dashboard_session(username, password);
        let page = dashboard_answer(
            agent
                .get(&format!("{base}{path}"))
                .set("Cookie", &session)
                .call(),
        );
        assert_eq!(page.status(), 200, "{path} as {username}");
        page.into_string().unwrap()
    }

    /// Submits a form of the dashboard's page at `path` to `action` as
    /// `username` with `fields` (and the page's CSRF token): the answer's
    /// status and HTML (a redirect is not followed).
    pub fn dashboard_submit(
        &self,
        username: &str,
        password: &str,
        path: &str,
        action: &str,
        fields: &[(&str, &str)],
    ) -> (u16, String) {
        let base = self.url.trim_end_matches('/').to_string();
        let (agent, session) = self.dashboard_session(username, password);
        let page = dashboard_answer(
            agent
                .get(&format!("{base}{path}"))
                .set("Cookie", &session)
                .call(),
        );
        let csrf = csrf_of(&page.into_string().unwrap());
        let mut form = vec![("csrf", csrf.as_str())];
        form.extend_from_slice(fields);
        let answer = dashboard_answer(
            agent
                .post(&format!("{base}{action}"))
                .set("Cookie", &session)
                .set("Origin", &base)
                .send_form(&form),
        );
        (answer.status(), answer.into_string().unwrap())
    }

    /// Creates a user with `role` (as the owner) and returns the config dir
    /// holding that user's session.
    pub fn login_new_user(&self, username: &str, role: &str) -> PathBuf {
        let password = format!("{username}-password\n");
        let email = format!("{username}@example.com");
        self.run_as(
            &self.config_dir(),
            &[
                "users",
                "create",
                username,
                "--email",
                &email,
                "--role",
                role,
                "--password-stdin",
            ],
            Some(&password),
        )
        .ok();
        let dir = self.root.path().join(format!("config-{username}"));
        self.run_as(
            &dir,
            &[
                "login",
                &self.url,
                "--username",
                username,
                "--password-stdin",
            ],
            Some(&password),
        )
        .ok();
        dir
    }

    /// The session token of a config dir, for calling the API directly.
    pub fn client_for(&self, config_dir: &Path) -> abode_client::Client {
        let session = abode_client::config::load_session(config_dir)
            .unwrap()
            .expect("logged in");
        abode_client::Client::new(&session.url, Some(session.token))
    }

    /// Starts `abode ARGS` beside the test without waiting for it (a command
    /// that follows a build the test interrupts or watches); end it with
    /// [`finish`].
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.cmd(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// `abode show WS -o json`, parsed.
    /// Waits (up to a minute) until the workspace's latest build has `status`,
    /// and returns that build. The workspace may not exist yet: a `create` may
    /// run beside the test.
    #[track_caller]
    pub fn wait_for_build_status(&self, workspace: &str, status: &str) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let shown = self.run(&["show", workspace, "--output", "json"]);
            let build = match shown.code {
                Some(0) => shown.json()["latest_build"].clone(),
                _ => serde_json::Value::Null,
            };
            if build["status"] == status {
                return build;
            }
            assert!(
                Instant::now() < deadline,
                "build of {workspace} never became {status}: {build:#}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn show(&self, workspace: &str) -> serde_json::Value {
        self.run(&["show", workspace, "--output", "json"])
            .ok()
            .json()
    }

    /// Polls `abode show` until `agent.status` is `status` (the agent runs on
    /// its own clock); panics with the last answer after `timeout`.
    pub fn wait_for_agent(
        &self,
        workspace: &str,
        status: &str,
        timeout: Duration,
    ) -> serde_json::Value {
        let deadline = Instant::now() + timeout;
        loop {
            let shown = self.show(workspace);
            if shown["agent"]["status"] == status {
                return shown;
            }
            assert!(
                Instant::now() < deadline,
                "agent of {workspace} never became {status}; last: {shown:#}\nserver log:\n{}",
                self.server_log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Processes started on behalf of this platform (workspace processes,
    /// agents, Terraform), the server itself excluded.
    pub fn spawned_processes(&self) -> Vec<u32> {
        let server = self.server.as_ref().map(Child::id);
        marked_processes(&self.marker)
            .into_iter()
            .filter(|pid| Some(*pid) != server && *pid != std::process::id())
            .collect()
    }

    fn shutdown(&mut self) {
        self.stop_server();
        for pid in marked_processes(&self.marker) {
            if pid != std::process::id() {
                signal(pid, "KILL");
            }
        }
    }
}

impl Drop for Platform {
    fn drop(&mut self) {
        self.shutdown();
        if std::thread::panicking() {
            eprintln!("--- abode server log ---\n{}", self.server_log());
        }
    }
}

/// `text` quoted for `sh`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// A loopback port bound but not listening: a connection to it is refused,
/// and no other process can take it meanwhile (as it could a port from
/// [`free_port`]), until [`ReservedPort::listen`] hands it to a listener
/// in this process.
pub struct ReservedPort {
    socket: tokio::net::TcpSocket,
    pub port: u16,
}

impl ReservedPort {
    pub fn new() -> ReservedPort {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let port = socket.local_addr().unwrap().port();
        ReservedPort { socket, port }
    }

    /// Starts listening on the port: a blocking listener.
    pub fn listen(self) -> TcpListener {
        // tokio's listener registers with a reactor, which it leaves again
        // when made a std one.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        let _entered = runtime.enter();
        let listener = self.socket.listen(128).unwrap().into_std().unwrap();
        listener.set_nonblocking(false).unwrap();
        listener
    }
}

/// A free loopback port (a server's or its metrics listener's) for a child
/// process to bind: another process may take it first, so the child's
/// start is retried on new ports when it cannot listen (see
/// `Platform::spawn_until_ready`). In this process, bind port 0 or use a
/// [`ReservedPort`] instead.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status();
}

/// Processes whose environment carries the marker, or whose working
/// directory lies under the platform's root.
fn marked_processes(marker: &str) -> Vec<u32> {
    let needle = format!("{MARKER_VAR}={marker}");
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let proc_dir = PathBuf::from(format!("/proc/{pid}"));
            let by_env = fs::read(proc_dir.join("environ")).is_ok_and(|environ| {
                environ
                    .split(|byte| *byte == 0)
                    .any(|var| var == needle.as_bytes())
            });
            let by_cwd =
                fs::read_link(proc_dir.join("cwd")).is_ok_and(|cwd| cwd.starts_with(marker));
            let alive = fs::read_to_string(proc_dir.join("stat")).is_ok_and(|stat| {
                !stat
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            });
            (by_env || by_cwd) && alive
        })
        .collect()
}

/// The one directory under `dir` (e.g. the workspace's volume).
#[track_caller]
pub fn only_subdir(dir: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("cannot list {}: {err}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .collect();
    assert_eq!(
        dirs.len(),
        1,
        "expected one directory in {}: {dirs:?}",
        dir.display()
    );
    dirs.into_iter().next().unwrap()
}

/// Copies the repository's example template to `dest` (so tests can edit it).
pub fn copy_dir(from: &Path, dest: &Path) {
    fs::create_dir_all(dest).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = dest.join(entry.file_name());
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            if entry.file_name() != ".terraform" {
                copy_dir(&entry.path(), &target);
            }
        } else if kind.is_file() {
            fs::copy(entry.path(), &target).unwrap();
        }
        // As `cp -a` copies: a sandboxed Terraform (an unprivileged user)
        // must still own what it made.
        if target.exists() {
            let meta = entry.metadata().unwrap();
            std::os::unix::fs::lchown(&target, Some(meta.uid()), Some(meta.gid())).unwrap();
        }
    }
}

/// Waits for the workspace's processes to be gone (SIGTERM has a grace period).
pub fn assert_no_processes_left(platform: &Platform, when: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let left = platform.spawned_processes();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "processes still running {when}: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs one SQL statement on the server's SQLite database (`abode.db` in the
/// data dir) behind the server's back, as a restore or a manual repair would.
pub fn sqlite_execute(platform: &Platform, statement: &str) {
    on_sqlite(platform, |mut connection| async move {
        let done = sqlx::query(statement)
            .execute(&mut connection)
            .await
            .unwrap_or_else(|err| panic!("{statement}: {err}"));
        assert!(done.rows_affected() > 0, "{statement} changed nothing");
    });
}

/// Runs `work` on a connection to the server's SQLite database (`abode.db`
/// in the data dir), behind the server's back.
pub fn on_sqlite<T, F, Fut>(platform: &Platform, work: F) -> T
where
    F: FnOnce(sqlx::SqliteConnection) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    use sqlx::ConnectOptions;
    let path = platform.data_dir().join("abode.db");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let connection = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .busy_timeout(Duration::from_secs(10))
            .connect()
            .await
            .unwrap_or_else(|err| panic!("cannot open {}: {err}", path.display()));
        work(connection).await
    })
}

/// The digest in the confirm command a held build printed.
#[track_caller]
pub fn printed_digest(run: &Run) -> String {
    run.stderr
        .split("--digest ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no confirm command with a digest:\n{run}"))
        .to_string()
}

/// The server's peak resident memory so far (VmHWM), in kB.
pub fn peak_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

/// A database of its own on the test PostgreSQL server, dropped (best
/// effort) when the test ends; declare it before the [`Platform`] so the
/// server is gone first.
pub struct FreshDatabase {
    admin_url: String,
    pub name: String,
    pub url: String,
}

impl FreshDatabase {
    /// Fails the test with one clear line when there is no test server.
    pub fn create() -> FreshDatabase {
        let Ok(admin_url) = std::env::var("ABODE_TEST_POSTGRES_URL") else {
            panic!(
                "ABODE_TEST_POSTGRES_URL is not set: the PostgreSQL end-to-end tests need a server \
                 (scripts/run-tests starts one; by hand: source scripts/postgres.sh; abode_start_postgres)"
            );
        };
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "abode_e2e_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        psql(&admin_url, &format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|err| panic!("cannot create the test database {name}: {err}"));
        let url = with_database(&admin_url, &name);
        FreshDatabase {
            admin_url,
            name,
            url,
        }
    }

    /// A directory every server on this database mounts into its Terraform
    /// runs (`--terraform-mount`), for what their templates write outside
    /// their work dirs (ledgers). Writable by the sandbox's user.
    pub fn shared_dir(&self) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("{}-shared", self.name));
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o1777)).unwrap();
        dir
    }
}

impl Drop for FreshDatabase {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(std::env::temp_dir().join(format!("{}-shared", self.name)));
        let drop = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        if let Err(err) = psql(&self.admin_url, &drop) {
            eprintln!(
                "note: could not drop the test database {}: {err}",
                self.name
            );
        }
    }
}

/// Runs one SQL command with the `psql` client; its unaligned output.
pub fn psql(url: &str, sql: &str) -> Result<String, String> {
    let output = Command::new("psql")
        .arg(url)
        .args(["--no-psqlrc", "--quiet", "--tuples-only", "--no-align"])
        .args(["-v", "ON_ERROR_STOP=1", "-c", sql])
        .stdin(Stdio::null())
        .output()
        .map_err(|err| format!("psql (the PostgreSQL client) cannot run: {err}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    } else {
        // One line, so that a failing test says why in one line.
        let stderr = String::from_utf8_lossy(&output.stderr);
        Err(stderr.split_whitespace().collect::<Vec<_>>().join(" "))
    }
}

/// `url` (postgres://USER@HOST:PORT/DB?QUERY) naming database `name` instead.
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |at| at + 3);
    let server = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{server}/{name}?{query}"),
        None => format!("{server}/{name}"),
    }
}

/// `GET /metrics` on the metrics listener; the body.
pub fn scrape(port: u16) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::io::Write::write_all(
        &mut stream,
        b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut response = String::new();
    std::io::Read::read_to_string(&mut stream, &mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    body.to_string()
}

/// The value of `series` (`name{labels}` exactly as written) in a scrape.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|value| value.trim().parse().unwrap())
}

/// Ends a CLI command the test started beside it (its outcome is not the point).
pub fn finish(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// A daemon process and where it keeps its things.
pub struct Daemon {
    child: Child,
    pub data_dir: PathBuf,
    log: PathBuf,
}

impl Daemon {
    pub fn start(platform: &Platform, name: &str, key_file: &Path, extra: &[&str]) -> Daemon {
        let data_dir = platform.root().join(name);
        fs::create_dir_all(&data_dir).unwrap();
        let log = platform.root().join(format!("{name}.log"));
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let child = Command::new(abode_bin())
            .args(["provisioner", "start", "--url", &platform.url, "--key-file"])
            .arg(key_file)
            .arg("--data-dir")
            .arg(&data_dir)
            .args(["--name", name])
            .arg("--terraform-mount")
            .arg(platform.outside())
            .args(extra)
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1")
            .env_remove("ABODE_URL")
            .env_remove("ABODE_TOKEN")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        Daemon {
            child,
            data_dir,
            log,
        }
    }

    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn volumes(&self) -> Vec<String> {
        names_in(&self.data_dir.join("volumes"))
    }

    /// Waits for the daemon to exit by itself; its status.
    pub fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the daemon did not stop:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn kill(&mut self) {
        signal(self.child.id(), "CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Freezes the daemon (SIGSTOP), as a paused VM would; what it started
    /// runs on.
    pub fn freeze(&self) {
        signal(self.child.id(), "STOP");
    }

    /// Lets a frozen daemon go on (SIGCONT).
    pub fn thaw(&self) {
        signal(self.child.id(), "CONT");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| entry.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Creates a provisioner key and writes it to a file only its user reads.
pub fn create_key(platform: &Platform, name: &str, tags: &[&str]) -> PathBuf {
    let mut args = vec!["provisioner", "keys", "create", name];
    for tag in tags {
        args.extend(["--tag", tag]);
    }
    let created = platform.run(&args).ok();
    let secret = created.stdout.trim_end_matches('\n');
    assert!(
        secret.starts_with("abode_pk_") && !secret.contains('\n'),
        "{created}"
    );
    let file = platform.root().join(format!("{name}.key"));
    fs::write(&file, format!("{secret}\n")).unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    file
}

/// The example template's text with `edits` (from, to) applied; each
/// `from` must be in it.
pub fn example_with(edits: &[(&str, &str)]) -> String {
    let mut text =
        fs::read_to_string(repo_root().join("examples/local-workspace/main.tf")).unwrap();
    for (from, to) in edits {
        assert!(
            text.contains(from),
            "the example template no longer has {from:?}"
        );
        text = text.replace(from, to);
    }
    text
}

/// The example's `lifecycle` block that keeps its volume's name as created,
/// so that a retained home is adopted in place (docs/retain.md).
pub const NAME_KEPT: &str = "  lifecycle {\n    ignore_changes = [name]\n  }\n";

/// An edit for [`example_with`] that drops [`NAME_KEPT`]: a test that renames
/// the example's volume to make Terraform replace it needs it (with the block,
/// the new name is ignored).
pub const NAME_NOT_KEPT: (&str, &str) = (NAME_KEPT, "");

/// `text` (the example template's, or an edited copy) without
/// [`NAME_KEPT`], so that renaming its volume replaces it.
pub fn name_not_kept(text: &str) -> String {
    assert!(
        text.contains(NAME_KEPT),
        "the example template no longer keeps its volume's name with {NAME_KEPT:?}"
    );
    text.replacen(NAME_KEPT, "", 1)
}

/// Writes `main_tf` as a template folder and pushes it (activated).
pub fn push_template(platform: &Platform, name: &str, version: u32, main_tf: &str) {
    let dir = platform.root().join(format!("templates/{name}-v{version}"));
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("main.tf"), main_tf).unwrap();
    platform
        .run(&[
            "templates",
            "push",
            name,
            "-d",
            dir.to_str().unwrap(),
            "--activate",
        ])
        .ok();
}

/// Pushes the example template (renamed volume from version 2 on), creates
/// `dev` and asks for the update the guard holds; returns the digest.
pub fn hold_a_build(platform: &Platform) -> String {
    let example = fs::read_to_string(repo_root().join("examples/local-workspace/main.tf")).unwrap();
    let renamed = name_not_kept(&example).replace("name = \"home-${", "name = \"home2-${");
    assert_ne!(example, renamed, "the example no longer names its volume");
    for (version, text) in [(1, &example), (2, &renamed)] {
        push_template(platform, "local", version, text);
        if version == 1 {
            platform.run(&["create", "dev", "--template", "local"]).ok();
            only_subdir(&platform.volumes_dir());
        }
    }
    let held = platform.run(&["update", "dev"]);
    assert_eq!(held.code, Some(3), "{held}");
    printed_digest(&held)
}

/// A dashboard answer, whatever its status.
fn dashboard_answer(result: Result<ureq::Response, ureq::Error>) -> ureq::Response {
    match result {
        Ok(response) | Err(ureq::Error::Status(_, response)) => response,
        Err(other) => panic!("{other}"),
    }
}

/// The `name=value` of the cookie `name` an answer sets.
fn set_cookie(response: &ureq::Response, name: &str) -> String {
    response
        .all("set-cookie")
        .into_iter()
        .find(|cookie| cookie.starts_with(&format!("{name}=")))
        .and_then(|cookie| cookie.split(';').next())
        .unwrap_or_else(|| panic!("no {name} cookie"))
        .to_string()
}

/// The CSRF token of a dashboard form.
fn csrf_of(page: &str) -> String {
    let start = page.find("name=\"csrf\" value=\"").expect("a form") + 19;
    page[start..start + page[start..].find('"').unwrap()].to_string()
}

/// Starts `node SCRIPT` in tests/oidc (the npm packages the bootstrap
/// installs there) with `envs`, and answers the process and the JSON line
/// it printed first (where it listens); what it prints later is dropped.
pub fn start_node_server(
    script: &str,
    envs: &[(&str, &str)],
) -> (std::process::Child, serde_json::Value) {
    use std::io::BufRead;
    let dir = repo_root().join("crates/abode/tests/oidc");
    assert!(
        dir.join("node_modules/oidc-provider").is_dir(),
        "the test OpenID provider is not installed: source scripts/bootstrap.sh (npm ci in {})",
        dir.display()
    );
    let mut child = Command::new("node")
        .arg(script)
        .current_dir(&dir)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // Its warnings and errors go with the test's output.
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|error| panic!("node is not on PATH (Node 20 runs {script}): {error}"));
    let mut line = String::new();
    let mut output = std::io::BufReader::new(child.stdout.take().unwrap());
    output.read_line(&mut line).unwrap();
    // A closed pipe would end it at its next line.
    std::thread::spawn(move || std::io::copy(&mut output, &mut std::io::sink()));
    let started: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|_| panic!("{script} did not start: {line:?}"));
    (child, started)
}

/// A WebSocket echo server on loopback (an app in a workspace): its port.
pub fn websocket_echo_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || {
                let Ok(mut socket) = tokio_tungstenite::tungstenite::accept(stream) else {
                    return;
                };
                while let Ok(message) = socket.read() {
                    if message.is_close() || socket.send(message).is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

/// Polls `done` until it holds; panics naming `what` after `timeout`.
#[track_caller]
pub fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Platform {
    /// Asserts that the server closed a connection because its person may
    /// no longer connect, woken by a change on this server (not by the
    /// periodic check).
    pub fn assert_connection_closed_at_once(&self) {
        let log = self.server_log();
        let closed = log
            .lines()
            .find(|line| line.contains("may no longer connect: closing it"))
            .unwrap_or_else(|| panic!("no closing line in the server's log:\n{log}"));
        assert!(
            closed.contains("a revocation or narrowed access on this server"),
            "{closed}"
        );
    }
}

/// `promtool check metrics` on a scrape; needs Debian's `prometheus`
/// package (scripts/bootstrap.sh installs it).
pub fn promtool_check(text: &str) {
    use std::io::Write;
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(_) => panic!(
            "promtool is not on PATH: install Debian's prometheus package (source scripts/bootstrap.sh does)"
        ),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics refused the scrape:\n{}{}\n{text}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
