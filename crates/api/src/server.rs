//! A whole Abode server in one value: the database under the data dir, the
//! control plane, the embedded provisioners and the HTTP listener. Its
//! start-up is here, in one place: the `abode server` command turns its
//! flags into [`ServerOptions`] and a [`Setup`], [`prepare`] settles what
//! the options leave to the machine (single sign-on checked before anything
//! else, the private data dir with the provider in its mirror, the external
//! auth providers, the sandbox), and [`serve`] starts the server, runs it
//! until SIGINT or SIGTERM and shuts it down. The API tests start it the
//! same way, with [`Server::start`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use abode_control::{AgentTimeouts, Clock, Config, Control};
use abode_host::{Host, HostParts};
use abode_store::Store;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::AppState;

/// A year: how long browsers keep to TLS after an answer over it, unless
/// `--hsts-max-age` says otherwise.
pub const DEFAULT_HSTS_MAX_AGE: u64 = 365 * 24 * 60 * 60;

/// The database file's name inside the data dir.
pub const DATABASE_FILE: &str = "abode.db";

#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub address: SocketAddr,
    pub data_dir: PathBuf,
    pub provisioners: usize,
    /// The URL agents call back; default `http://<bound address>`.
    pub access_url: Option<String>,
    /// The URL other servers reach this one at (relayed connections to the
    /// agents' tunnels it holds) [default: http://ADDRESS unless ADDRESS is
    /// unspecified, e.g. 0.0.0.0, then none].
    pub relay_url: Option<String>,
    pub provider_mirror: Option<PathBuf>,
    /// What Terraform runs get of the server's environment (resolved from
    /// the operator's `--terraform-env` patterns); `None`: only the base.
    pub terraform_env: Option<Vec<(String, String)>>,
    /// The sandbox of every Terraform run; `None`: none (`--terraform-sandbox off`).
    pub terraform_isolation: Option<std::sync::Arc<abode_terraform::isolation::Isolation>>,
    /// The process supervisor's socket, given to sandboxed builds.
    pub process_supervisor: Option<PathBuf>,
    /// The uids workspaces are given (`--workspace-uids`, checked by
    /// [`prepare`]); `None`: the sandbox's user for all.
    pub workspace_uids: Option<abode_terraform::machine::UidRange>,
    /// How many newest builds of each workspace keep their plan JSON.
    pub plan_retention: usize,
    pub agent_binary: Option<PathBuf>,
    pub agent_connect_timeout: Duration,
    pub agent_heartbeat_timeout: Duration,
    pub agent_heartbeat_interval: Duration,
    /// How often agents scan their home for unsaved work.
    pub unsaved_scan_interval: Duration,
    pub cancel_grace: Duration,
    pub confirmation_timeout: Duration,
    /// `postgres://...` to keep the data in PostgreSQL; default: SQLite in
    /// the data dir.
    pub database_url: Option<String>,
    pub session_idle_timeout: Duration,
    pub session_max_lifetime: Duration,
    pub api_token_max_lifetime: Duration,
    /// Failed logins per username or client address per minute; 0: no limit.
    pub login_failures_per_minute: u32,
    /// Password logins are on (`--disable-password-auth` turns them off).
    pub password_login: bool,
    /// Single sign-on through an OpenID provider, as the flags give it
    /// (checked at start against the access URL).
    pub oidc: abode_oidc::OidcSettings,
    /// The one clock of the server: the control plane's deadlines and the
    /// store's timestamps. The system's, except in tests.
    pub clock: Clock,
    /// Serve Prometheus metrics on this address (`GET /metrics`); `None`:
    /// no listener, and the database gauges are not refreshed.
    pub prometheus_address: Option<SocketAddr>,
    /// How often the metrics that need the database are read.
    pub metrics_refresh_interval: Duration,
    /// Channels, retries and leases of notifications.
    pub notifications: abode_control::NotificationsConfig,
    /// How the prebuild pools are reconciled.
    pub prebuilds: abode_control::PrebuildsConfig,
    /// How the lifecycle scheduler ticks.
    pub scheduler: abode_control::SchedulerConfig,
    /// How long a claimed job stays this server's without a renewal.
    pub job_lease: Duration,
    /// Below this much free space in the data dir (bytes; 0: no minimum),
    /// this server starts no build.
    pub min_free_disk: u64,
    /// Whether a new template's access list starts with `Everyone: use`.
    pub new_templates_for_everyone: bool,
    /// Whether builds over their owner's budget are refused before apply.
    pub quota_enforce: bool,
    /// External auth providers and their tokens' key (docs/external-auth.md).
    pub external_auth: abode_control::external_auth::ExternalAuthConfig,
    /// Where workspace apps are served (docs/apps.md).
    pub apps: abode_gateway::AppsConfig,
    /// The provisioner tags this server's provisioners offer (`key=value`,
    /// checked with [`parse_provisioner_tags`](crate::parse_provisioner_tags)).
    pub provisioner_tags: Vec<String>,
    /// Serve HTTPS too (`--tls-address`, `--tls-cert-file`, `--tls-key-file`).
    pub tls: Option<TlsOptions>,
    /// Answer plain HTTP with a redirect to the access URL (but for what
    /// must stay on the plain listener: health, readiness and the embedded
    /// builds' state backend, reached on loopback).
    pub redirect_to_access_url: bool,
    /// `Strict-Transport-Security: max-age=...` on every answer given over
    /// TLS (`--hsts-max-age`); 0: none.
    pub hsts_max_age: u64,
    /// The proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` are
    /// believed (`--trusted-proxies`); empty: the socket's peer is the
    /// client, whatever the headers say.
    pub trusted_proxies: Vec<abode_control::client_address::Cidr>,
    /// [`serve`] tells people on standard error where it listens (the
    /// `abode server` command with text logs).
    pub announce: bool,
    /// Where the supervisor's forwards hand in the connections workspaces
    /// make to this server's addresses from their own networks.
    pub local_server: abode_terraform::machine::LocalServer,
}

/// The HTTPS listener: where, and the certificate's files.
#[derive(Debug, Clone)]
pub struct TlsOptions {
    pub address: SocketAddr,
    pub certificate_file: PathBuf,
    pub key_file: PathBuf,
}

impl ServerOptions {
    pub fn new(address: SocketAddr, data_dir: PathBuf) -> Self {
        ServerOptions {
            address,
            data_dir,
            provisioners: 3,
            access_url: None,
            relay_url: None,
            provider_mirror: None,
            terraform_env: None,
            terraform_isolation: None,
            process_supervisor: None,
            workspace_uids: None,
            plan_retention: 20,
            agent_binary: None,
            agent_connect_timeout: Duration::from_secs(30),
            agent_heartbeat_timeout: Duration::from_secs(15),
            agent_heartbeat_interval: Duration::from_secs(5),
            unsaved_scan_interval: Duration::from_secs(5 * 60),
            cancel_grace: Duration::from_secs(30),
            confirmation_timeout: Duration::from_secs(24 * 60 * 60),
            database_url: None,
            session_idle_timeout: Duration::from_secs(24 * 60 * 60),
            session_max_lifetime: Duration::from_secs(30 * 24 * 60 * 60),
            api_token_max_lifetime: Duration::from_secs(365 * 24 * 60 * 60),
            login_failures_per_minute: 10,
            password_login: true,
            oidc: abode_oidc::OidcSettings::default(),
            clock: Clock::system(),
            prometheus_address: None,
            metrics_refresh_interval: Duration::from_secs(15),
            notifications: abode_control::NotificationsConfig::default(),
            prebuilds: abode_control::PrebuildsConfig::default(),
            scheduler: abode_control::SchedulerConfig::default(),
            job_lease: Duration::from_secs(60),
            min_free_disk: 256 * 1024 * 1024,
            new_templates_for_everyone: true,
            quota_enforce: false,
            external_auth: abode_control::external_auth::ExternalAuthConfig::default(),
            apps: abode_gateway::AppsConfig::default(),
            provisioner_tags: Vec::new(),
            tls: None,
            redirect_to_access_url: false,
            hsts_max_age: DEFAULT_HSTS_MAX_AGE,
            trusted_proxies: Vec::new(),
            announce: false,
            local_server: Default::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("the data dir {path} must be an absolute path")]
    RelativeDataDir { path: String },
    #[error("cannot open the database: {0}")]
    Store(#[from] abode_store::StoreError),
    #[error("cannot recover from the previous run: {0}")]
    Recover(#[source] abode_control::ControlError),
    #[error("{0}")]
    Identity(#[source] abode_control::ControlError),
    #[error("cannot read or create this server's id in {path}: {source}")]
    ServerId {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Tls(#[from] abode_tls::TlsError),
    #[error(transparent)]
    WorkspaceUids(#[from] abode_terraform::machine::UidRangeError),
    #[error("no database at {0}: is this a server's data dir (--data-dir), or is it on PostgreSQL (--database-url)?")]
    NoDatabase(String),
    #[error("--redirect-to-access-url needs an https:// access URL (--access-url), not {0}")]
    RedirectWithoutHttps(String),
    /// Every mistake in the `--oidc-*` flags, one per line.
    #[error("{0}")]
    Oidc(#[from] abode_oidc::ConfigErrors),
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Why [`serve`] stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot start abode server")]
    Start(#[source] ServerError),
    #[error(transparent)]
    Signal(#[from] SignalError),
}

/// A signal handler [`wait_for_signal`] could not install.
#[derive(Debug, thiserror::Error)]
#[error("cannot install the {signal} handler")]
pub struct SignalError {
    signal: &'static str,
    #[source]
    source: std::io::Error,
}

/// What `abode server` is given besides its [`ServerOptions`], settled by
/// [`prepare`]: how its builds are sandboxed and the external auth files.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// `--workspace-uids`.
    pub workspace_uids: abode_terraform::machine::WorkspaceUids,
    /// `--terraform-sandbox`, `--terraform-user`, `--terraform-mount`.
    pub sandbox: abode_terraform::machine::SandboxSettings,
    /// The external auth providers (`--external-auth-config`).
    pub external_auth_config: Option<PathBuf>,
    /// The key linked accounts' tokens are sealed with
    /// (`--external-auth-key-file`).
    pub external_auth_key_file: Option<PathBuf>,
}

/// Why [`prepare`] refused to start a server.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// Every mistake in the `--oidc-*` flags (one a line, for the caller).
    #[error("{0}")]
    Oidc(abode_oidc::ConfigErrors),
    #[error(transparent)]
    Machine(#[from] abode_terraform::machine::MachineError),
    /// Every mistake in the external auth configuration (one a line).
    #[error("--external-auth-config {}: {}", config.display(), errors.0.join("; "))]
    ExternalAuth {
        config: PathBuf,
        errors: abode_external_auth::ConfigErrors,
    },
    #[error("--external-auth-key-file: {0}")]
    KeyFile(abode_external_auth::cipher::CipherError),
    #[error("--external-auth-config needs --external-auth-key-file: linked accounts' tokens are stored encrypted (a key of 64 hex digits: openssl rand -hex 32 > FILE; chmod 600 FILE)")]
    NeedsKeyFile,
}

/// Settles what a server's options leave to its machine, before anything
/// starts: the sign-in settings checked against the access URL (every
/// mistake at once; [`Server::start`] checks them again against the one it
/// settles on), the data dir made absolute and private with this binary's
/// provider in its mirror, the external auth providers and their tokens'
/// key read, and Terraform's sandbox with its process supervisor set up
/// (nothing secret of the server's in its reach). Agents run this same
/// executable.
pub fn prepare(mut options: ServerOptions, setup: Setup) -> Result<ServerOptions, StartupError> {
    use abode_terraform::machine;
    let access_url = options.access_url.clone().unwrap_or_else(|| {
        default_access_url(options.address, options.tls.as_ref().map(|tls| tls.address))
    });
    abode_oidc::OidcConfig::from_settings(&options.oidc, &access_url)
        .map_err(StartupError::Oidc)?;
    // Volumes (home disks), process logs and the database live here.
    let (data_dir, mirror_dir) =
        machine::prepare_data_dir(options.data_dir.clone(), options.provider_mirror.clone())?;
    options.data_dir = data_dir;
    let executable = std::env::current_exe().map_err(machine::MachineError::Executable)?;
    let providers = match &setup.external_auth_config {
        Some(config) => {
            abode_external_auth::load(config).map_err(|errors| StartupError::ExternalAuth {
                config: config.clone(),
                errors,
            })?
        }
        None => Vec::new(),
    };
    // Tokens are stored encrypted: providers need the key.
    let cipher = match (&setup.external_auth_key_file, providers.is_empty()) {
        (Some(file), _) => Some(
            abode_external_auth::cipher::TokenCipher::from_key_file(file)
                .map_err(StartupError::KeyFile)?,
        ),
        (None, true) => None,
        (None, false) => return Err(StartupError::NeedsKeyFile),
    };
    // Client secrets and the token key are the server's: no template may
    // read their files.
    let external_auth_secrets: Vec<PathBuf> = setup
        .external_auth_config
        .iter()
        .flat_map(|config| {
            providers.iter().map(move |provider| {
                abode_external_auth::secret_path(config, &provider.client_secret_file)
            })
        })
        .chain(setup.external_auth_key_file.iter().cloned())
        .collect();
    if !providers.is_empty() {
        let ids: Vec<&str> = providers
            .iter()
            .map(|provider| provider.id.as_str())
            .collect();
        tracing::info!(providers = %ids.join(", "), "external auth providers configured");
    }
    let terraform_env = options.terraform_env.clone().unwrap_or_default();
    let sandbox = machine::set_up_sandbox(
        &machine::SandboxSettings {
            local_server: options.local_server.clone(),
            ..setup.sandbox.clone()
        },
        &machine::Machine {
            data_dir: &options.data_dir,
            volumes_dir: &options.data_dir.join("volumes"),
            process_logs_dir: &options.data_dir.join("process-logs"),
            provider_mirror: &mirror_dir,
            agent_binary: &executable,
            terraform_env: &terraform_env,
            secrets: &options
                .tls
                .as_ref()
                .map(|tls| tls.key_file.as_path())
                .into_iter()
                .chain(external_auth_secrets.iter().map(|file| file.as_path()))
                .collect::<Vec<_>>(),
        },
    )?;
    let sandboxed = sandbox.is_some();
    if let Some((isolation, socket)) = sandbox {
        options.terraform_isolation = Some(isolation);
        options.process_supervisor = Some(socket);
    }
    let terraform_user = match &setup.sandbox.user {
        Some(name) => abode_sandbox_user(name),
        None => abode_sandbox_user(machine::DEFAULT_USER),
    };
    options.workspace_uids =
        machine::workspace_uids(setup.workspace_uids, sandboxed, terraform_user.as_ref())?;
    match options.workspace_uids {
        Some(range) => tracing::info!(%range, "each workspace runs as a uid of its own"),
        None => tracing::warn!("workspaces share one user (--workspace-uids off, or no root): each can signal and read the others' processes"),
    }
    options.provider_mirror = Some(mirror_dir);
    // Agents run this same executable (`abode agent`), not the mirror's copy.
    options.agent_binary = Some(executable);
    options.external_auth = abode_control::external_auth::ExternalAuthConfig {
        providers,
        cipher: cipher.map(std::sync::Arc::new),
    };
    if options.apps.allow_path_apps {
        tracing::warn!(
            "--allow-path-apps: apps are served under the dashboard's own origin; a script an app \
             serves can act as whoever opens it (prefer --wildcard-access-url)"
        );
    }
    Ok(options)
}

/// Terraform's user by name, when this machine has it and it is not root.
fn abode_sandbox_user(name: &str) -> Option<abode_terraform::machine::User> {
    abode_terraform::machine::User::by_name(name)
        .ok()
        .filter(|user| user.uid != 0)
}

/// The access URL of a server not given one: its HTTPS listener's when it
/// has one, else the plain listener's.
fn default_access_url(address: SocketAddr, tls: Option<SocketAddr>) -> String {
    match tls {
        Some(address) => format!("https://{address}"),
        None => format!("http://{address}"),
    }
}

/// Runs a server (`abode server`): starts it, says where it listens when
/// [`ServerOptions::announce`], serves until SIGINT or SIGTERM, then shuts
/// it down (running builds are interrupted, their state saved).
pub async fn serve(options: ServerOptions) -> Result<(), ServeError> {
    let announce = options.announce;
    let server = Server::start(options).await.map_err(ServeError::Start)?;
    if announce {
        eprintln!(
            "abode server listening on http://{} (agents use {})",
            server.local_addr(),
            server.access_url()
        );
        if let Some(address) = server.prometheus_addr() {
            eprintln!("abode server metrics on http://{address}/metrics");
        }
    }
    wait_for_signal().await?;
    tracing::info!("shutting down: interrupting running builds");
    server.shutdown().await;
    Ok(())
}

/// Waits for SIGINT or SIGTERM.
pub async fn wait_for_signal() -> Result<(), SignalError> {
    use tokio::signal::unix::{signal, SignalKind};
    let install = |kind, signal_name| {
        signal(kind).map_err(|source| SignalError {
            signal: signal_name,
            source,
        })
    };
    let mut terminate = install(SignalKind::terminate(), "SIGTERM")?;
    let mut interrupt = install(SignalKind::interrupt(), "SIGINT")?;
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
    Ok(())
}

/// A running server.
pub struct Server {
    local_addr: SocketAddr,
    tls_addr: Option<SocketAddr>,
    prometheus_addr: Option<SocketAddr>,
    access_url: String,
    control: Control,
    host: Host,
    shutdown: watch::Sender<bool>,
    /// Stops the API, once the workers (and their Terraform) have ended.
    http_stop: watch::Sender<bool>,
    http: JoinHandle<std::io::Result<()>>,
    prometheus: Option<JoinHandle<std::io::Result<()>>>,
    tls: Option<JoinHandle<std::io::Result<()>>>,
    workers: Vec<JoinHandle<()>>,
}

impl Server {
    /// Opens the database, takes over the builds this server (this data dir)
    /// left running when it died, starts the provisioners and listens.
    pub async fn start(options: ServerOptions) -> Result<Server, ServerError> {
        if !options.data_dir.is_absolute() {
            return Err(ServerError::RelativeDataDir {
                path: options.data_dir.display().to_string(),
            });
        }
        let (listener, local_addr) = bind(options.address).await?;
        let handed_plain = crate::handed_in::take(&options.local_server, local_addr);
        // The certificate is read (and its key's mode checked) before
        // anything else starts: a bad one is one line and nothing changed.
        let tls = match &options.tls {
            Some(tls) => {
                let certificate = abode_tls::server::ServerCertificate::load(
                    &tls.certificate_file,
                    &tls.key_file,
                )?;
                let config = certificate.server_config()?;
                let (listener, address) = bind(tls.address).await?;
                let handed = crate::handed_in::take(&options.local_server, address);
                Some((certificate, config, (listener, handed), address))
            }
            None => None,
        };
        let tls_addr = tls.as_ref().map(|(_, _, _, address)| *address);
        let prometheus_listener = match options.prometheus_address {
            Some(address) => Some(bind(address).await?),
            None => None,
        };
        let prometheus_addr = prometheus_listener.as_ref().map(|(_, address)| *address);
        let access_url = options
            .access_url
            .clone()
            .unwrap_or_else(|| default_access_url(local_addr, tls_addr));
        if options.redirect_to_access_url && !access_url.starts_with("https://") {
            return Err(ServerError::RedirectWithoutHttps(access_url));
        }
        let oidc = abode_oidc::OidcConfig::from_settings(&options.oidc, &access_url)?;
        let store = match &options.database_url {
            Some(url) => Store::open_postgres(url).await?,
            None => Store::open_sqlite(&options.data_dir.join(DATABASE_FILE)).await?,
        }
        .with_clock(options.clock.clone());
        if !options.clock.is_system() {
            tracing::warn!(
                clock = ?options.clock,
                "not the system clock: for tests only, deadlines and stored times follow it"
            );
        }
        if let Some(range) = options.workspace_uids {
            range.check_keeps(&store.given_workspace_uids().await?)?;
        }
        let config = control_config(&options, local_addr, &access_url, oidc)?;
        // Builds and template pushes need Terraform: say so at start rather
        // than at the first build.
        match tokio::task::spawn_blocking(abode_terraform::version).await {
            Ok(Ok(version)) => tracing::info!(%version, "terraform found"),
            Ok(Err(error)) => tracing::warn!(%error, "builds and template pushes will fail"),
            Err(error) => tracing::warn!(%error, "cannot check the terraform version"),
        }
        let apps = abode_gateway::AppsConfig {
            wildcard: options
                .apps
                .wildcard
                .clone()
                .map(|wildcard| wildcard.with_port_of(&access_url)),
            allow_path_apps: options.apps.allow_path_apps,
            no_dial_back: options.apps.no_dial_back,
        };
        let control = Control::new(store.clone(), config);
        let host = Host::new(HostParts::picked_from(&control, store.clone()));
        let gateway = abode_gateway::Gateway::new(store, control.clone(), apps);
        host.claim_server_identity()
            .await
            .map_err(ServerError::Identity)?;
        // This server id is ours now: the connections it left open when it
        // was killed are over (docs/connections.md).
        match gateway.connections().log().end_lost().await {
            Ok(0) => {}
            Ok(lost) => tracing::warn!(
                lost,
                "connections left open by this server's previous run ended server_lost"
            ),
            Err(error) => {
                tracing::warn!(%error, "cannot end the connections this server's previous run left open")
            }
        }
        let (shutdown, shutdown_rx) = watch::channel(false);
        control
            .identity()
            .ensure_system_actors()
            .await
            .map_err(|error| ServerError::Recover(error.into()))?;
        // A wrong issuer or an unreachable provider shows in the log now,
        // not at the first person's sign-in (which tries again).
        let identity = control.clone();
        tokio::spawn(async move {
            match identity.identity().check_oidc_provider().await {
                Some(Ok(())) => tracing::info!("the OpenID provider's discovery document was read"),
                Some(Err(error)) => {
                    tracing::warn!(%error, "single sign-on will fail until the provider answers")
                }
                None => {}
            }
        });
        let recovered = host
            .recover(shutdown_rx.clone())
            .await
            .map_err(ServerError::Recover)?;
        if !recovered.interrupted.is_empty() {
            tracing::warn!(
                count = recovered.interrupted.len(),
                "taking over builds the previous run left running"
            );
        }
        if options.provisioners == 0 {
            if options.database_url.is_none() {
                tracing::warn!("--provisioners 0 on SQLite: no server can share this database, so builds are queued and never run");
            } else {
                tracing::info!("API only: builds run on the other servers of this database that have provisioners");
            }
        }
        let mut workers = host.start_provisioners(options.provisioners, shutdown_rx.clone());
        workers.extend(control.start_loops(shutdown_rx.clone()));
        workers.extend(recovered.followers);
        let live = gateway.live().clone();
        let app = crate::router(AppState {
            control: control.clone(),
            host: host.clone(),
            gateway,
        });
        let app = crate::hsts::layer(app, options.hsts_max_age);
        let trusted_proxies = control.config().trusted_proxies.clone();
        let tls_app = crate::client_address::layer(app.clone(), trusted_proxies.clone());
        let app = if options.redirect_to_access_url {
            crate::redirect::to_access_url(app, &access_url)
        } else {
            app
        };
        let app = crate::client_address::layer(app, trusted_proxies);
        // The API outlives the workers at shutdown: an interrupted build's
        // Terraform stores its state through it on its way out.
        let (http_stop, http_shutdown) = watch::channel(false);
        let tls_task = tls.map(|(certificate, config, (listener, handed), address)| {
            tokio::spawn(certificate.watch(shutdown.subscribe()));
            tracing::info!(%address, "serving HTTPS");
            tokio::spawn(crate::tls_listener::serve(
                listener,
                config,
                tls_app,
                handed,
                http_stop.subscribe(),
            ))
        });
        drop(shutdown_rx);
        let handed_plain =
            crate::handed_in::serve_plain(handed_plain, app.clone(), http_stop.subscribe());
        let http = tokio::spawn(async move {
            // The peer address reaches handlers as ConnectInfo (the login
            // throttle counts failures per client address).
            let served = axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            // Small writes leave at once: a WebSocket relaying SSH carries
            // window updates and tunnel grants of a few dozen bytes, which
            // Nagle's algorithm would hold until the peer's delayed ACK
            // (tens of milliseconds, the round trip that bounds a copy).
            .tcp_nodelay(true)
            .with_graceful_shutdown(stopped(http_shutdown));
            let (served, _) =
                tokio::join!(std::future::IntoFuture::into_future(served), handed_plain);
            served
        });
        let prometheus = prometheus_listener.map(|(listener, address)| {
            workers.push(
                host.start_metrics_refresh(options.metrics_refresh_interval, shutdown.subscribe()),
            );
            tracing::info!(%address, "serving Prometheus metrics on /metrics");
            let app = crate::prometheus::scrape_router(control.config().metrics.clone(), live);
            let stop = shutdown.subscribe();
            tokio::spawn(async move {
                axum::serve(listener, app)
                    .with_graceful_shutdown(stopped(stop))
                    .await
            })
        });
        tracing::info!(address = %local_addr, %access_url, "abode server listening");
        Ok(Server {
            local_addr,
            tls_addr,
            tls: tls_task,
            prometheus_addr,
            prometheus,
            access_url,
            control,
            host,
            shutdown,
            http_stop,
            http,
            workers,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Where HTTPS is served, when it is.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// Where Prometheus metrics are served, when they are.
    pub fn prometheus_addr(&self) -> Option<SocketAddr> {
        self.prometheus_addr
    }

    pub fn access_url(&self) -> &str {
        &self.access_url
    }

    pub fn control(&self) -> &Control {
        &self.control
    }

    /// Stops accepting requests, interrupts running builds (their state is
    /// saved and they end failed), waits for everything, closes the database.
    pub async fn shutdown(self) {
        self.host.stop_long_polls();
        let _ = self.shutdown.send(true);
        for worker in self.workers {
            let _ = worker.await;
        }
        let _ = self.http_stop.send(true);
        let listeners = std::iter::once(self.http)
            .chain(self.tls)
            .chain(self.prometheus);
        for listener in listeners {
            match listener.await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::error!(%error, "an HTTP listener stopped with an error"),
                Err(error) => tracing::error!(%error, "an HTTP listener task failed"),
            }
        }
        self.control.close().await;
    }

    /// Drops the server without any cleanup, as a crash would (for tests of
    /// the recovery after a dead server).
    pub fn abort(self) {
        self.http.abort();
        for listener in self.prometheus.into_iter().chain(self.tls) {
            listener.abort();
        }
        for worker in self.workers {
            worker.abort();
        }
    }
}

/// The control plane's configuration: the options, with what start-up
/// settled (the bound address, the access URL, the checked single sign-on)
/// and this data dir's server id.
fn control_config(
    options: &ServerOptions,
    local_addr: SocketAddr,
    access_url: &str,
    oidc: Option<abode_oidc::OidcConfig>,
) -> Result<Config, ServerError> {
    let mut config = Config::new(options.data_dir.clone(), access_url.to_owned());
    config.relay_url = options
        .relay_url
        .clone()
        .or_else(|| (!local_addr.ip().is_unspecified()).then(|| format!("http://{local_addr}")));
    config.state_backend_url = state_backend_url(local_addr);
    config.tls_served = options.tls.is_some();
    config.clock = options.clock.clone();
    config.provider_mirror = options.provider_mirror.clone();
    config.agent_binary = options.agent_binary.clone();
    // The trust this process was started with (`--ca-cert`).
    config.ca_cert = abode_tls::added_authorities_pem();
    config.plan_retention = options.plan_retention;
    if let Some(env) = &options.terraform_env {
        config.terraform_env = env.clone();
    }
    config.terraform_isolation = options.terraform_isolation.clone();
    config.process_supervisor = options.process_supervisor.clone();
    config.workspace_uids = options
        .workspace_uids
        .map(|range| (range.first, range.last));
    config.agent_timeouts = AgentTimeouts {
        connect: options.agent_connect_timeout,
        heartbeat: options.agent_heartbeat_timeout,
    };
    config.agent_heartbeat_interval = options.agent_heartbeat_interval;
    config.unsaved_scan_interval = options.unsaved_scan_interval;
    config.cancel_grace = options.cancel_grace;
    config.confirmation_timeout = options.confirmation_timeout;
    config.identity.session_idle_timeout = options.session_idle_timeout;
    config.identity.session_max_lifetime = options.session_max_lifetime;
    config.identity.api_token_max_lifetime = options.api_token_max_lifetime;
    config.identity.login_failures_per_minute = options.login_failures_per_minute;
    config.identity.password_login = options.password_login;
    config.identity.oidc = oidc;
    config.notifications = options.notifications.clone();
    config.prebuilds = options.prebuilds.clone();
    config.scheduler = options.scheduler.clone();
    config.server_id = server_identity(&options.data_dir)?;
    config.job_lease = options.job_lease;
    config.min_free_disk = options.min_free_disk;
    config.new_templates_for_everyone = options.new_templates_for_everyone;
    config.quota_enforce = options.quota_enforce;
    config.external_auth = options.external_auth.clone();
    config.provisioner_tags = options.provisioner_tags.clone();
    config.trusted_proxies =
        abode_control::client_address::TrustedProxies::new(options.trusted_proxies.clone());
    Ok(config)
}

/// Where this server's own builds' Terraform reaches its state backend:
/// the listener itself, on loopback when it listens on every address.
fn state_backend_url(local_addr: SocketAddr) -> String {
    let ip = match local_addr.ip() {
        ip if !ip.is_unspecified() => ip,
        std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
    };
    format!("http://{}", SocketAddr::new(ip, local_addr.port()))
}

/// Ends when `stop` says true (or its sender is gone): a listener's
/// graceful shutdown.
async fn stopped(mut stop: watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}

/// Binds a listener and reads back its address (port 0 picks one).
async fn bind(address: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr), ServerError> {
    let bind_error = |source| ServerError::Bind { address, source };
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(bind_error)?;
    let local = listener.local_addr().map_err(bind_error)?;
    Ok((listener, local))
}

/// The file in the data dir that names this server among those sharing a
/// database.
const SERVER_ID_FILE: &str = "server-id";

/// Gives the data dir a new server id (`abode server new-id`): a copied data
/// dir is then a server of its own. The new id.
pub fn new_server_identity(data_dir: &std::path::Path) -> Result<String, ServerError> {
    let path = data_dir.join(SERVER_ID_FILE);
    if !path.exists() {
        return Err(ServerError::ServerId {
            path: path.display().to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no server id here: is this a server's data dir?",
            ),
        });
    }
    std::fs::remove_file(&path).map_err(|source| ServerError::ServerId {
        path: path.display().to_string(),
        source,
    })?;
    server_identity(data_dir)
}

/// This server's id: read from the data dir, created there at the first start,
/// so that a server restarted on its data dir takes back the builds it ran.
fn server_identity(data_dir: &std::path::Path) -> Result<String, ServerError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = data_dir.join(SERVER_ID_FILE);
    let error = |source| ServerError::ServerId {
        path: path.display().to_string(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => return Ok(text.trim().to_owned()),
        Ok(_) => {}
        Err(source) if source.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(error(source)),
    }
    let id = format!("server-{}", abode_store::new_id());
    std::fs::create_dir_all(data_dir).map_err(error)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(error)?;
    file.write_all(format!("{id}\n").as_bytes())
        .map_err(error)?;
    Ok(id)
}
