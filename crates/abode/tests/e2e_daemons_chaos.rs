//! Chaos on loopback (issue 15's evidence): two API-only servers on one
//! PostgreSQL and three external provisioner daemons (one key, one shared
//! volumes dir) run 60 builds over 30 workspaces, asked through both servers
//! at once, while one daemon is killed in the middle of an apply, one server
//! is killed, a build is canceled through the server that did not create it
//! and another's log is followed through the other server; then, in the
//! second wave, a daemon and a server are frozen (SIGSTOP, as a paused VM
//! is) for longer than a lease and let go again (issue 26).
//!
//! Every apply of the `append-apply` fixture appends `BUILD TRANSITION
//! PLAN-TIME` to a file in the workspace's home volume, and its state keeps
//! the plan time: so the test proves that every build ends, that no build is
//! applied twice, that every succeeded build applied, and that each
//! workspace's stored state is its last apply, with exactly the volumes that
//! exist on disk.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use abode_client::Client;
use abode_sdk::{Build, Transition};
use util::{finish, fixture, require_terraform, signal, FreshDatabase, Platform};

const WORKSPACES: usize = 30;
const TEMPLATE: &str = "append";
const KEY: &str = "chaos";
/// Short leases, so that a killed daemon's build is failed within seconds
/// (a server salvages a lease only after it stayed unchanged for more than
/// a lease of real time; see `job_leases.rs`).
const LEASE_SECONDS: &str = "3";
/// The whole test's budget: every wait below ends by then.
const BUDGET: Duration = Duration::from_secs(180);

/// The workspace whose provisioner is killed in the middle of its apply.
const KILLED: &str = "w00";
/// The workspace whose build is canceled through the other server.
const CANCELED: &str = "w01";
/// The workspace whose build's log is followed through the other server.
const FOLLOWED: &str = "w02";

fn server(database: &FreshDatabase) -> Platform {
    Platform::start_on(
        Some(&database.url),
        &["--provisioners", "0", "--job-lease", LEASE_SECONDS],
    )
}

/// Fails the test with `what` once the budget is spent.
struct Budget(Instant);

impl Budget {
    #[track_caller]
    fn wait_for<T>(&self, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
        loop {
            if let Some(found) = probe() {
                return found;
            }
            assert!(
                self.0.elapsed() < BUDGET,
                "the test's budget ran out waiting for {what}"
            );
            thread::sleep(Duration::from_millis(200));
        }
    }
}

/// An external provisioner daemon (`abode provisioner start`) beside the
/// test, its log in a file.
struct Daemon {
    name: String,
    url: String,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl Daemon {
    fn start(host: &Platform, name: &str, url: &str, key_file: &Path, volumes: &Path) -> Daemon {
        let mut daemon = Daemon {
            name: name.to_string(),
            url: url.to_string(),
            data_dir: host.root().join(format!("daemon-{name}")),
            log: host.root().join(format!("daemon-{name}.log")),
            child: None,
        };
        daemon.spawn(host, key_file, volumes);
        daemon
    }

    /// Starts the daemon (again) on its data dir. Started through `host`, it
    /// carries that platform's marker, and passes it to its Terraform runs,
    /// so that dropping the platform ends them all.
    fn spawn(&mut self, host: &Platform, key_file: &Path, volumes: &Path) {
        assert!(self.child.is_none(), "{} still runs", self.name);
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = host
            .cmd(&[
                "provisioner",
                "start",
                "--url",
                &self.url,
                "--key-file",
                key_file.to_str().unwrap(),
                "--data-dir",
                self.data_dir.to_str().unwrap(),
                "--volumes-dir",
                volumes.to_str().unwrap(),
                "--concurrency",
                "2",
                "--name",
                &self.name,
                "--cancel-grace",
                "5",
                "--terraform-env",
                "E2E_ABODE_PLATFORM",
            ])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    /// SIGKILL: no clean-up; its Terraform, if any, runs on.
    fn kill(&mut self) {
        let mut child = self.child.take().expect("the daemon runs");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// SIGSTOP: it answers nothing and renews nothing; its Terraform runs on.
    fn freeze(&self) {
        signal(self.child.as_ref().expect("the daemon runs").id(), "STOP");
    }

    /// SIGCONT: it goes on where it stopped.
    fn thaw(&self) {
        signal(self.child.as_ref().expect("the daemon runs").id(), "CONT");
    }

    /// Its id, as `provisioner list` names it (`provisioner:KEY_ID/KEY/ID`).
    fn id(&self) -> Option<String> {
        fs::read_to_string(self.data_dir.join("provisioner-id"))
            .ok()
            .map(|id| id.trim().to_string())
            .filter(|id| !id.is_empty())
    }

    /// How messages name it: its key's name and its id.
    fn name(&self) -> String {
        format!("{KEY}/{}", self.id().unwrap())
    }

    /// Whether a lease holder (`provisioner:KEY_ID/KEY/ID`) is this daemon.
    fn holds(&self, holder: &str) -> bool {
        holder.starts_with("provisioner:") && holder.ends_with(&format!("/{}", self.name()))
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if thread::panicking() {
            eprintln!("--- daemon {} log ---\n{}", self.name, self.log());
        }
    }
}

/// What a thread asks of a server.
#[derive(Clone)]
enum Ask {
    Create { seconds: u32 },
    Start { seconds: u32 },
    Stop,
}

fn ask(client: &Client, workspace: &str, what: &Ask) -> Build {
    let seconds = |s: u32| BTreeMap::from([("seconds".to_string(), s.to_string())]);
    let asked = match what {
        Ask::Create { seconds: s } => client
            .create_workspace(workspace, TEMPLATE, None, &seconds(*s), &[])
            .map(|created| created.build),
        Ask::Start { seconds: s } => {
            client.transition_workspace(workspace, Transition::Start, &seconds(*s))
        }
        Ask::Stop => client.transition_workspace(workspace, Transition::Stop, &BTreeMap::new()),
    };
    asked.unwrap_or_else(|err| panic!("{workspace} through {}: {err}", client.base_url()))
}

/// Asks for every build of `asks` through its server, each server's share
/// from its own thread, all at once.
fn ask_at_once(asks: Vec<(Client, String, Ask)>) -> Vec<Build> {
    let mut by_server: HashMap<String, Vec<(Client, String, Ask)>> = HashMap::new();
    for entry in asks {
        by_server
            .entry(entry.0.base_url().to_string())
            .or_default()
            .push(entry);
    }
    let threads: Vec<_> = by_server
        .into_values()
        .map(|share| {
            thread::spawn(move || {
                share
                    .iter()
                    .map(|(client, workspace, what)| ask(client, workspace, what))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|thread| thread.join().unwrap())
        .collect()
}

fn name(index: usize) -> String {
    format!("w{index:02}")
}

/// Waits until the build's log shows its apply's local-exec running.
fn wait_for_apply(budget: &Budget, client: &Client, workspace: &str, number: u64) {
    budget.wait_for(&format!("the apply of {workspace} #{number}"), || {
        let page = client.build_logs(workspace, number, 0, 0).ok()?;
        page.lines
            .iter()
            .any(|line| line.text.contains("Provisioning with 'local-exec'"))
            .then_some(())
    });
}

fn wait_for_status(budget: &Budget, client: &Client, workspace: &str, number: u64, status: &str) {
    budget.wait_for(&format!("{workspace} #{number} {status}"), || {
        let build = client.build(workspace, Some(number)).ok()?;
        (build.status == status).then_some(())
    });
}

fn wait_final(budget: &Budget, client: &Client, workspace: &str, number: u64) -> Build {
    budget.wait_for(&format!("the end of {workspace} #{number}"), || {
        client
            .build(workspace, Some(number))
            .ok()
            .filter(Build::is_final)
    })
}

/// One line of a workspace's `applies` file.
#[derive(Debug)]
struct Applied {
    build: String,
    transition: String,
    planned_at: String,
}

fn applies(file: &Path) -> Vec<Applied> {
    let text = fs::read_to_string(file)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", file.display()));
    text.lines()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            assert_eq!(fields.len(), 3, "{}: {line:?}", file.display());
            Applied {
                build: fields[0].into(),
                transition: fields[1].into(),
                planned_at: fields[2].into(),
            }
        })
        .collect()
}

/// The attributes of every instance of `type_.name` in a Terraform state.
fn instances(state: &serde_json::Value, type_: &str, name: &str) -> Vec<serde_json::Value> {
    state["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["mode"] == "managed" && r["type"] == type_ && r["name"] == name)
        .flat_map(|r| r["instances"].as_array().cloned().unwrap_or_default())
        .map(|instance| instance["attributes"].clone())
        .collect()
}

/// The plan time the state's `terraform_data.apply` keeps (its `input`,
/// dynamic: kept as its value and type).
fn planned_at(state: &serde_json::Value) -> Option<String> {
    let data = instances(state, "terraform_data", "apply");
    let input = &data.first()?["input"];
    input["value"]
        .as_str()
        .or(input.as_str())
        .map(str::to_string)
}

#[test]
fn daemons_and_servers_die_and_no_build_is_lost_or_applied_twice() {
    require_terraform();
    let budget = Budget(Instant::now());
    let database = FreshDatabase::create();
    let mut front = server(&database);
    let back = server(&database);
    front.login_owner();
    back.login_existing_owner();
    let template = fixture("append-apply");
    front
        .run(&[
            "templates",
            "push",
            TEMPLATE,
            "-d",
            template.to_str().unwrap(),
        ])
        .ok();
    let key = front
        .run(&["provisioner", "keys", "create", KEY])
        .ok()
        .stdout
        .trim()
        .to_string();
    let key_file = back.root().join("chaos.key");
    fs::write(&key_file, format!("{key}\n")).unwrap();
    let volumes = back.root().join("volumes");

    let to_front = front.client_for(&front.config_dir());
    let to_back = back.client_for(&back.config_dir());
    let listed = |client: &Client| client.provisioners().unwrap_or_default();
    let connected_slots = |client: &Client| {
        listed(client)
            .iter()
            .filter(|p| p.kind == "external" && p.status == "connected")
            .count()
    };

    // The daemon to be killed starts alone and takes KILLED's long build;
    // then the two others: one polls the back, which lives, one the front,
    // which will die.
    let mut daemons = vec![Daemon::start(&back, "d1", &back.url, &key_file, &volumes)];
    budget.wait_for("d1 listed", || {
        (connected_slots(&to_back) == 2).then_some(())
    });
    let mut first: BTreeMap<String, Build> = BTreeMap::new();
    first.insert(
        KILLED.into(),
        ask(&to_front, KILLED, &Ask::Create { seconds: 10 }),
    );
    wait_for_status(&budget, &to_back, KILLED, 1, "running");
    daemons.push(Daemon::start(&back, "d2", &back.url, &key_file, &volumes));
    daemons.push(Daemon::start(&back, "d3", &front.url, &key_file, &volumes));
    budget.wait_for("three daemons listed, two slots each", || {
        (connected_slots(&to_back) == 6).then_some(())
    });

    // First wave: the rest of the 30 creates, through both servers at once
    // (CANCELED's and FOLLOWED's come once d1 is dead, so that nothing but
    // the faults decides how they end).
    let rest: Vec<(Client, String, Ask)> = (3..WORKSPACES)
        .map(|index| {
            let client = if index.is_multiple_of(2) {
                &to_front
            } else {
                &to_back
            };
            (client.clone(), name(index), Ask::Create { seconds: 1 })
        })
        .collect();
    for build in ask_at_once(rest) {
        first.insert(build.workspace.clone(), build);
    }

    // d1 dies (SIGKILL) in the middle of KILLED's apply; its Terraform runs
    // on. (Its other slot's build, if any, dies with it.)
    wait_for_apply(&budget, &to_back, KILLED, 1);
    let victim = 0;
    let running = listed(&to_back).into_iter().any(|p| {
        daemons[victim].holds(&p.server)
            && p.current_job
                .as_ref()
                .is_some_and(|job| job.workspace == format!("alice/{KILLED}"))
    });
    assert!(running, "{KILLED} is not d1's");
    daemons[victim].kill();
    let victim_name = daemons[victim].name();
    let victim_build = first[KILLED].id.clone();
    assert_eq!(
        to_back.build(KILLED, Some(1)).unwrap().status,
        "running",
        "{KILLED} ended before d1 was killed"
    );
    // The runs it left (by build id), which it offers when it starts again.
    let left: Vec<String> = fs::read_dir(daemons[victim].data_dir.join("work"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(left.contains(&victim_build), "{left:?}");

    // The front dies too (SIGKILL) while d3 works for it, and comes back;
    // d3 rejoins it by itself.
    front.kill_server();
    thread::sleep(Duration::from_millis(500));
    front.start_server_again();
    let front_back_at = daemons[2].log().len();

    first.insert(
        FOLLOWED.into(),
        ask(&to_front, FOLLOWED, &Ask::Create { seconds: 3 }),
    );
    // Asked of the restarted front, followed through the back from before
    // its apply to its end.
    let mut follower = back
        .cmd(&["builds", "logs", FOLLOWED, "1", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let follower_out = follower.stdout.take().unwrap();
    let followed: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let reader = {
        let followed = followed.clone();
        let client = to_back.clone();
        thread::spawn(move || {
            for line in BufReader::new(follower_out).lines() {
                let line = line.unwrap();
                // What the build was when this line arrived.
                let status = client
                    .build(FOLLOWED, Some(1))
                    .map_or_else(|err| err.to_string(), |build| build.status);
                followed.lock().unwrap().push((line, status));
            }
        })
    };

    // A cancel through the back reaches the daemon running the front's build.
    first.insert(
        CANCELED.into(),
        ask(&to_front, CANCELED, &Ask::Create { seconds: 60 }),
    );
    assert_eq!(first.len(), WORKSPACES);
    wait_for_apply(&budget, &to_back, CANCELED, 1);
    to_back.cancel_build(CANCELED, 1).unwrap();

    // Past the lease, by both servers' clocks: the killed daemon's build is
    // failed, naming it; its rows are stale.
    for platform in [&front, &back] {
        platform.advance_clock(Duration::from_secs(60));
    }
    let failed = wait_final(&budget, &to_back, KILLED, 1);
    assert_eq!(failed.status, "failed", "{failed:#?}");
    let salvaged = |build: &Build| {
        build.status == "failed"
            && build.error.as_deref().is_some_and(|error| {
                error.contains(&format!("the external provisioner {victim_name} "))
                    && error.contains("stopped renewing its lease")
            })
    };
    assert!(salvaged(&failed), "{failed:#?}");
    budget.wait_for("the killed daemon listed stale", || {
        let rows: Vec<_> = listed(&to_back)
            .into_iter()
            .filter(|p| daemons[victim].holds(&p.server))
            .collect();
        (!rows.is_empty() && rows.iter().all(|p| p.status == "stale")).then_some(())
    });

    // Restarted on its data dir, it rejoins and offers the states its killed
    // runs left, once their Terraform has ended.
    let restarted_at = daemons[victim].log().len();
    daemons[victim].spawn(&back, &key_file, &volumes);
    budget.wait_for("the killed daemon connected again", || {
        let rows: Vec<_> = listed(&to_front)
            .into_iter()
            .filter(|p| daemons[victim].holds(&p.server))
            .collect();
        (rows.len() == 2 && rows.iter().all(|p| p.status == "connected")).then_some(())
    });
    let offers = budget.wait_for("the killed runs' states offered", || {
        let log = daemons[victim].log();
        let offers: Vec<String> = log[restarted_at..]
            .lines()
            .filter(|line| line.contains("offered the state a stopped run left"))
            .map(str::to_string)
            .collect();
        left.iter()
            .all(|build| offers.iter().any(|line| line.contains(build.as_str())))
            .then_some(offers)
    });
    let offered = offers
        .iter()
        .find(|line| line.contains(&victim_build))
        .unwrap();
    // Its Terraform wrote the state to the server's state backend itself
    // (`Missing`: nothing was left for the daemon to hand over), or left it
    // in `errored.tfstate` when the server was away, which the daemon stored.
    assert!(
        offered.contains("kept=Missing") || offered.contains("kept=Saved"),
        "{offered}"
    );
    // What was stored is what the killed run's Terraform finished with.
    let killed_id = to_back.workspace(KILLED).unwrap().id;
    let orphan = applies(&volumes.join(format!("home-{killed_id}/applies")))
        .into_iter()
        .find(|line| line.build == victim_build)
        .expect("the killed run's apply went on without its daemon");
    let state: serde_json::Value =
        serde_json::from_slice(&to_front.workspace_state(KILLED).unwrap()).unwrap();
    assert_eq!(
        planned_at(&state),
        Some(orphan.planned_at.clone()),
        "the state the killed run left was not stored"
    );

    // Every build of the first wave ends; the followed one's log arrived
    // through the back while it ran.
    for (workspace, build) in &first {
        wait_final(&budget, &to_front, workspace, build.number);
    }
    let follow_status = follower.wait().unwrap();
    reader.join().unwrap();
    assert!(
        follow_status.success(),
        "following ended with {follow_status}"
    );
    let followed = followed.lock().unwrap().clone();
    let text: Vec<&str> = followed.iter().map(|(line, _)| line.as_str()).collect();
    assert!(
        text.iter()
            .any(|line| line.contains("Provisioning with 'local-exec'"))
            && text.iter().any(|line| line.contains("Apply complete")),
        "{text:#?}"
    );
    assert!(
        followed
            .iter()
            .any(|(_, status)| status == "pending" || status == "running"),
        "no line arrived while the build ran: {followed:#?}"
    );

    // Second wave: each workspace stopped if its start succeeded, else
    // started again (quickly), each through the server its first build was
    // not asked of (CANCELED's aside), both at once.
    let second_asks: Vec<(Client, String, Ask)> = first
        .iter()
        .map(|(workspace, build)| {
            let latest = to_front.build(workspace, Some(build.number)).unwrap();
            let what = if latest.status == "succeeded" {
                Ask::Stop
            } else {
                Ask::Start { seconds: 1 }
            };
            let index: usize = workspace[1..].parse().unwrap();
            let client = if index.is_multiple_of(2) {
                &to_back
            } else {
                &to_front
            };
            (client.clone(), workspace.clone(), what)
        })
        .collect();
    let second = ask_at_once(second_asks);
    assert_eq!(second.len(), WORKSPACES);

    // d2 is frozen while it runs a build of the second wave, and the front
    // (which d3 polls) with it, for longer than a lease: the back takes
    // d2's build from it (queued again if its plan was not judged, failed
    // otherwise, the workspace then locked by d2 until it wakes and reports
    // that its Terraform ended).
    let frozen_name = daemons[1].name();
    let frozen_job = budget.wait_for("d2 running a build of the second wave", || {
        listed(&to_back)
            .into_iter()
            .find(|p| daemons[1].holds(&p.server))
            .and_then(|p| p.current_job)
            .filter(|job| job.kind == "build")
    });
    daemons[1].freeze();
    front.freeze_server();
    let frozen_number = frozen_job.build_number.unwrap();
    budget.wait_for("the frozen daemon's build taken from it", || {
        let log = to_back
            .build_logs(&frozen_job.workspace, frozen_number, 0, 0)
            .ok()?;
        log.lines
            .iter()
            .any(|line| line.text.contains("stopped renewing its lease"))
            .then_some(())
    });
    daemons[1].thaw();
    front.thaw_server();
    for build in &second {
        wait_final(&budget, &to_back, &build.workspace, build.number);
    }
    // Every frozen holder woke and reported its Terraform ended: no
    // workspace is left locked, and every state is the one it finished with.
    for build in &second {
        budget.wait_for("no workspace locked by a lost holder", || {
            let shown = to_back.workspace(&build.workspace).ok()?;
            shown.locked_by_lost_holder.is_none().then_some(())
        });
    }
    let frozen_salvaged = |build: &Build| {
        build.status == "failed"
            && build.error.as_deref().is_some_and(|error| {
                error.contains("stopped renewing its lease")
                    && (error.contains(&frozen_name) || error.contains(&format!("{KEY}/")))
            })
    };

    // The restarted daemon took part in the second wave, and so did d3
    // after the front it polls came back.
    assert!(
        daemons[victim].log()[restarted_at..].contains("running a job"),
        "the restarted daemon ran nothing"
    );
    assert!(
        daemons[2].log()[front_back_at..].contains("running a job"),
        "d3 ran nothing once the front came back"
    );

    // The ledger: every build ended; only the killed and the canceled did
    // not succeed, each with its reason.
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut unsuccessful = Vec::new();
    let mut requeued = Vec::new();
    let mut applied_lines = 0;
    for index in 0..WORKSPACES {
        let workspace = name(index);
        let builds = to_back.builds(&workspace, None, None).unwrap();
        assert_eq!(builds.len(), 2, "{workspace}: {builds:#?}");
        for build in &builds {
            *outcomes.entry(build.status.clone()).or_default() += 1;
            // The killed daemon's other slot may have held a build too:
            // failed if its plan was judged, else run again elsewhere.
            let ended_as_expected = match (workspace.as_str(), build.number) {
                (KILLED, 1) => salvaged(build),
                (CANCELED, 1) => build.status == "canceled",
                (_, 1) => build.status == "succeeded" || salvaged(build),
                // A second-wave build of a frozen daemon (d2, or d3 cut off
                // with the frozen front) whose plan was judged is failed.
                _ => build.status == "succeeded" || frozen_salvaged(build),
            };
            assert!(ended_as_expected, "{workspace}: {build:#?}");
        }

        // No apply twice; every succeeded build applied; nothing else did.
        let shown = to_back.workspace(&workspace).unwrap();
        let home = volumes.join(format!("home-{}", shown.id));
        let lines = applies(&home.join("applies"));
        applied_lines += lines.len();
        let mut seen = BTreeSet::new();
        for line in &lines {
            assert!(
                seen.insert(line.build.clone()),
                "{workspace}: build {} applied twice: {lines:#?}",
                line.build
            );
            let build = builds
                .iter()
                .find(|build| build.id == line.build)
                .unwrap_or_else(|| panic!("{workspace}: an apply of no build: {line:?}"));
            assert_eq!(
                build.transition.as_str(),
                line.transition,
                "{workspace}: {line:?}"
            );
        }
        // A build of the killed daemon whose plan was not judged yet ran
        // again elsewhere: nothing of it had been applied.
        for build in &builds {
            let log = to_back.build_logs(&workspace, build.number, 0, 0).unwrap();
            let note = format!(
                "the external provisioner {victim_name} stopped renewing its lease before this \
                 build's plan was judged"
            );
            if log.lines.iter().any(|line| line.text.contains(&note)) {
                requeued.push(format!("{workspace} #{} {}", build.number, build.status));
            }
        }
        for build in builds.iter().filter(|build| build.status != "succeeded") {
            let error = build.error.as_deref().unwrap_or("").lines().next();
            unsuccessful.push(format!(
                "{workspace} #{} {} (applied: {}): {}",
                build.number,
                build.status,
                seen.contains(&build.id),
                error.unwrap_or("")
            ));
        }
        for build in builds.iter().filter(|build| build.status == "succeeded") {
            assert!(
                seen.contains(&build.id),
                "{workspace}: #{} succeeded without applying: {lines:#?}",
                build.number
            );
        }

        // The stored state is the last apply, and holds exactly the volumes
        // on disk: the home one always, the scratch one while started.
        let state: serde_json::Value =
            serde_json::from_slice(&to_front.workspace_state(&workspace).unwrap()).unwrap();
        let data = instances(&state, "terraform_data", "apply");
        assert_eq!(data.len(), 1, "{workspace}: {state:#}");
        let last = lines.last().unwrap();
        assert_eq!(
            planned_at(&state),
            Some(last.planned_at.clone()),
            "{workspace}: the stored state is not its last apply ({last:?}): {state:#}"
        );
        let in_state: BTreeSet<PathBuf> = ["home", "scratch"]
            .iter()
            .flat_map(|volume| instances(&state, "abode_volume", volume))
            .map(|attributes| PathBuf::from(attributes["path"].as_str().unwrap()))
            .collect();
        let on_disk: BTreeSet<PathBuf> = fs::read_dir(&volumes)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.to_str().unwrap().ends_with(&shown.id))
            .collect();
        assert_eq!(in_state, on_disk, "{workspace}: {state:#}");
        let started = builds[0].transition == Transition::Start;
        assert_eq!(on_disk.len(), if started { 2 } else { 1 }, "{workspace}");
    }
    eprintln!(
        "chaos: {} builds over {WORKSPACES} workspaces: {outcomes:?}; {applied_lines} applies; \
         killed {} ({victim_build}) mid-apply and the front server; froze d2 (running {} #{}) \
         and the front; {:.0?}",
        2 * WORKSPACES,
        daemons[victim].name,
        frozen_job.workspace,
        frozen_number,
        budget.0.elapsed()
    );
    for line in &unsuccessful {
        eprintln!("  {line}");
    }
    eprintln!("  queued again (the killed daemon had not had their plan judged): {requeued:?}");
    // What the daemons noticed of the faults.
    for daemon in &daemons {
        for line in daemon.log().lines().filter(|line| !line.contains(" INFO ")) {
            eprintln!("  {}: {line}", daemon.name);
        }
    }
    for daemon in &mut daemons {
        if let Some(child) = daemon.child.take() {
            finish(child);
        }
    }
}
