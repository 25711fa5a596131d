//! `abode server`: runs the control plane on one machine (embedded SQLite under
//! the data dir, built-in provisioners) until SIGINT or SIGTERM. These are its
//! flags, turned into `abode-api`'s options; the server's start-up is the
//! library's (`abode_api::prepare`, then `abode_api::serve`), which installs
//! this very executable as the abode Terraform provider into a filesystem
//! mirror under the data dir, so that builds find the provider without any
//! download.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::terraform_flags::TerraformFlags;
use abode_api::ServerOptions;
use abode_terraform::machine;

#[derive(Debug, clap::Args)]
pub struct ServerArgs {
    #[command(subcommand)]
    action: Option<ServerAction>,
    /// Address to listen on.
    #[arg(long, env = "ABODE_ADDRESS", default_value = "127.0.0.1:7080")]
    address: SocketAddr,
    /// Where the database, volumes and work dirs live.
    #[arg(long, env = "ABODE_DATA_DIR", default_value = "./.abode")]
    data_dir: PathBuf,
    /// Number of embedded provisioner workers (builds run in parallel); 0: an
    /// API-only server (other servers on the same PostgreSQL run the builds).
    #[arg(long, env = "ABODE_PROVISIONERS", default_value_t = 3)]
    provisioners: usize,
    #[command(flatten)]
    terraform: TerraformFlags,
    /// The uids workspaces run as, each its own, kept with it and never
    /// given to another: FIRST-LAST (at least 100, none a user or group of
    /// this machine), or `off` (all run as --terraform-user's user)
    /// [default: 200000-299999 when root, off otherwise].
    #[arg(long, env = "ABODE_WORKSPACE_UIDS", value_name = "FIRST-LAST|off", value_parser = parse_workspace_uids)]
    workspace_uids: Option<machine::WorkspaceUids>,
    #[command(flatten)]
    logging: LogFlags,
    #[command(flatten)]
    sign_in: crate::sign_in_flags::SignInFlags,
    /// The URL people and workspace agents use to reach this server
    /// [default: http://ADDRESS]. The server answers only for its host (and
    /// loopback): a request naming another host is refused (421).
    #[arg(long, env = "ABODE_ACCESS_URL")]
    access_url: Option<String>,
    /// The URL the other servers on the same database reach this one at:
    /// a person's connection (`abode ssh`, port forwarding) that reaches
    /// another server is relayed here when this server holds the agent's
    /// tunnel [default: http://ADDRESS, none when ADDRESS is 0.0.0.0 or ::].
    #[arg(long, env = "ABODE_RELAY_URL", value_name = "URL")]
    relay_url: Option<String>,
    /// Also serve HTTPS on this address (with --tls-cert-file and --tls-key-file).
    #[arg(long, env = "ABODE_TLS_ADDRESS", value_name = "ADDR", requires_all = ["tls_cert_file", "tls_key_file"])]
    tls_address: Option<SocketAddr>,
    /// The server's certificate (PEM, the chain after it); re-read when it
    /// changes on disk or on SIGHUP.
    #[arg(
        long,
        env = "ABODE_TLS_CERT_FILE",
        value_name = "FILE",
        requires = "tls_address"
    )]
    tls_cert_file: Option<PathBuf>,
    /// The certificate's private key (PEM); must not be readable by other users.
    #[arg(
        long,
        env = "ABODE_TLS_KEY_FILE",
        value_name = "FILE",
        requires = "tls_address"
    )]
    tls_key_file: Option<PathBuf>,
    /// Answer plain HTTP on --address with a redirect to the https:// access
    /// URL (health, readiness and the embedded builds' state backend stay).
    #[arg(long, env = "ABODE_REDIRECT_TO_ACCESS_URL")]
    redirect_to_access_url: bool,
    /// Strict-Transport-Security's max-age (seconds) on every answer given
    /// over TLS (the HTTPS listener, or a trusted proxy's https); 0: none.
    #[arg(long, env = "ABODE_HSTS_MAX_AGE", value_name = "SECONDS", default_value_t = abode_api::DEFAULT_HSTS_MAX_AGE)]
    hsts_max_age: u64,
    /// Behind a proxy: the proxies' addresses (CIDR ranges, comma-separated
    /// or repeated) whose X-Forwarded-For and X-Forwarded-Proto are believed;
    /// from any other peer those headers are ignored.
    #[arg(
        long = "trusted-proxies",
        env = "ABODE_TRUSTED_PROXIES",
        value_delimiter = ',',
        value_name = "CIDR"
    )]
    trusted_proxies: Vec<String>,
    /// How many of each workspace's newest builds keep their plan JSON (held builds always do).
    #[arg(long, env = "ABODE_PLAN_RETENTION", default_value_t = 20)]
    plan_retention: usize,
    /// Seconds a started workspace's agent has to connect before it counts as unhealthy.
    #[arg(long, env = "ABODE_AGENT_CONNECT_TIMEOUT", default_value_t = 30)]
    agent_connect_timeout: u64,
    /// Seconds without a heartbeat before an agent counts as disconnected.
    #[arg(long, env = "ABODE_AGENT_HEARTBEAT_TIMEOUT", default_value_t = 15)]
    agent_heartbeat_timeout: u64,
    /// Seconds between agent heartbeats (told to agents).
    #[arg(long, env = "ABODE_AGENT_HEARTBEAT_INTERVAL", default_value_t = 5)]
    agent_heartbeat_interval: u64,
    /// Seconds between an agent's scans of its home for unsaved work (told
    /// to agents; each also scans once at start).
    #[arg(long, env = "ABODE_UNSAVED_SCAN_INTERVAL", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    unsaved_scan_interval: u64,
    /// Seconds a build this server runs stays its own without a renewal (it
    /// renews four times as often); past it, another server on the same
    /// database fails the build as its server's.
    #[arg(long, env = "ABODE_JOB_LEASE", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    job_lease: u64,
    /// Below this much free space in the data dir (`256MiB`, `2GiB`, bytes;
    /// `0`: no minimum), this server warns and starts no build until space
    /// returns (docs/metrics.md, `abode_data_dir_low`).
    #[arg(long, env = "ABODE_MIN_FREE_DISK", default_value = "256MiB", value_parser = crate::size::parse)]
    min_free_disk: u64,
    /// What a new template's access list starts with: `use` gives
    /// `Everyone` the use of it; `none` leaves it to template admins to
    /// grant (`abode templates permissions`).
    #[arg(long, env = "ABODE_DEFAULT_TEMPLATE_ACCESS", value_enum, default_value_t = DefaultTemplateAccess::Use)]
    default_template_access: DefaultTemplateAccess,
    /// Refuse, after its plan and before any apply, a start, create, update
    /// or claim whose plan's daily cost would take its owner past their
    /// budget (the sum of their groups' quota allowances). Off: costs are
    /// still computed, logged and shown.
    #[arg(long, env = "ABODE_QUOTA_ENFORCE")]
    quota_enforce: bool,
    /// The external auth providers people link their Git accounts with
    /// (a TOML file of `[[provider]]` tables; docs/external-auth.md),
    /// checked at start: one line per mistake, and no start.
    #[arg(long, env = "ABODE_EXTERNAL_AUTH_CONFIG", value_name = "FILE")]
    external_auth_config: Option<std::path::PathBuf>,
    /// The key people's linked-account tokens are encrypted with at rest
    /// (64 hex digits, `openssl rand -hex 32`, in a file only the server's
    /// user reads); required with `--external-auth-config`.
    #[arg(long, env = "ABODE_EXTERNAL_AUTH_KEY_FILE", value_name = "FILE")]
    external_auth_key_file: Option<std::path::PathBuf>,
    /// Serve workspace apps on hosts of their own under this wildcard
    /// (`*.apps.example.com`, with `:PORT` when the server is reached on
    /// one; DNS and the TLS certificate must cover it): each app at
    /// `SLUG--AGENT--WORKSPACE--OWNER.apps.example.com` (docs/apps.md).
    #[arg(long, env = "ABODE_WILDCARD_ACCESS_URL")]
    wildcard_access_url: Option<String>,
    /// Also serve apps under the dashboard's own address
    /// (`/@OWNER/WORKSPACE.AGENT/apps/SLUG/`). Such an app shares the
    /// dashboard's origin: a script it serves acts as whoever opens it.
    #[arg(long, env = "ABODE_ALLOW_PATH_APPS")]
    allow_path_apps: bool,
    /// Carry each app request on a connection the agent dials back to the
    /// server for it (`on`: about twice the download speed, three more
    /// round trips between agent and server per request), or always on the
    /// agent's tunnel (`off`: for agents far from the server, whose pages
    /// make many small requests). docs/apps.md.
    #[arg(long, env = "ABODE_APP_DIAL_BACK", value_enum, default_value_t = crate::terraform_flags::OnOff::On)]
    app_dial_back: crate::terraform_flags::OnOff,
    /// A tag this server's provisioners offer (`key=value`, repeatable): they
    /// take the jobs of template versions whose tags are all among theirs
    /// (untagged versions' jobs go to any provisioner).
    #[arg(
        long = "provisioner-tag",
        env = "ABODE_PROVISIONER_TAGS",
        value_delimiter = ',',
        value_name = "KEY=VALUE"
    )]
    provisioner_tags: Vec<String>,
    /// Keep the data in PostgreSQL (postgres://USER@HOST/DB) instead of SQLite in the data dir.
    #[arg(long, env = "ABODE_DATABASE_URL")]
    database_url: Option<String>,
    /// Seconds a build held by the plan guard waits for a confirmation before it expires.
    #[arg(long, env = "ABODE_CONFIRMATION_TIMEOUT", default_value_t = 86_400)]
    confirmation_timeout: u64,
    /// A session ends after this long without a request (90m, 24h, 30d, or seconds).
    #[arg(long, env = "ABODE_SESSION_IDLE_TIMEOUT", default_value = "24h", value_parser = crate::duration::parse)]
    session_idle_timeout: Duration,
    /// A session ends this long after its login, however much it is used.
    #[arg(long, env = "ABODE_SESSION_MAX_LIFETIME", default_value = "30d", value_parser = crate::duration::parse)]
    session_max_lifetime: Duration,
    /// The longest lifetime of an API token (also the default of `abode tokens create`).
    #[arg(long, env = "ABODE_API_TOKEN_MAX_LIFETIME", default_value = "365d", value_parser = crate::duration::parse)]
    api_token_max_lifetime: Duration,
    /// Failed logins per username or client address within a minute before
    /// logins are refused (429) for the rest of that minute; 0 turns it off.
    #[arg(long, env = "ABODE_LOGIN_FAILURES_PER_MINUTE", default_value_t = 10)]
    login_failures_per_minute: u32,
    /// Serve Prometheus metrics on this address (GET /metrics), apart from
    /// the API; off unless given. See docs/metrics.md.
    #[arg(long, env = "ABODE_PROMETHEUS_ADDRESS", value_name = "HOST:PORT")]
    prometheus_address: Option<SocketAddr>,
    /// How often the metrics that need the database are read (90m, 24h, 30d, or seconds).
    #[arg(long, env = "ABODE_METRICS_REFRESH_INTERVAL", default_value = "15", value_parser = crate::duration::parse)]
    metrics_refresh_interval: Duration,
    /// POST every notification to this http(s) URL (signed JSON,
    /// docs/notifications.md).
    #[arg(long, env = "ABODE_NOTIFICATIONS_WEBHOOK_URL", value_name = "URL")]
    notifications_webhook_url: Option<String>,
    /// The file holding the webhook's shared secret (X-Abode-Signature).
    #[arg(
        long,
        env = "ABODE_NOTIFICATIONS_WEBHOOK_SECRET_FILE",
        value_name = "FILE"
    )]
    notifications_webhook_secret_file: Option<PathBuf>,
    /// How long one webhook delivery may take.
    #[arg(long, env = "ABODE_NOTIFICATIONS_WEBHOOK_TIMEOUT", default_value = "10s", value_parser = crate::duration::parse)]
    notifications_webhook_timeout: Duration,
    /// Mail every notification to its recipient through this SMTP
    /// smarthost (HOST:PORT).
    #[arg(
        long,
        env = "ABODE_NOTIFICATIONS_EMAIL_SMARTHOST",
        value_name = "HOST:PORT"
    )]
    notifications_email_smarthost: Option<String>,
    /// The sender of notification emails (`Abode <abode@example.com>`).
    #[arg(long, env = "ABODE_NOTIFICATIONS_EMAIL_FROM", value_name = "ADDRESS")]
    notifications_email_from: Option<String>,
    /// Upgrade SMTP connections with STARTTLS (required, not opportunistic).
    #[arg(long, env = "ABODE_NOTIFICATIONS_EMAIL_STARTTLS")]
    notifications_email_starttls: bool,
    /// Speak TLS to the smarthost from the start (implicit TLS, usually port 465).
    #[arg(long, env = "ABODE_NOTIFICATIONS_EMAIL_TLS")]
    notifications_email_tls: bool,
    /// The smarthost's user name (first line) and password (second line).
    #[arg(
        long,
        env = "ABODE_NOTIFICATIONS_EMAIL_CREDENTIALS_FILE",
        value_name = "FILE"
    )]
    notifications_email_credentials_file: Option<PathBuf>,
    /// Delivery attempts after which a notification is marked failed.
    #[arg(long, env = "ABODE_NOTIFICATIONS_MAX_ATTEMPTS", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    notifications_max_attempts: u32,
    /// How often the pools of prebuilt workspaces are reconciled (one server
    /// at a time does it).
    #[arg(long, env = "ABODE_PREBUILDS_RECONCILE_INTERVAL", default_value = "1m", value_parser = crate::duration::parse)]
    prebuilds_reconcile_interval: Duration,
    /// After a failed prebuild build, no new prebuild of that preset for this
    /// long, times the consecutive failures.
    #[arg(long, env = "ABODE_PREBUILDS_BACKOFF", default_value = "1m", value_parser = crate::duration::parse)]
    prebuilds_backoff: Duration,
    /// Consecutive failed prebuild builds after which a preset creates
    /// nothing more (template admins are told); 0 turns the limit off.
    #[arg(long, env = "ABODE_PREBUILDS_FAILURE_HARD_LIMIT", default_value_t = 3)]
    prebuilds_failure_hard_limit: u32,
    /// How often the lifecycle scheduler looks for workspaces to stop, start,
    /// mark dormant or delete (one server at a time does it).
    #[arg(long, env = "ABODE_AUTOBUILD_POLL_INTERVAL", default_value = "1m", value_parser = crate::duration::parse)]
    autobuild_poll_interval: Duration,
    /// People not seen (no sign-in, no request) for this long become
    /// dormant at the scheduler's next tick, and active again at their next
    /// sign-in (`abode users list` shows it); unset: never.
    #[arg(long, env = "ABODE_DORMANCY_PERIOD", value_parser = crate::duration::parse)]
    dormancy_period: Option<Duration>,
    /// For tests only (hidden): the server's clock runs ahead of the system's
    /// by the milliseconds written in this file, read at every use, so that
    /// a test of the binary moves time instead of sleeping for it.
    #[arg(long, hide = true, value_name = "PATH")]
    clock_offset_file: Option<PathBuf>,
}

/// Where and how log lines go: shared by the long-running commands.
#[derive(Debug, clap::Args)]
pub struct LogFlags {
    /// How log lines are written to standard error: `text` for people,
    /// `json` (one object per line) for log collectors.
    #[arg(long, env = "ABODE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Which log lines to write, in RUST_LOG syntax (`info`,
    /// `warn,abode_control=debug`, ...).
    #[arg(long, env = "RUST_LOG", value_name = "FILTER", default_value = "info")]
    pub log_filter: String,
}

/// The formats of `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// What `abode server` does besides serving.
#[derive(Debug, clap::Subcommand)]
enum ServerAction {
    /// Give a data dir a new server id: a copy of another server's data dir
    /// (a restore beside the original, a cloned machine) becomes a server
    /// of its own. Prints the new id.
    NewId {
        /// The copied data dir.
        #[arg(long, env = "ABODE_DATA_DIR", default_value = "./.abode")]
        data_dir: PathBuf,
    },
    /// Copy the data dir's SQLite database into FILE, consistently, while
    /// the server runs; prints the copy's SHA-256 and writes it to
    /// FILE.sha256. (On PostgreSQL: pg_dump, docs/deployment.md.)
    Backup {
        /// The server's data dir.
        #[arg(long, env = "ABODE_DATA_DIR", default_value = "./.abode")]
        data_dir: PathBuf,
        /// Where the copy goes; never overwritten.
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
        /// Refused: a backup of PostgreSQL is pg_dump's.
        #[arg(long, env = "ABODE_DATABASE_URL", hide = true)]
        database_url: Option<String>,
    },
    /// Create an owner in the server's database: the way back in when no
    /// owner can sign in. Run on the server's machine (stopped or running);
    /// the password from the first line of standard input. Audited.
    CreateAdminUser {
        /// The new owner's name.
        #[arg(long)]
        username: String,
        /// The new owner's e-mail address.
        #[arg(long)]
        email: String,
        /// Read the password from standard input (the only way: passwords
        /// never go on the command line).
        #[arg(long, required = true)]
        password_stdin: bool,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Set a person's password in the server's database and end their
    /// sessions. Run on the server's machine (stopped or running); the
    /// password from the first line of standard input. Audited.
    ResetPassword {
        /// The person whose password is set.
        username: String,
        /// Read the password from standard input.
        #[arg(long, required = true)]
        password_stdin: bool,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Re-encrypt every linked account's tokens (external auth) under a new
    /// key, in one transaction; then start the servers with the new key
    /// file. Run with the servers stopped. Audited.
    RotateExternalAuthKey {
        /// The key the tokens are sealed with now.
        #[arg(long, value_name = "FILE")]
        old_key_file: PathBuf,
        /// The new key (64 hex digits, mode 600: openssl rand -hex 32).
        #[arg(long, value_name = "FILE")]
        new_key_file: PathBuf,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Check a data dir's database before starting a server on it (after a
    /// restore): integrity, schema version, every stored state readable.
    /// Changes nothing.
    Check {
        /// The data dir.
        #[arg(long, env = "ABODE_DATA_DIR", default_value = "./.abode")]
        data_dir: PathBuf,
    },
}

/// The database a server uses, for the commands run beside it.
#[derive(Debug, clap::Args)]
struct DatabaseArgs {
    /// The server's data dir (its SQLite database).
    #[arg(long, env = "ABODE_DATA_DIR", default_value = "./.abode")]
    data_dir: PathBuf,
    /// The servers' PostgreSQL database instead.
    #[arg(long, env = "ABODE_DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
}

pub fn run(args: ServerArgs) -> anyhow::Result<ExitCode> {
    match &args.action {
        Some(ServerAction::NewId { data_dir }) => {
            let id = abode_api::new_server_identity(data_dir)
                .with_context(|| format!("cannot give {} a new server id", data_dir.display()))?;
            println!("{id}");
            return Ok(ExitCode::SUCCESS);
        }
        Some(ServerAction::Backup {
            data_dir,
            to,
            database_url,
        }) => return backup(data_dir, to, database_url.as_deref()),
        Some(ServerAction::Check { data_dir }) => return check(data_dir),
        Some(ServerAction::RotateExternalAuthKey {
            old_key_file,
            new_key_file,
            database,
        }) => {
            let load = |file: &PathBuf| {
                abode_external_auth::cipher::TokenCipher::from_key_file(file)
                    .map_err(anyhow::Error::new)
            };
            let (old, new) = (load(old_key_file)?, load(new_key_file)?);
            if old.key_id() == new.key_id() {
                anyhow::bail!(
                    "the new key is the old key: make a new one with openssl rand -hex 32"
                );
            }
            return recover(
                database,
                abode_api::recovery::Recovery::RotateExternalAuthKey {
                    old: Box::new(old),
                    new: Box::new(new),
                },
            );
        }
        Some(ServerAction::CreateAdminUser {
            username,
            email,
            database,
            ..
        }) => {
            let recovery = abode_api::recovery::Recovery::CreateAdminUser {
                username: username.clone(),
                email: email.clone(),
                password: crate::password::read_password_stdin()?,
            };
            return recover(database, recovery);
        }
        Some(ServerAction::ResetPassword {
            username, database, ..
        }) => {
            let recovery = abode_api::recovery::Recovery::ResetPassword {
                username: username.clone(),
                password: crate::password::read_password_stdin()?,
            };
            return recover(database, recovery);
        }
        None => {}
    }
    init_logging(args.logging.log_format, &args.logging.log_filter)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(args))
}

fn small_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// `abode server backup`.
fn backup(
    data_dir: &std::path::Path,
    to: &std::path::Path,
    database_url: Option<&str>,
) -> anyhow::Result<ExitCode> {
    if database_url.is_some_and(|url| !url.is_empty()) {
        anyhow::bail!(
            "this server keeps its data in PostgreSQL (ABODE_DATABASE_URL): back it up with pg_dump (docs/deployment.md, \"Backups\")"
        );
    }
    let database = data_dir.join(abode_api::DATABASE_FILE);
    let done = small_runtime()?.block_on(abode_api::backup::backup_sqlite(&database, to))?;
    println!("{}  {}", done.sha256, done.file.display());
    eprintln!(
        "backed up {} ({} bytes); its SHA-256 is in {}",
        database.display(),
        done.bytes,
        done.digest_file.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `abode server create-admin-user` and `reset-password`.
fn recover(
    database: &DatabaseArgs,
    recovery: abode_api::recovery::Recovery,
) -> anyhow::Result<ExitCode> {
    let url = database
        .database_url
        .as_deref()
        .filter(|url| !url.is_empty());
    let done = small_runtime()?.block_on(abode_api::recovery::recover(
        &database.data_dir,
        url,
        recovery,
    ))?;
    println!("{done}");
    Ok(ExitCode::SUCCESS)
}

/// `abode server check`.
fn check(data_dir: &std::path::Path) -> anyhow::Result<ExitCode> {
    let database = data_dir.join(abode_api::DATABASE_FILE);
    let report = small_runtime()?.block_on(abode_api::backup::check_sqlite(&database))?;
    println!("database: {}", database.display());
    println!("integrity: {}", report.integrity.join("; "));
    println!(
        "schema: migration {} (this abode knows up to {})",
        report.schema, report.binary_schema
    );
    println!(
        "workspaces: {}, stored states readable: {}",
        report.workspaces, report.readable_states
    );
    let problems = report.problems();
    if problems.is_empty() {
        println!("ok");
        return Ok(ExitCode::SUCCESS);
    }
    for problem in &problems[1..] {
        eprintln!("error: {problem}");
    }
    anyhow::bail!("{}", problems[0])
}

/// `abode server`: the flags as options, then the library's
/// [`abode_api::serve`] runs the server until SIGINT or SIGTERM.
async fn serve(args: ServerArgs) -> anyhow::Result<ExitCode> {
    let announce = args.logging.log_format == LogFormat::Text;
    let mut options = match server_options(args)? {
        Ok(options) => options,
        Err(code) => return Ok(code),
    };
    options.announce = announce;
    abode_api::serve(options).await?;
    Ok(ExitCode::SUCCESS)
}

/// The server's options from its flags, each checked (one line per
/// mistake), then settled by [`abode_api::prepare`]: the start-up that
/// checks single sign-on, makes the data dir private with this binary's
/// provider in its mirror and sets up Terraform's sandbox. `Err` is the
/// exit code of a refusal already reported.
fn server_options(args: ServerArgs) -> anyhow::Result<Result<ServerOptions, ExitCode>> {
    let passed_env = abode_terraform::run::PassedEnv::new(&args.terraform.terraform_env)
        .context("--terraform-env")?;
    let mut notifications = abode_api::NotificationsConfig {
        max_attempts: args.notifications_max_attempts,
        ..Default::default()
    };
    if let Some(url) = &args.notifications_webhook_url {
        let webhook = abode_api::WebhookConfig::from_flags(
            url,
            args.notifications_webhook_secret_file.as_deref(),
            args.notifications_webhook_timeout,
        )?;
        // A lease outlives any one delivery, or a slow one is sent twice.
        notifications.lease = notifications.lease.max(webhook.timeout * 2);
        notifications.webhook = Some(webhook);
    } else if args.notifications_webhook_secret_file.is_some() {
        anyhow::bail!("--notifications-webhook-secret-file needs --notifications-webhook-url");
    }
    if let Some(smarthost) = &args.notifications_email_smarthost {
        notifications.email = Some(abode_api::EmailConfig::from_flags(
            smarthost,
            args.notifications_email_from.as_deref(),
            args.notifications_email_starttls,
            args.notifications_email_tls,
            args.notifications_email_credentials_file.as_deref(),
            Duration::from_secs(30),
        )?);
    } else if args.notifications_email_from.is_some()
        || args.notifications_email_credentials_file.is_some()
    {
        anyhow::bail!(
            "the --notifications-email-* flags need --notifications-email-smarthost HOST:PORT"
        );
    }
    let mut options = ServerOptions::new(args.address, args.data_dir);
    options.provisioners = args.provisioners;
    options.access_url = args.access_url;
    if let Some(url) = &args.relay_url {
        if !url.starts_with("http://") && !url.starts_with("https://") {
            anyhow::bail!("--relay-url must be an http:// or https:// URL, not {url:?}");
        }
    }
    options.relay_url = args.relay_url;
    options.tls = match (args.tls_address, args.tls_cert_file, args.tls_key_file) {
        (Some(address), Some(certificate_file), Some(key_file)) => Some(abode_api::TlsOptions {
            address,
            certificate_file,
            key_file,
        }),
        _ => None,
    };
    options.redirect_to_access_url = args.redirect_to_access_url;
    options.hsts_max_age = args.hsts_max_age;
    options.trusted_proxies = args
        .trusted_proxies
        .iter()
        .filter(|range| !range.trim().is_empty())
        .map(|range| range.parse())
        .collect::<Result<_, abode_api::CidrError>>()
        .map_err(|error| anyhow::anyhow!("--trusted-proxies: {error}"))?;
    options.provider_mirror = args.terraform.provider_mirror.clone();
    options.terraform_env = Some(passed_env.from_process());
    options.plan_retention = args.plan_retention;
    options.agent_connect_timeout = Duration::from_secs(args.agent_connect_timeout);
    options.agent_heartbeat_timeout = Duration::from_secs(args.agent_heartbeat_timeout);
    options.agent_heartbeat_interval = Duration::from_secs(args.agent_heartbeat_interval);
    options.unsaved_scan_interval = Duration::from_secs(args.unsaved_scan_interval);
    options.cancel_grace = Duration::from_secs(args.terraform.cancel_grace);
    options.job_lease = Duration::from_secs(args.job_lease);
    options.min_free_disk = args.min_free_disk;
    options.new_templates_for_everyone = args.default_template_access == DefaultTemplateAccess::Use;
    options.quota_enforce = args.quota_enforce;
    options.apps = abode_api::AppsConfig {
        wildcard: args
            .wildcard_access_url
            .as_deref()
            .map(abode_api::WildcardHost::parse)
            .transpose()
            .map_err(|error| anyhow::anyhow!(error))?,
        allow_path_apps: args.allow_path_apps,
        no_dial_back: args.app_dial_back == crate::terraform_flags::OnOff::Off,
    };
    options.provisioner_tags = abode_api::parse_provisioner_tags(&args.provisioner_tags)
        .map_err(|error| anyhow::anyhow!("--provisioner-tag: {error}"))?;
    options.confirmation_timeout = Duration::from_secs(args.confirmation_timeout);
    options.database_url = args.database_url;
    options.session_idle_timeout = args.session_idle_timeout;
    options.session_max_lifetime = args.session_max_lifetime;
    options.api_token_max_lifetime = args.api_token_max_lifetime;
    options.login_failures_per_minute = args.login_failures_per_minute;
    options.password_login = args.sign_in.password_login();
    options.oidc = args.sign_in.oidc();
    options.prometheus_address = args.prometheus_address;
    options.metrics_refresh_interval = args.metrics_refresh_interval;
    options.notifications = notifications;
    options.prebuilds.reconcile_interval = args.prebuilds_reconcile_interval;
    options.prebuilds.backoff = args.prebuilds_backoff;
    options.prebuilds.failure_hard_limit = args.prebuilds_failure_hard_limit;
    options.scheduler.poll_interval = args.autobuild_poll_interval;
    options.scheduler.account_dormancy = args.dormancy_period;
    if let Some(file) = args.clock_offset_file {
        // The server warns at start that its clock is not the system's.
        options.clock = abode_clock::Clock::with_offset_file(machine::absolute(file)?);
    }
    let setup = abode_api::Setup {
        workspace_uids: args.workspace_uids.unwrap_or_default(),
        sandbox: args.terraform.sandbox(),
        external_auth_config: args.external_auth_config,
        external_auth_key_file: args.external_auth_key_file,
    };
    match abode_api::prepare(options, setup) {
        Ok(options) => Ok(Ok(options)),
        // Every mistake in the sign-in flags, one line each.
        Err(abode_api::StartupError::Oidc(errors)) => match errors.0.split_last() {
            Some((last, others)) => {
                for error in others {
                    eprintln!("error: {error}");
                }
                anyhow::bail!("{last}")
            }
            None => anyhow::bail!("{errors}"),
        },
        // Every mistake at once, each on its line (one `error:` line
        // would run them together).
        Err(abode_api::StartupError::ExternalAuth { config, errors }) => {
            for line in &errors.0 {
                eprintln!(
                    "error: --external-auth-config {}: {}",
                    config.display(),
                    crate::output::visible(line)
                );
            }
            Ok(Err(ExitCode::from(crate::exit::FAILURE)))
        }
        Err(error) => Err(error.into()),
    }
}

/// Logs go to standard error, filtered like RUST_LOG; as text (colours only
/// on a terminal) or one JSON object per line with the fields of the spans
/// an event is in (a build's workspace and number, a request's id).
pub(crate) fn init_logging(format: LogFormat, filter: &str) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::builder()
        .parse(filter)
        .with_context(|| format!("--log-filter (RUST_LOG) {filter:?} is not a log filter"))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    // Another subscriber already set (only in tests of this function) is
    // not an error worth stopping the server for.
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .try_init(),
    };
    Ok(())
}

/// What a new template's access list starts with (`--default-template-access`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DefaultTemplateAccess {
    /// `Everyone: use`.
    Use,
    /// An empty list: only template admins and owners see the template.
    None,
}

/// `--workspace-uids`: `off` or `FIRST-LAST`.
fn parse_workspace_uids(text: &str) -> Result<machine::WorkspaceUids, String> {
    if text.trim() == "off" {
        return Ok(machine::WorkspaceUids::Off);
    }
    text.parse::<machine::UidRange>()
        .map(machine::WorkspaceUids::Range)
        .map_err(|error| error.to_string())
}
