//! `abode provisioner start`: an external provisioner daemon (the work is
//! `abode-provisionerd`'s; this is its flags, its files and its signals).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::server::{init_logging, LogFlags};
use crate::terraform_flags::TerraformFlags;
use abode_terraform::machine::{self, absolute, prepare_data_dir};

#[derive(Debug, clap::Args)]
pub struct StartArgs {
    /// The URL of an Abode server (any of several, or their load balancer).
    #[arg(long, env = "ABODE_PROVISIONER_URL", value_name = "URL")]
    url: String,
    /// The file holding this provisioner's key (`abode provisioner keys create`).
    #[arg(long, env = "ABODE_PROVISIONER_KEY_FILE", value_name = "FILE")]
    key_file: PathBuf,
    /// A tag this provisioner offers (`key=value`, repeatable): they must be
    /// its key's tags, which it offers anyway when none is given.
    #[arg(
        long = "tag",
        env = "ABODE_PROVISIONER_TAGS",
        value_delimiter = ',',
        value_name = "KEY=VALUE"
    )]
    tags: Vec<String>,
    /// How many builds it runs at once.
    #[arg(long, env = "ABODE_PROVISIONER_CONCURRENCY", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    concurrency: u16,
    /// Where its id, work dirs and provider mirror live.
    #[arg(
        long,
        env = "ABODE_PROVISIONER_DATA_DIR",
        default_value = "./.abode-provisioner"
    )]
    data_dir: PathBuf,
    /// Where local `abode_volume` resources live [default: DATA_DIR/volumes];
    /// provisioners serving the same local template share it.
    #[arg(long, env = "ABODE_PROVISIONER_VOLUMES_DIR")]
    volumes_dir: Option<PathBuf>,
    #[command(flatten)]
    terraform: TerraformFlags,
    #[command(flatten)]
    logging: LogFlags,
    /// The name its id starts with, shown by `abode provisioner list` [default: the host name].
    #[arg(long, env = "ABODE_PROVISIONER_NAME")]
    name: Option<String>,
}

pub fn run(args: StartArgs) -> anyhow::Result<ExitCode> {
    init_logging(args.logging.log_format, &args.logging.log_filter)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let ended = runtime.block_on(start(args));
    // An idle slot's long-poll (up to 20 s) is a blocking call that nobody
    // waits for any more: the daemon stops without it.
    runtime.shutdown_timeout(Duration::from_millis(500));
    ended
}

async fn start(args: StartArgs) -> anyhow::Result<ExitCode> {
    if !(args.url.starts_with("http://") || args.url.starts_with("https://")) {
        anyhow::bail!(
            "--url must be an http:// or https:// URL, not {:?}",
            args.url
        );
    }
    let key = std::fs::read_to_string(&args.key_file)
        .with_context(|| format!("cannot read the key file {}", args.key_file.display()))?;
    let key = key.trim().to_string();
    if key.is_empty() {
        anyhow::bail!("the key file {} is empty", args.key_file.display());
    }
    let tags = abode_api::parse_provisioner_tags(&args.tags)
        .map_err(|error| anyhow::anyhow!("--tag: {error}"))?;
    let passed_env = abode_terraform::run::PassedEnv::new(&args.terraform.terraform_env)
        .context("--terraform-env")?;
    // Its work dirs hold states and plans.
    let (data_dir, mirror_dir) =
        prepare_data_dir(args.data_dir, args.terraform.provider_mirror.clone())?;
    let volumes_dir = match args.volumes_dir {
        Some(dir) => absolute(dir)?,
        None => data_dir.join("volumes"),
    };
    let name = args.name.unwrap_or_else(host_name);
    let terraform_env = passed_env.from_process();
    let agent_binary = std::env::current_exe().context("cannot locate the abode executable")?;
    let process_logs_dir = data_dir.join("process-logs");
    let sandbox = machine::set_up_sandbox(
        &args.terraform.sandbox(),
        &machine::Machine {
            data_dir: &data_dir,
            volumes_dir: &volumes_dir,
            process_logs_dir: &process_logs_dir,
            provider_mirror: &mirror_dir,
            agent_binary: &agent_binary,
            terraform_env: &terraform_env,
            secrets: &[args.key_file.as_path()],
        },
    )?;
    let (isolation, process_supervisor) = sandbox.unzip();
    let config = abode_provisionerd::DaemonConfig {
        url: args.url,
        key,
        tags,
        concurrency: usize::from(args.concurrency),
        data_dir: data_dir.clone(),
        name,
        runner: abode_provisionerd::RunnerConfig {
            work_dir: data_dir.join("work"),
            volumes_dir,
            process_logs_dir,
            provider_mirror: Some(mirror_dir),
            // Agents run this same executable (`abode agent`).
            agent_binary: Some(agent_binary),
            ca_cert: abode_tls::added_authorities_pem(),
            terraform_env,
            cancel_grace: Duration::from_secs(args.terraform.cancel_grace),
            isolation,
            process_supervisor,
        },
    };
    let (shutdown, stopping) = tokio::sync::watch::channel(false);
    let daemon = tokio::spawn(abode_provisionerd::run(config, stopping));
    tokio::pin!(daemon);
    tokio::select! {
        ended = &mut daemon => {
            ended.context("the provisioner stopped unexpectedly")??;
            return Ok(ExitCode::SUCCESS);
        }
        signal = abode_api::wait_for_signal() => signal?,
    }
    tracing::info!("shutting down: interrupting running builds");
    let _ = shutdown.send(true);
    daemon
        .await
        .context("the provisioner stopped unexpectedly")??;
    Ok(ExitCode::SUCCESS)
}

/// This machine's name, for the daemon's id.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "provisioner".to_string())
}
