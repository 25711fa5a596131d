//! The abode Terraform provider (source address `abode/abode`).
//!
//! Templates use it to learn what the platform is doing (which workspace, which
//! owner, start or stop), to declare the agent that connects back, to annotate
//! what must never be destroyed (`abode_protect`, read by the plan guard), and to
//! run a whole workspace on one machine (`abode_volume`, `abode_process`).
//!
//! The plugin protocol (gRPC, protocol 6) comes from the `tf-provider` crate; this
//! crate only holds Abode's schemas and behaviour. The `abode` binary serves it
//! when Terraform starts it under the provider's file name.
//!
//! Each resource states only what is its own (schema, config checks, defaults,
//! plan-time values and the side effects of `abode_volume` and `abode_process`)
//! as a `plumbing::ResourceType`, each data source its schema, checks and read
//! as a `plumbing::DataSourceType`; `plumbing::Plumbing` serves every one of
//! them to Terraform with the same plumbing (ids, plans, update, import).
//!
//! # How it is built and run
//!
//! The plugin protocol (gRPC, protocol 6, go-plugin's handshake) comes from the
//! `tf-provider` crate, so Abode holds only schemas and behaviour. Its
//! `build.rs` compiles Terraform's `.proto` files with tonic-build, which needs
//! `protoc` at build time (`scripts/bootstrap.sh` installs it). We chose it
//! over writing the protocol ourselves to spend the time on the platform, and
//! carry three patches to it in `third_party/tf-provider` (`ABODE-PATCHES.md`,
//! applied through `[patch.crates-io]`): a Unix socket in a private directory
//! instead of TCP on 127.0.0.1, a P-256 certificate instead of P-384, and
//! `get_provider_schema_optional`.
//!
//! The provider is its own small executable, `terraform-provider-abode`
//! (`crates/abode/src/provider_only.rs`, a second binary of the `abode` package
//! that links only this crate): Terraform hashes the provider's whole file at
//! every command and starts it several times per plan. `abode provider install`
//! (and the server at start-up) copies it from beside `abode` into a filesystem
//! mirror (`registry.terraform.io/abode/abode/<version>/<os_arch>/`), and a
//! generated CLI configuration names that mirror. Without the small file beside
//! it, `abode` installs itself.
//!
//! Plugin TLS is off in Abode's runs (`TF_DISABLE_PLUGIN_TLS=1` in
//! `abode-terraform`'s automation environment). What TLS would keep out is
//! another local process calling a provider; the private socket already keeps
//! out every other user, and a process of Abode's own user can replace the
//! mirror's provider, read the work dirs or edit the state, so TLS would guard
//! nothing a compromised Abode user could not take another way. Every provider
//! of every run (go-plugin's, whose socket permissions follow the umask, and
//! ours) puts its socket in `PLUGIN_UNIX_SOCKET_DIR`, which Abode sets to a
//! directory of its user's that no one else may enter (mode 0700, checked at
//! start). It saved about 30 ms per plan.
//!
//! # What it keeps
//!
//! - While a build runs, only processes of Abode's user (and root) can connect
//!   to the abode provider: it listens on no TCP port, only on a 0600 socket in
//!   a 0700 directory (`crates/abode/tests/e2e_provider_socket.rs`).
//! - `abode_protect` is a pure annotation: its create, read and delete touch
//!   nothing; its meaning belongs to the guard.
//! - A volume's data is removed only by its destroy; a process is identified by
//!   pid plus start time, so a reused pid is never killed. A volume is its name
//!   under the volumes dir of the machine running the build (`path` is worked
//!   out at every read, plan and destroy, never taken from the state): nothing
//!   outside that dir is created or removed, and a copied data dir manages only
//!   its own volumes (`e2e_fencing`).

mod agent;
mod app;
mod backtrace;
mod env;
mod external_auth;
pub mod launch;
mod metadata;
mod parameter;
mod plumbing;
mod preset;
mod process;
mod protect;
mod schema;
mod script;
mod volume;
mod workspace;

use std::collections::HashMap;

use async_trait::async_trait;
use tf_provider::schema::{Block, Description, Schema};
use tf_provider::value::ValueEmpty;
use tf_provider::{DynamicDataSource, DynamicResource, Provider};

use plumbing::Plumbing;

pub use abode_contract::cron::{validate_cron, CronError};
pub use parameter::{check_parameter_value, ParameterDefinition};

/// The provider's local name: resource types are `abode_<name>`.
pub const PROVIDER_NAME: &str = "abode";

/// Set by Terraform (go-plugin) for every plugin it starts.
const MAGIC_COOKIE: &str = "TF_PLUGIN_MAGIC_COOKIE";

/// Why the provider could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("this is the abode Terraform provider; Terraform starts it (run `abode provider install` and use the CLI configuration it prints)")]
    NotStartedByTerraform,
    #[error("cannot start the provider's async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("the provider's plugin server failed: {0}")]
    Server(String),
}

/// Serves the provider over Terraform's plugin protocol until Terraform stops it.
///
/// The plugin listens on a unix socket in a directory only this user can enter
/// (the patched tf-provider in `third_party/`): while a build runs, no other local
/// user can call the provider's RPCs. Refuses to start outside Terraform, whose
/// handshake it prints on stdout.
pub fn serve() -> Result<(), ServeError> {
    if std::env::var_os(MAGIC_COOKIE).is_none() {
        return Err(ServeError::NotStartedByTerraform);
    }
    backtrace::silence();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    runtime
        .block_on(tf_provider::serve(PROVIDER_NAME, AbodeProvider))
        .map_err(|err| ServeError::Server(format!("{err:#}")))
}

/// The provider itself: stateless, every operation reads the build context anew
/// from the environment Terraform passes on.
#[derive(Debug, Default, Clone, Copy)]
pub struct AbodeProvider;

#[async_trait]
impl Provider for AbodeProvider {
    type Config<'a> = ValueEmpty;
    type MetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut tf_provider::Diagnostics) -> Option<Schema> {
        Some(Schema {
            version: 1,
            block: Block {
                description: Description::plain(
                    "Abode's provider: the build's workspace and owner, parameters, presets, \
                     agents, protection annotations, and local volumes and processes. It takes \
                     no configuration: everything comes from the ABODE_* environment variables \
                     the platform sets (see docs/environment.md).",
                ),
                ..Default::default()
            },
        })
    }

    fn get_resources(
        &self,
        _diags: &mut tf_provider::Diagnostics,
    ) -> Option<HashMap<String, Box<dyn DynamicResource>>> {
        let resources: [(&str, Box<dyn DynamicResource>); 8] = [
            ("agent", Box::new(Plumbing(agent::AgentResource))),
            ("app", Box::new(Plumbing(app::AppResource))),
            ("env", Box::new(Plumbing(env::EnvResource))),
            ("protect", Box::new(Plumbing(protect::ProtectResource))),
            ("metadata", Box::new(Plumbing(metadata::MetadataResource))),
            ("volume", Box::new(Plumbing(volume::VolumeResource))),
            ("process", Box::new(Plumbing(process::ProcessResource))),
            ("script", Box::new(Plumbing(script::ScriptResource))),
        ];
        Some(
            resources
                .into_iter()
                .map(|(name, resource)| (name.to_string(), resource))
                .collect(),
        )
    }

    fn get_data_sources(
        &self,
        _diags: &mut tf_provider::Diagnostics,
    ) -> Option<HashMap<String, Box<dyn DynamicDataSource>>> {
        let data_sources: [(&str, Box<dyn DynamicDataSource>); 5] = [
            (
                "external_auth",
                Box::new(Plumbing(external_auth::ExternalAuthDataSource)),
            ),
            (
                "workspace",
                Box::new(Plumbing(workspace::WorkspaceDataSource)),
            ),
            (
                "workspace_owner",
                Box::new(Plumbing(workspace::OwnerDataSource)),
            ),
            (
                "parameter",
                Box::new(Plumbing(parameter::ParameterDataSource)),
            ),
            (
                "workspace_preset",
                Box::new(Plumbing(preset::PresetDataSource)),
            ),
        ];
        Some(
            data_sources
                .into_iter()
                .map(|(name, source)| (name.to_string(), source))
                .collect(),
        )
    }
}
