//! Several servers on one PostgreSQL database (issue 15): each running build
//! belongs to the server that claimed it, under a lease that server renews.
//! A server that restarts takes back only its own builds, never another live
//! server's; a server that dies has its builds failed by the others once its
//! lease runs out, and on its return stores the state its Terraform finished
//! with. Cancels and logs reach a build through any server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::process::Child;
use std::time::{Duration, Instant};

use util::{finish, fixture, require_terraform, FreshDatabase, Platform};

/// Leases run out by the servers' clocks, which the test moves; the keeper's
/// rounds are real time (a quarter of the lease) and a lease is salvaged
/// only once it stayed expired and unchanged for five of them. Six seconds
/// keep a live server's lease through a stall of several seconds on a
/// loaded machine while a dead one's is salvaged within seconds.
const LEASE: &[&str] = &["--job-lease", "6"];

/// Keeper rounds after which an expired lease nobody renews is salvaged
/// (`UNCHANGED_ROUNDS` in `job_leases.rs`), and one more.
const SALVAGE_ROUNDS: u64 = 6;

fn server(database: &FreshDatabase, extra: &[&str]) -> Platform {
    let mut flags = util::FAST_AGENT_FLAGS.to_vec();
    flags.extend(LEASE);
    flags.extend(["--cancel-grace", "5"]);
    flags.extend(extra);
    Platform::start_with_metrics(Some(&database.url), &flags)
}

fn create(front: &Platform, workspace: &str, seconds: u32) -> Child {
    front.spawn(&[
        "create",
        workspace,
        "--template",
        "sleepy",
        "--parameter",
        &format!("seconds={seconds}"),
    ])
}

/// Waits until the build's log, read through `platform`, shows the apply's
/// local-exec: the build runs on the other server.
#[track_caller]
fn wait_for_apply(platform: &Platform, workspace: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let log = platform.run(&["builds", "logs", workspace, "1"]);
        if log.stdout.contains("slow: Provisioning with 'local-exec'") {
            return;
        }
        assert!(Instant::now() < deadline, "the apply never started:\n{log}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn server_id(platform: &Platform) -> String {
    std::fs::read_to_string(platform.data_dir().join("server-id"))
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn servers_keep_their_own_builds_and_take_over_a_dead_ones() {
    require_terraform();
    let database = FreshDatabase::create();
    // The builder runs every build; the front runs none (API only).
    let mut builder = server(&database, &["--provisioners", "1"]);
    let mut front = server(&database, &["--provisioners", "0"]);
    builder.login_owner();
    front.login_existing_owner();
    let sleepy = fixture("sleepy");
    front
        .run(&[
            "templates",
            "push",
            "sleepy",
            "-d",
            sleepy.to_str().unwrap(),
        ])
        .ok();

    // A build asked of the front runs on the builder; its log reaches the front.
    let first = create(&front, "one", 60);
    wait_for_apply(&front, "one");

    // The front dies and comes back: the builder's build is not its own to
    // fail. Both clocks jump past the lease: the builder, alive, renews it.
    front.kill_server();
    front.start_server_again();
    for platform in [&builder, &front] {
        platform.advance_clock(Duration::from_secs(600));
    }
    // Enough of the front's keeper rounds to have salvaged the build were
    // its lease not renewed: still running.
    front.wait_for_passes("keeper", SALVAGE_ROUNDS);
    let build = front.show("one")["latest_build"].clone();
    assert_eq!(build["status"], "running", "{build:#}");

    // A cancel through the front reaches the builder's Terraform.
    front.run(&["builds", "cancel", "one", "1"]).ok();
    front.wait_for_build_status("one", "canceled");
    finish(first);

    // The builder dies in the middle of an apply: once its lease runs out,
    // the front fails the build, naming it.
    let second = create(&front, "two", 8);
    wait_for_apply(&front, "two");
    let builder_id = server_id(&builder);
    // Listed through the front (which has none): the builder's provisioner,
    // connected, running that build.
    let builder_row = |front: &Platform| {
        let listed = front
            .run(&["provisioner", "list", "-o", "json"])
            .ok()
            .json();
        let rows = listed.as_array().unwrap().clone();
        assert_eq!(rows.len(), 1, "{listed:#}");
        assert_eq!(rows[0]["server"], builder_id.as_str(), "{listed:#}");
        rows[0].clone()
    };
    let row = builder_row(&front);
    assert_eq!(row["status"], "connected", "{row:#}");
    assert_eq!(row["current_job"]["workspace"], "alice/two", "{row:#}");
    builder.kill_server();
    front.advance_clock(Duration::from_secs(60));
    let build = front.wait_for_build_status("two", "failed");
    assert_eq!(builder_row(&front)["status"], "stale");
    let error = build["error"].as_str().unwrap();
    assert!(
        error.contains(&format!(
            "the server {builder_id} running this build stopped renewing its lease"
        )),
        "{build:#}"
    );
    finish(second);
    let audit = front
        .run(&["audit", "--workspace", "two", "--output", "json"])
        .ok()
        .json();
    assert!(
        audit
            .as_array()
            .unwrap()
            .iter()
            .any(|event| event["action"] == "build.salvage"),
        "{audit:#}"
    );

    // The builder comes back: it follows the Terraform it left running to its
    // end and stores the state it finished with; nothing of it is lost.
    builder.start_server_again();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stored = util::psql(
            &database.url,
            "SELECT count(*) FROM workspace_states s JOIN workspaces w ON w.id = s.workspace_id \
             WHERE w.name = 'two' AND position('terraform_data' in convert_from(s.state, 'UTF8')) > 0",
        )
        .unwrap();
        if stored == "1" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the state of the salvaged build never arrived:\n{}",
            builder.server_log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(front.show("two")["latest_build"]["status"], "failed");
}

/// An agent keeps its tunnel to one server; a person's `abode ssh` through
/// another server is relayed to it, authorized and audited once, by the
/// server holding the tunnel; a person without access is refused by both.
#[test]
fn a_connection_through_any_server_reaches_the_agent() {
    require_terraform();
    let database = FreshDatabase::create();
    // The agent connects to the builder (its access URL); people use the front.
    let builder = server(&database, &["--provisioners", "1"]);
    let front = server(&database, &["--provisioners", "0"]);
    builder.login_owner();
    front.login_existing_owner();
    front.push_example();
    front.run(&["create", "dev", "--template", "local"]).ok();
    front.wait_for_agent("dev", "ready", Duration::from_secs(60));

    // Through the front, relayed: output and exit status come back.
    let run = front.run(&["ssh", "dev", "--", "sh", "-c", "echo relayed; exit 3"]);
    assert_eq!(run.code, Some(3), "{run}");
    assert_eq!(run.stdout, "relayed\n", "{run}");
    let log = front.server_log();
    assert!(
        log.contains("relaying a connection to the server that holds the agent's tunnel"),
        "{log}"
    );
    let audit = front
        .run(&["audit", "--action", "workspace.connect", "-o", "json"])
        .ok()
        .json();
    assert_eq!(audit.as_array().unwrap().len(), 1, "{audit:#}");
    // Logged once, by the server holding the agent's tunnel, with the
    // address the front saw and the front's own.
    let logged = crate::e2e_connection_log::ended_log(&front, &front.config_dir(), 1);
    assert_eq!(logged[0]["server_id"], server_id(&builder), "{logged:#}");
    assert_eq!(logged[0]["kind"], "ssh", "{logged:#}");
    assert!(
        logged[0]["client_ip"].as_str().unwrap().contains(" via "),
        "{logged:#}"
    );
    assert!(
        logged[0]["bytes_from_workspace"].as_u64().unwrap() > 0,
        "{logged:#}"
    );

    // A member who may not connect is refused, with the holding server's
    // answer relayed or the front's own.
    let bob = front.login_new_user("bob", "member");
    let refused = front.run_as(&bob, &["ssh", "alice/dev", "--", "true"], None);
    assert_eq!(refused.code, Some(1), "{refused}");
    assert!(
        refused.stderr.contains("not found")
            || refused.stderr.contains("forbidden")
            || refused.stderr.contains("may not"),
        "{refused}"
    );
}

/// An app is served through any server: the one its agent's tunnel is not
/// on relays the request, as it is, to the one it is on, which signs it in
/// and decides.
#[test]
fn an_app_through_any_server_reaches_its_agent() {
    require_terraform();
    let database = FreshDatabase::create();
    let builder = server(&database, &["--provisioners", "1", "--allow-path-apps"]);
    let front = server(&database, &["--provisioners", "0", "--allow-path-apps"]);
    builder.login_owner();
    front.login_existing_owner();
    let web_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let template = format!(
        r#"
terraform {{
  required_providers {{
    abode = {{ source = "abode/abode" }}
  }}
}}
data "abode_workspace" "me" {{}}
resource "abode_volume" "home" {{
  name = "home-${{data.abode_workspace.me.id}}"
}}
resource "abode_agent" "main" {{
  count = data.abode_workspace.me.start_count
  os    = "linux"
  arch  = "amd64"
}}
resource "abode_process" "agent" {{
  count   = data.abode_workspace.me.start_count
  command = ["sh", "-c", abode_agent.main[0].init_script]
  dir     = abode_volume.home.path
  env     = {{ ABODE_AGENT_TOKEN = abode_agent.main[0].token }}
}}
resource "abode_process" "web" {{
  count   = data.abode_workspace.me.start_count
  command = ["python3", "-m", "http.server", "{web_port}", "--bind", "127.0.0.1"]
  dir     = abode_volume.home.path
}}
resource "abode_app" "web" {{
  count    = data.abode_workspace.me.start_count
  agent_id = abode_agent.main[0].id
  slug     = "web"
  url      = "http://127.0.0.1:{web_port}"
}}
"#
    );
    let dir = front.root().join("templates/apps");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("main.tf"), template).unwrap();
    front
        .run(&["templates", "push", "apps", "-d", dir.to_str().unwrap()])
        .ok();
    front.run(&["create", "dev", "--template", "apps"]).ok();
    front.wait_for_agent("dev", "ready", Duration::from_secs(60));
    let id = front.show("dev")["id"].as_str().unwrap().to_string();
    std::fs::write(
        builder
            .volumes_dir()
            .join(format!("home-{id}"))
            .join("hello.txt"),
        "relayed\n",
    )
    .unwrap();
    let token = front
        .run(&["tokens", "create", "--name", "apps"])
        .ok()
        .stdout
        .trim()
        .to_string();
    let url = format!(
        "{}/@alice/dev/apps/web/hello.txt",
        front.url.trim_end_matches('/')
    );
    let answer = ureq::get(&url)
        .set("Authorization", &format!("Bearer {token}"))
        .call()
        .unwrap();
    assert_eq!(answer.into_string().unwrap(), "relayed\n");
    let log = front.server_log();
    assert!(
        log.contains("relaying an app request to the server that holds the agent's tunnel"),
        "{log}"
    );
    // Another member is refused by the holding server, relayed back.
    let bob = front.login_new_user("bob", "member");
    let bobs = front
        .run_as(&bob, &["tokens", "create", "--name", "apps"], None)
        .ok()
        .stdout
        .trim()
        .to_string();
    match ureq::get(&url)
        .set("Authorization", &format!("Bearer {bobs}"))
        .call()
    {
        Err(ureq::Error::Status(status, _)) => assert_eq!(status, 404),
        other => panic!("another member got {:?}", other.map(|r| r.status())),
    }
}
