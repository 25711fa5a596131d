//! A network of its own for each workspace (`--workspace-network isolated`).
//!
//! On the host's network every workspace reaches every other's loopback
//! ports (a dev server, a notebook, a database without a password) and the
//! host's own loopback services. So each workspace's processes run in a
//! network namespace of the workspace's: its loopback is its own, and what
//! leaves it goes through `slirp4netns` (user-mode networking: no bridge, no
//! NAT rule, nothing left on the host when it ends; as root it drops every
//! capability but binding low ports after set-up, and chroots itself), with
//! the host's loopback refused (`--disable-host-loopback`).
//!
//! A namespace is held by a holder process (`sleep infinity`, made in a new
//! network namespace), recorded by identity beside the supervised processes'
//! records, so it outlives a restart of the server like the workspace does.
//! slirp4netns ends with the holder: its exit descriptor is a pipe only the
//! holder writes to. The last stopped process of a workspace ends its holder.
//!
//! The one way in the other direction: the server's access URL, when it is a
//! loopback address (the agent dials it). Its port on the workspace's
//! loopback is a listener of this process's, made inside the namespace and
//! served from the host's, that connects to that address and nothing else.
//! When this process is the server at that address ([`LocalServer`]), a
//! connection is handed to it as it is: no second connection, no copy of
//! the bytes (the relay cost the app download a sixth of its speed).

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abode_procfs::Identity;
use nix::sched::{setns, CloneFlags};

/// How long slirp4netns gets to say the namespace's network is up.
const READY: Duration = Duration::from_secs(10);

/// Where a workspace's processes are on the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkspaceNetwork {
    /// A network namespace per workspace (the default).
    #[default]
    Isolated,
    /// The host's network, shared by every workspace (as before).
    Host,
}

impl FromStr for WorkspaceNetwork {
    type Err = NetworkError;

    fn from_str(text: &str) -> Result<WorkspaceNetwork, NetworkError> {
        match text {
            "isolated" => Ok(WorkspaceNetwork::Isolated),
            "host" => Ok(WorkspaceNetwork::Host),
            other => Err(NetworkError::Mode(other.chars().take(40).collect())),
        }
    }
}

/// Why workspaces cannot get networks of their own here.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error("--workspace-network {0:?}: expected isolated or host")]
    Mode(String),
    #[error("slirp4netns is not installed: install Debian's slirp4netns (each workspace's network goes through it), or pass --workspace-network host")]
    NoSlirp4netns,
    #[error("--workspace-network isolated needs a server (or provisioner) running as root, to make network namespaces: run it as root, or pass --workspace-network host (every workspace then shares this machine's network)")]
    NotRoot,
    #[error("--workspace-network isolated needs the workspace sandbox (--terraform-sandbox on), or pass --workspace-network host")]
    NoSandbox,
    #[error(
        "cannot make a workspace network on this machine ({0}): pass --workspace-network host"
    )]
    Unusable(String),
}

/// The networks of this machine's workspaces.
#[derive(Debug)]
pub struct Networks {
    slirp4netns: PathBuf,
    unshare: PathBuf,
    nsenter: PathBuf,
    holder: PathBuf,
    /// One record per workspace with a network: its holder's identity and
    /// the address forwarded to.
    records_dir: PathBuf,
    /// The forwarders this process serves, by workspace.
    forwarders: Mutex<HashMap<String, Forwarder>>,
    /// One namespace made at a time.
    making: Mutex<()>,
    /// The addresses this process serves itself.
    local: LocalServer,
}

/// What a [`LocalServer`] does with a connection made inside a workspace's
/// network to one of its addresses: serve it, or give it back (the server
/// is going away) to be relayed.
pub type HandOff = Arc<dyn Fn(TcpStream) -> Result<(), TcpStream> + Send + Sync>;

/// The addresses this process's own server listens on, with what takes a
/// connection to each. A forward to one of them hands its connections over
/// instead of relaying them to the same process through the host's
/// loopback.
#[derive(Clone, Default)]
pub struct LocalServer {
    served: Arc<Mutex<Vec<(SocketAddr, HandOff)>>>,
}

impl std::fmt::Debug for LocalServer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let served = self
            .served
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let addresses: Vec<SocketAddr> = served.iter().map(|(address, _)| *address).collect();
        formatter
            .debug_struct("LocalServer")
            .field("served", &addresses)
            .finish()
    }
}

impl LocalServer {
    /// From now on, connections to `address` (a listener's own address:
    /// an unspecified IP serves every loopback) go to `hand_off`.
    pub fn serve(&self, address: SocketAddr, hand_off: HandOff) {
        self.served
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((address, hand_off));
    }

    /// Hands `stream`, made inside a workspace's network to `target`, to
    /// this process's server when it serves `target`; gives it back when not.
    pub fn hand_off(&self, target: SocketAddr, stream: TcpStream) -> Result<(), TcpStream> {
        let hand_off = self
            .served
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .find(|(address, _)| serves(*address, target))
            .map(|(_, hand_off)| hand_off.clone());
        match hand_off {
            Some(hand_off) => hand_off(stream),
            None => Err(stream),
        }
    }
}

/// Whether a listener bound to `listener` takes connections to `target`.
fn serves(listener: SocketAddr, target: SocketAddr) -> bool {
    listener.port() == target.port()
        && (listener.ip() == target.ip()
            || (listener.ip().is_unspecified() && listener.is_ipv4() == target.is_ipv4()))
}

/// A workspace's namespace, held by a process that was running when this
/// was made.
pub struct Namespace {
    holder: Identity,
    nsenter: PathBuf,
}

impl Namespace {
    /// `program args`, run inside the namespace (through `nsenter`, as
    /// this process's user): the program and the arguments to run instead.
    pub fn enter(&self, program: PathBuf, args: Vec<OsString>) -> (PathBuf, Vec<OsString>) {
        let mut entered = vec![
            OsString::from(format!("--net=/proc/{}/ns/net", self.holder.pid)),
            OsString::from("--"),
            program.into_os_string(),
        ];
        entered.extend(args);
        (self.nsenter.clone(), entered)
    }

    fn open(&self) -> Result<fs::File, String> {
        let file = fs::File::open(format!("/proc/{}/ns/net", self.holder.pid))
            .map_err(|error| format!("cannot open the workspace's network: {error}"))?;
        // The holder's start time, read again: the pid was not reused between.
        if !self.holder.is_running() {
            return Err("the workspace's network ended while it was opened".into());
        }
        Ok(file)
    }
}

impl Networks {
    /// Finds slirp4netns, checks this process is root, and makes one
    /// namespace with its network to see that this machine allows it.
    pub fn new(records_dir: PathBuf, local: LocalServer) -> Result<Networks, NetworkError> {
        let slirp4netns = crate::find_program("slirp4netns").ok_or(NetworkError::NoSlirp4netns)?;
        if !nix::unistd::geteuid().is_root() {
            return Err(NetworkError::NotRoot);
        }
        let program = |name: &str| {
            crate::find_program(name).ok_or_else(|| {
                NetworkError::Unusable(format!("no `{name}` (util-linux, coreutils) on PATH"))
            })
        };
        let (holder, unshare, nsenter) =
            (program("sleep")?, program("unshare")?, program("nsenter")?);
        fs::create_dir_all(&records_dir)
            .map_err(|error| NetworkError::Unusable(error.to_string()))?;
        let networks = Networks {
            slirp4netns,
            unshare,
            nsenter,
            holder,
            records_dir,
            forwarders: Mutex::new(HashMap::new()),
            making: Mutex::new(()),
            local,
        };
        let probe = networks.make_holder().map_err(NetworkError::Unusable)?;
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(probe.pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        Ok(networks)
    }

    /// Serves again the forwarders of the namespaces that outlived this
    /// process (a restart of the server).
    pub fn resume(&self) {
        let Ok(entries) = fs::read_dir(&self.records_dir) else {
            return;
        };
        for entry in entries.flatten() {
            let workspace = entry.file_name().to_string_lossy().to_string();
            let Some((holder, forward)) = self.record(&workspace) else {
                continue;
            };
            if !holder.is_running() {
                let _ = fs::remove_file(entry.path());
                continue;
            }
            if let (Some(forward), Ok(namespace)) = (forward, self.namespace(&holder)) {
                self.serve_forward(&workspace, &namespace, forward);
            }
        }
    }

    /// The namespace of `workspace_id`, made (with its network and the
    /// forward of `forward`, the access URL's loopback address) when it has
    /// none.
    pub fn join(
        &self,
        workspace_id: &str,
        forward: Option<SocketAddr>,
    ) -> Result<Namespace, String> {
        if !is_record_name(workspace_id) {
            return Err("a workspace network needs a workspace id".into());
        }
        let _one = self
            .making
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((holder, recorded_forward)) = self.record(workspace_id) {
            if holder.is_running() {
                let namespace = self.namespace(&holder)?;
                let served = self
                    .forwarders
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .contains_key(workspace_id);
                if let (false, Some(address)) = (served, recorded_forward.or(forward)) {
                    self.serve_forward(workspace_id, &namespace, address);
                }
                return Ok(namespace);
            }
        }
        self.stop_forward(workspace_id);
        let holder = self.make_holder()?;
        let namespace = self.namespace(&holder)?;
        let record = match forward {
            Some(address) => format!("{}\n{address}\n", holder.to_text()),
            None => format!("{}\n", holder.to_text()),
        };
        fs::write(self.records_dir.join(workspace_id), record)
            .map_err(|error| format!("cannot record the workspace's network: {error}"))?;
        if let Some(address) = forward {
            self.serve_forward(workspace_id, &namespace, address);
        }
        Ok(namespace)
    }

    /// Ends the network of `workspace_id` (its last process stopped).
    pub fn leave(&self, workspace_id: &str) {
        if !is_record_name(workspace_id) {
            return;
        }
        let _one = self
            .making
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.stop_forward(workspace_id);
        if let Some((holder, _)) = self.record(workspace_id) {
            if holder.is_running() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(holder.pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        let _ = fs::remove_file(self.records_dir.join(workspace_id));
    }

    fn namespace(&self, holder: &Identity) -> Result<Namespace, String> {
        let namespace = Namespace {
            holder: *holder,
            nsenter: self.nsenter.clone(),
        };
        namespace.open()?;
        Ok(namespace)
    }

    fn record(&self, workspace_id: &str) -> Option<(Identity, Option<SocketAddr>)> {
        let text = fs::read_to_string(self.records_dir.join(workspace_id)).ok()?;
        let mut lines = text.lines();
        let holder = Identity::parse(lines.next()?.trim())?;
        let forward = lines.next().and_then(|line| line.trim().parse().ok());
        Some((holder, forward))
    }

    /// A holder in a new network namespace, its network up (slirp4netns
    /// attached, ending with it).
    fn make_holder(&self) -> Result<Identity, String> {
        let failed = |what: &str, error: &dyn std::fmt::Display| {
            format!("cannot make the workspace's network ({what}): {error}")
        };
        // slirp4netns ends when this pipe's write end, the holder's, closes.
        // Close-on-exec: each end reaches only the process it is given to
        // (as a standard stream); a copy anywhere else would keep it open.
        let pipe = || {
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
                .map_err(|error| failed("a pipe", &error))
        };
        let (exit_read, exit_write) = pipe()?;
        let (ready_read, ready_write) = pipe()?;
        let mut holder = Command::new(&self.unshare);
        holder
            .args(["--net", "--"])
            .arg(&self.holder)
            .arg("infinity")
            .env_clear()
            .current_dir(&self.records_dir)
            .stdin(Stdio::null())
            // Never written: it closes when the holder ends, and so ends slirp4netns.
            .stdout(Stdio::from(exit_write))
            .stderr(Stdio::null())
            .process_group(0);
        let mut holder = holder
            .spawn()
            .map_err(|error| failed("its holder", &error))?;
        let pid = i32::try_from(holder.id()).map_err(|error| failed("its holder", &error))?;
        // `unshare` execs the holder in place: same pid, once it is in its namespace.
        let identity = wait_for_namespace(pid);
        // Reaped here while this process runs; by init once it is gone.
        std::thread::spawn(move || {
            let _ = holder.wait();
        });
        let identity = identity.ok_or_else(|| failed("its holder", &"it ended at once"))?;
        let mut slirp = Command::new(&self.slirp4netns);
        slirp
            .args([
                "--configure",
                "--mtu=65520",
                "--disable-host-loopback",
                "--enable-sandbox",
                "--enable-seccomp",
                "--exit-fd=0",
                "--ready-fd=1",
            ])
            .arg(pid.to_string())
            .arg("tap0")
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .current_dir(&self.records_dir)
            .stdin(Stdio::from(exit_read))
            .stdout(Stdio::from(ready_write))
            .stderr(Stdio::null())
            .process_group(0);
        let kill_holder = || {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        };
        let mut slirp = match slirp.spawn() {
            Ok(child) => child,
            Err(error) => {
                kill_holder();
                return Err(failed("slirp4netns", &error));
            }
        };
        std::thread::spawn(move || {
            let _ = slirp.wait();
        });
        if let Err(error) = wait_ready(ready_read) {
            kill_holder();
            return Err(failed("slirp4netns", &error));
        }
        Ok(identity)
    }

    /// Listens on `address`'s port in `namespace`'s loopback and connects
    /// each connection to `address` on the host.
    fn serve_forward(&self, workspace_id: &str, namespace: &Namespace, address: SocketAddr) {
        match Forwarder::start(namespace, address, self.local.clone()) {
            Ok(forwarder) => {
                let replaced = self
                    .forwarders
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .insert(workspace_id.to_string(), forwarder);
                if let Some(old) = replaced {
                    old.stop();
                }
            }
            Err(error) => tracing::warn!(
                workspace = workspace_id,
                %error,
                "the workspace cannot reach the access URL from its network"
            ),
        }
    }

    fn stop_forward(&self, workspace_id: &str) {
        let removed = self
            .forwarders
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(workspace_id);
        if let Some(forwarder) = removed {
            forwarder.stop();
        }
    }
}

/// A record's name is a workspace id: nothing a path could be made of.
fn is_record_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The loopback address in `url` that a workspace's agent dials, when it is
/// one: the only address on the host a workspace's network forwards to.
pub fn loopback_of(url: &str) -> Option<SocketAddr> {
    let rest = url
        .strip_prefix("http://")
        .map(|rest| (rest, 80))
        .or_else(|| url.strip_prefix("https://").map(|rest| (rest, 443)));
    let (rest, default_port) = rest?;
    let authority = rest.split(['/', '?', '#']).next()?;
    if authority.contains('@') {
        return None;
    }
    let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
        let (host, after) = inner.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(port) => port.parse().ok()?,
            None if after.is_empty() => default_port,
            None => return None,
        };
        (host.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host.to_string(), port.parse().ok()?),
            None => (authority.to_string(), default_port),
        }
    };
    let ip = if host.eq_ignore_ascii_case("localhost") {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        host.parse::<IpAddr>().ok()?
    };
    ip.is_loopback().then_some(SocketAddr::new(ip, port))
}

/// Waits until `pid` (`unshare`, about to exec the holder) is in a network
/// namespace other than this process's: its identity then.
fn wait_for_namespace(pid: i32) -> Option<Identity> {
    let own = fs::read_link("/proc/self/ns/net").ok()?;
    let deadline = std::time::Instant::now() + READY;
    while std::time::Instant::now() < deadline {
        match fs::read_link(format!("/proc/{pid}/ns/net")) {
            Ok(theirs) if theirs != own => return Identity::of(pid),
            Ok(_) => std::thread::sleep(Duration::from_millis(2)),
            Err(_) => return None,
        }
    }
    None
}

fn wait_ready(ready: OwnedFd) -> Result<(), String> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(ready.as_fd(), PollFlags::POLLIN)];
    let timeout = PollTimeout::try_from(READY.as_millis() as i32).unwrap_or(PollTimeout::MAX);
    match poll(&mut fds, timeout) {
        Ok(0) => return Err("it did not say the network was up".into()),
        Ok(_) => {}
        Err(error) => return Err(error.to_string()),
    }
    let mut byte = [0u8; 1];
    match fs::File::from(ready).read(&mut byte) {
        Ok(1) => Ok(()),
        Ok(_) => Err("it ended before the network was up".into()),
        Err(error) => Err(error.to_string()),
    }
}

/// The access URL's port on a workspace's loopback, served from the host.
struct Forwarder {
    listeners: Vec<Arc<TcpListener>>,
    stopped: Arc<AtomicBool>,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Forwarder")
    }
}

impl Forwarder {
    fn start(
        namespace: &Namespace,
        target: SocketAddr,
        local: LocalServer,
    ) -> Result<Forwarder, String> {
        let listeners = listen_inside(namespace, target.port())?;
        let stopped = Arc::new(AtomicBool::new(false));
        for listener in &listeners {
            let (listener, stopped, local) = (listener.clone(), stopped.clone(), local.clone());
            std::thread::Builder::new()
                .name("workspace-forward".into())
                .spawn(move || {
                    for stream in listener.incoming() {
                        if stopped.load(Ordering::SeqCst) {
                            return;
                        }
                        let Ok(inside) = stream else { continue };
                        let Err(inside) = local.hand_off(target, inside) else {
                            continue;
                        };
                        let _ = std::thread::Builder::new()
                            .name("workspace-forward-conn".into())
                            .spawn(move || relay(inside, target));
                    }
                })
                .map_err(|error| error.to_string())?;
        }
        Ok(Forwarder { listeners, stopped })
    }

    fn stop(self) {
        self.stopped.store(true, Ordering::SeqCst);
        for listener in &self.listeners {
            // Wakes the blocked accept, which then sees `stopped`.
            let _ =
                nix::sys::socket::shutdown(listener.as_raw_fd(), nix::sys::socket::Shutdown::Both);
        }
    }
}

/// Listeners on `port` of the namespace's loopback (IPv4, and IPv6 when it
/// has it), made by a thread that enters the namespace and leaves it again.
fn listen_inside(namespace: &Namespace, port: u16) -> Result<Vec<Arc<TcpListener>>, String> {
    let inside = namespace.open()?;
    std::thread::spawn(move || -> Result<Vec<Arc<TcpListener>>, String> {
        setns(inside.as_fd(), CloneFlags::CLONE_NEWNET)
            .map_err(|error| format!("cannot enter the workspace's network: {error}"))?;
        let v4 = TcpListener::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
            .map_err(|error| format!("cannot listen on the workspace's port {port}: {error}"))?;
        let mut listeners = vec![Arc::new(v4)];
        if let Ok(v6) = TcpListener::bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port)) {
            listeners.push(Arc::new(v6));
        }
        // This thread ends here: it never goes back to the host's network.
        Ok(listeners)
    })
    .join()
    .map_err(|_| "the thread entering the workspace's network failed".to_string())?
}

/// Copies both ways between a connection from inside and `target`.
fn relay(inside: TcpStream, target: SocketAddr) {
    let Ok(outside) = TcpStream::connect_timeout(&target, Duration::from_secs(10)) else {
        return;
    };
    let _ = inside.set_nodelay(true);
    let _ = outside.set_nodelay(true);
    let (Ok(inside_read), Ok(outside_write)) = (inside.try_clone(), outside.try_clone()) else {
        return;
    };
    let upstream = std::thread::spawn(move || pump(inside_read, outside_write));
    pump(outside, inside);
    let _ = upstream.join();
}

/// Everything `from` says, to `to`, then `to`'s write side closed. A large
/// buffer: everything an agent says to the server (ssh, apps) passes here,
/// and `io::copy`'s 8 KiB made it a tenth slower.
fn pump(mut from: TcpStream, mut to: TcpStream) {
    use std::io::Write;
    let mut buffer = vec![0u8; 256 * 1024];
    loop {
        match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                if to.write_all(&buffer[..read]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_connection_goes_to_the_listener_that_serves_its_address() {
        let cases = [
            ("127.0.0.1:8080", "127.0.0.1:8080", true),
            ("0.0.0.0:8080", "127.0.0.1:8080", true),
            ("[::]:8080", "[::1]:8080", true),
            ("[::]:8080", "127.0.0.1:8080", false),
            ("127.0.0.1:8080", "127.0.0.1:8081", false),
            ("127.0.0.2:8080", "127.0.0.1:8080", false),
            ("127.0.0.1:8080", "[::1]:8080", false),
        ];
        for (listener, target, expected) in cases {
            let (listener, target) = (listener.parse().unwrap(), target.parse().unwrap());
            assert_eq!(
                serves(listener, target),
                expected,
                "{listener} for {target}"
            );
        }
    }

    #[test]
    fn a_connection_nobody_here_serves_is_given_back() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = listener.local_addr().unwrap();
        let local = LocalServer::default();
        let stream = TcpStream::connect(target).unwrap();
        let stream = local.hand_off(target, stream).unwrap_err();
        let (sender, receiver) = std::sync::mpsc::channel();
        local.serve(
            target,
            Arc::new(move |stream| sender.send(stream).map_err(|error| error.0)),
        );
        local.hand_off(target, stream).unwrap();
        assert!(receiver.recv().is_ok());
    }

    #[test]
    fn only_a_loopback_access_url_is_forwarded() {
        let cases: &[(&str, Option<&str>)] = &[
            ("http://127.0.0.1:7080", Some("127.0.0.1:7080")),
            ("https://localhost:7443/", Some("127.0.0.1:7443")),
            ("http://localhost", Some("127.0.0.1:80")),
            ("https://[::1]:9000/x", Some("[::1]:9000")),
            ("http://127.0.0.2:80", Some("127.0.0.2:80")),
            ("https://abode.example.com", None),
            ("http://10.0.0.5:7080", None),
            ("http://127.0.0.1:7080@evil.example.com/", None),
            ("http://127.0.0.1:notaport", None),
            ("ftp://127.0.0.1:21", None),
            ("http://[::1]x", None),
        ];
        for (url, expected) in cases {
            let expected = expected.map(|text| text.parse::<SocketAddr>().unwrap());
            assert_eq!(loopback_of(url), expected, "{url}");
        }
    }

    #[test]
    fn a_mode_is_isolated_or_host() {
        assert_eq!(
            "isolated".parse::<WorkspaceNetwork>().unwrap(),
            WorkspaceNetwork::Isolated
        );
        assert_eq!(
            "host".parse::<WorkspaceNetwork>().unwrap(),
            WorkspaceNetwork::Host
        );
        let error = "bridge".parse::<WorkspaceNetwork>().unwrap_err();
        assert!(
            error.to_string().contains("expected isolated or host"),
            "{error}"
        );
    }
}
