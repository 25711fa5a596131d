// This file is part of the tf-provider project
//
// Copyright (C) ANEO, 2024-2024. All rights reserved.
//
// Licensed under the Apache License, Version 2.0 (the "License")
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

//! [`Server`] module

use std::collections::HashMap;
use std::env;
use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Result};
use base64::Engine;
use futures::TryFutureExt;
use rcgen::{BasicConstraints, IsCa};
use time::ext::NumericalDuration;
use tokio::try_join;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Identity, ServerTlsConfig};
use tower_http::trace::TraceLayer;

use crate::function::DynamicFunction;
use crate::plugin::grpc_broker_server::GrpcBrokerServer;
use crate::plugin::grpc_controller_server::GrpcControllerServer;
use crate::plugin::grpc_stdio_server::GrpcStdioServer;
use crate::schema::FunctionSchema;
use crate::tfplugin6::provider_server::ProviderServer;

use crate::data_source::DynamicDataSource;
use crate::plugin::GrpcIo;
use crate::provider::DynamicProvider;
use crate::resource::DynamicResource;
use crate::{schema::Schema, Diagnostics};

const CORE_PROTOCOL_VERSION: u8 = 1;

/// TF provider server
pub(crate) struct Server {
    pub(crate) provider: Box<dyn DynamicProvider>,
    pub(crate) io: GrpcIo,
    pub(crate) cancellation_token: CancellationToken,

    pub(crate) init_diags: Diagnostics,
    pub(crate) schema: Option<Schema>,
    pub(crate) meta_schema: Option<Schema>,
    pub(crate) resources: HashMap<String, (Box<dyn DynamicResource>, Schema)>,
    pub(crate) data_sources: HashMap<String, (Box<dyn DynamicDataSource>, Schema)>,
    pub(crate) functions: HashMap<String, (Box<dyn DynamicFunction>, FunctionSchema)>,
}

impl Server {
    pub fn new(provider_name: String, provider: Box<dyn DynamicProvider>) -> Self {
        let mut diags = Default::default();
        let mut has_errors = false;
        let mut set_error = || {
            has_errors = true;
            None
        };
        let schema = provider.schema(&mut diags).or_else(&mut set_error);
        let meta_schema = provider.meta_schema(&mut diags).or_else(&mut set_error);
        let resources = provider
            .get_resources(&mut diags)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(name, resource)| {
                let schema = resource.schema(&mut diags).or_else(&mut set_error)?;
                Some((format!("{}_{}", provider_name, name), (resource, schema)))
            })
            .collect();
        let data_sources = provider
            .get_data_sources(&mut diags)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(name, data_source)| {
                let schema = data_source.schema(&mut diags).or_else(&mut set_error)?;
                Some((format!("{}_{}", provider_name, name), (data_source, schema)))
            })
            .collect();
        let functions = provider
            .get_functions(&mut diags)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(name, function)| match function.schema(&mut diags) {
                Some(schema) => Some((name, (function, schema))),
                None => {
                    has_errors = true;
                    None
                }
            })
            .collect();

        if has_errors {
            diags.internal_error()
        }

        Self {
            provider,
            io: Default::default(),
            cancellation_token: Default::default(),
            init_diags: diags,
            schema,
            meta_schema,
            resources,
            data_sources,
            functions,
        }
    }

    pub(crate) fn get_resource<'a>(
        &'a self,
        diags: &mut Diagnostics,
        name: &str,
    ) -> Option<&'a dyn DynamicResource> {
        if let Some(resource) = self.resources.get(name) {
            Some(resource.0.as_ref())
        } else {
            diags.root_error_short(format!("Could not find resource `{}` in provider", name));
            None
        }
    }
    pub(crate) fn get_data_source<'a>(
        &'a self,
        diags: &mut Diagnostics,
        name: &str,
    ) -> Option<&'a dyn DynamicDataSource> {
        if let Some(data_source) = self.data_sources.get(name) {
            Some(data_source.0.as_ref())
        } else {
            diags.root_error_short(format!("Could not find data source `{}` in provider", name));
            None
        }
    }
    pub(crate) fn get_function<'a>(
        &'a self,
        diags: &mut Diagnostics,
        name: &str,
    ) -> Option<&'a dyn DynamicFunction> {
        if let Some(function) = self.functions.get(name) {
            Some(function.0.as_ref())
        } else {
            diags.root_error_short(format!("Could not find function `{}` in provider", name));
            None
        }
    }
}

/// Serve the provider
///
/// # Arguments
///
/// * `name` - Name of the provider to serve
/// * `provider` - Provider to be served
///
/// # Cancel Safety
///
/// It is not safe to cancel the output future
///
/// # See Also
///
/// [`serve_dynamic`]
pub async fn serve<U: ToString, V: DynamicProvider>(name: U, provider: V) -> Result<()> {
    serve_dynamic(name.to_string(), Box::new(provider)).await
}
/// Serve the provider
///
/// # Arguments
///
/// * `name` - Name of the provider to serve
/// * `provider` - Provider to be served
///
/// # Cancel Safety
///
/// It is not safe to cancel the output future
///
/// # See Also
///
/// [`serve`]
pub async fn serve_dynamic(name: String, provider: Box<dyn DynamicProvider>) -> Result<()> {
    let server = Arc::new(Server::new(name, provider));
    // ABODE PATCH (private socket): a unix socket in a directory only this user can
    // enter, instead of TCP on 127.0.0.1 where any local user could call the RPCs.
    let mut socket = PrivateSocket::bind()?;
    let endpoint = socket.path.to_string_lossy().into_owned();
    let incoming = socket.incoming()?;

    if let Ok(path) = env::var("PLUGIN_LOG_FILE") {
        let log_file = File::create(path)?;
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(Mutex::new(log_file))
            .init();
    }

    let tls_config = TlsConfig::new()?;

    let serve = tls_config
        .builder()?
        .layer(TraceLayer::new_for_grpc())
        .add_service(GrpcBrokerServer::new(server.clone()))
        .add_service(GrpcControllerServer::new(server.clone()))
        .add_service(GrpcStdioServer::new(server.clone()))
        .add_service(ProviderServer::new(server.clone()))
        .serve_with_incoming_shutdown(incoming, server.cancellation_token.cancelled());

    async fn info(endpoint: &str, der: &[u8]) -> Result<()> {
        println!(
            "{}|6|unix|{}|grpc|{}",
            CORE_PROTOCOL_VERSION,
            endpoint,
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(der),
        );
        Ok(())
    }

    let served = try_join!(
        serve.map_err(|e| anyhow!(e)),
        info(&endpoint, tls_config.cert.as_slice()),
    );
    drop(socket);
    served?;

    Ok(())
}

/// ABODE PATCH (in-process serving): a private socket bound ahead of serving,
/// so that its path can be handed to Terraform (`TF_REATTACH_PROVIDERS`)
/// before the provider is served on it by [`serve_bound`].
pub struct BoundSocket(PrivateSocket);

impl BoundSocket {
    /// Binds the socket as [`serve`] does (a 0600 socket in a fresh 0700
    /// directory under `PLUGIN_UNIX_SOCKET_DIR`, else the temporary directory).
    pub fn bind() -> Result<Self> {
        PrivateSocket::bind().map(BoundSocket)
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0.path
    }
}

/// ABODE PATCH (in-process serving): serves the provider on `socket`, in this
/// process, printing no handshake (its caller has given Terraform the socket),
/// until `shutdown` completes or Terraform asks it to stop; the socket and its
/// directory are removed then.
pub async fn serve_bound<U: ToString, V: DynamicProvider>(
    name: U,
    provider: V,
    socket: BoundSocket,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    let server = Arc::new(Server::new(name.to_string(), Box::new(provider)));
    let mut socket = socket.0;
    let incoming = socket.incoming()?;
    let cancelled = server.cancellation_token.clone();
    let stop = async move {
        tokio::select! {
            () = shutdown => {}
            () = cancelled.cancelled() => {}
        }
    };
    let served = tonic::transport::Server::builder()
        .add_service(GrpcBrokerServer::new(server.clone()))
        .add_service(GrpcControllerServer::new(server.clone()))
        .add_service(GrpcStdioServer::new(server.clone()))
        .add_service(ProviderServer::new(server.clone()))
        .serve_with_incoming_shutdown(incoming, stop)
        .await;
    drop(socket);
    served.map_err(|e| anyhow!(e))
}

/// ABODE PATCH (private socket): the plugin's listening socket and the private
/// directory that holds it, both removed when the server stops.
///
/// The directory is created with mode 0700 under `PLUGIN_UNIX_SOCKET_DIR` (the
/// variable go-plugin uses for the same purpose) or the temporary directory, so
/// only this user (and root) can reach the socket; the socket itself is 0600.
struct PrivateSocket {
    dir: PathBuf,
    path: PathBuf,
    listener: Option<std::os::unix::net::UnixListener>,
}

impl PrivateSocket {
    fn bind() -> Result<Self> {
        let parent = env::var_os("PLUGIN_UNIX_SOCKET_DIR")
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(env::temp_dir);
        let dir = Self::create_private_dir(&parent)?;
        let path = dir.join("plugin.sock");
        let bound = std::os::unix::net::UnixListener::bind(&path).and_then(|listener| {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
            listener.set_nonblocking(true)?;
            Ok(listener)
        });
        match bound {
            Ok(listener) => Ok(Self {
                dir,
                path,
                listener: Some(listener),
            }),
            Err(err) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(anyhow!("cannot listen on {}: {err}", path.display()))
            }
        }
    }

    fn create_private_dir(parent: &std::path::Path) -> Result<PathBuf> {
        let mut builder = std::fs::DirBuilder::new();
        builder.mode(0o700);
        let pid = std::process::id();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.subsec_nanos())
            .unwrap_or_default();
        for attempt in 0..100u32 {
            let dir = parent.join(format!("tf-provider-{pid}-{nanos:x}-{attempt}"));
            match builder.create(&dir) {
                Ok(()) => return Ok(dir),
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(err) => {
                    return Err(anyhow!(
                        "cannot create the plugin socket directory {}: {err}",
                        dir.display()
                    ))
                }
            }
        }
        Err(anyhow!(
            "cannot create a plugin socket directory in {}",
            parent.display()
        ))
    }

    fn incoming(&mut self) -> Result<UnixListenerStream> {
        let listener = self
            .listener
            .take()
            .ok_or_else(|| anyhow!("the plugin socket is already served"))?;
        Ok(UnixListenerStream::new(tokio::net::UnixListener::from_std(
            listener,
        )?))
    }
}

impl Drop for PrivateSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

struct TlsConfig {
    server: Option<ServerTlsConfig>,
    cert: Vec<u8>,
}

impl TlsConfig {
    fn new() -> Result<Self> {
        let env_cert = env::var("PLUGIN_CLIENT_CERT").unwrap_or_default();
        if env_cert.is_empty() {
            return Ok(Self {
                server: None,
                cert: Default::default(),
            });
        }

        // Read the client certificate
        let client_cert = tonic::transport::Certificate::from_pem(env_cert);

        // Parameters to generate the server certificate
        let mut cp = rcgen::CertificateParams::new(["localhost".to_string()])?;
        cp.not_before = time::OffsetDateTime::now_utc().saturating_sub(30.seconds());
        cp.not_after = time::OffsetDateTime::now_utc().saturating_add((30 * 365).days());
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::OrganizationName, "Hashicorp");
        dn.push(rcgen::DnType::CommonName, "localhost");
        cp.distinguished_name = dn;
        cp.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        cp.key_usages = vec![
            rcgen::KeyUsagePurpose::DigitalSignature,
            rcgen::KeyUsagePurpose::KeyEncipherment,
            rcgen::KeyUsagePurpose::KeyAgreement,
            rcgen::KeyUsagePurpose::KeyCertSign,
        ];
        cp.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        ];
        cp.key_identifier_method = rcgen::KeyIdMethod::Sha512;

        // Generate the server certificate and its keys.
        // ABODE PATCH (cheaper certificate): P-256 instead of P-384, generated at
        // every start of the provider, which Terraform starts several times a build.
        let keypair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
        let server_cert = cp.self_signed(&keypair)?;

        let tls_config = ServerTlsConfig::new()
            .client_ca_root(client_cert)
            .client_auth_optional(true)
            .identity(Identity::from_pem(
                server_cert.pem(),
                keypair.serialize_pem(),
            ));

        Ok(Self {
            server: Some(tls_config),
            cert: server_cert.der().to_vec(),
        })
    }

    fn builder(&self) -> Result<tonic::transport::server::Server> {
        if let Some(ref tls_config) = &self.server {
            Ok(tonic::transport::server::Server::builder().tls_config(tls_config.clone())?)
        } else {
            Ok(tonic::transport::server::Server::builder())
        }
    }
}
