//! Blocking HTTP calls to Abode's API, one method per endpoint of docs/api.md.
//!
//! Blocking keeps the CLI and the agent simple: each command does a handful of
//! sequential calls. Every refusal becomes [`ClientError::Api`] carrying the
//! server's one-line message, so the CLI can print it as is.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::error::ClientError;
use abode_sdk::{
    requests, AgentHeartbeat, AgentMe, ApiToken, AuditEvent, Build, BuildAnswer, CreatedApiToken,
    CreatedProvisionerKey, CreatedWorkspace, FailedNotification, Group, GroupMember, LogPage,
    LoginResponse, MarkedAnswer, Moved, Notification, NotificationAnswer, NotificationSetting,
    NotificationSettingsAnswer, Orphaned, PolicyAnswer, PrebuildPool, Preview, PreviewAnswer,
    PreviewPage, PreviewReport, Protection, ProtectionsAnswer, Provisioner, ProvisionerKey, Quota,
    ReleasedAnswer, RevokedTokenAnswer, ScheduleAnswer, ScheduleSpec, Template, TemplateAnswer,
    TemplatePermissions, TemplatePolicy, TemplatePolicyPatch, TemplatePresets, TemplateVersion,
    TemplateVersionDetail, TemplateVersionResponse, Transition, Unlocked, User, UserAnswer,
    VersionChoice, VersionsAnswer, Workspace, WorkspaceAnswer, WorkspaceSchedule, WorkspaceSharing,
};

/// The largest page the server serves; the client asks for no more.
const MAX_PAGE: usize = 200;
/// Long enough for a push, whose answer waits for `terraform init` + `validate`.
const READ_TIMEOUT: Duration = Duration::from_secs(600);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What a delete says of the unsaved work the workspace's last report
/// shows (docs/cli.md, `abode delete`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnsavedConsent {
    /// Nothing: a delete that would lose unsaved work is held.
    None,
    /// Delete whatever the report shows (`--discard-unsaved`).
    Discard,
    /// Delete if the report still has this digest (`--confirm-unsaved`).
    Confirm(String),
}

/// A connection to one Abode server, optionally authenticated with a bearer token.
#[derive(Clone)]
pub struct Client {
    base_url: String,
    token: Option<String>,
    http: ureq::Agent,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.base_url)
            .field("token", &self.token.as_ref().map(|_| "(hidden)"))
            .finish()
    }
}

/// The `{workspace}` path segment: a name, or `owner/name` with the slash encoded.
pub fn workspace_segment(workspace: &str) -> String {
    abode_sdk::percent_encode(workspace)
}

/// Parameter values as the wire carries them: JSON strings.
fn string_values(parameters: &BTreeMap<String, String>) -> BTreeMap<String, serde_json::Value> {
    parameters
        .iter()
        .map(|(name, value)| (name.clone(), serde_json::Value::String(value.clone())))
        .collect()
}

/// Abode's one trust, read when the first TLS connection is made: a
/// command that speaks plain HTTP (most, on a local server) never reads
/// the system's certificate store, which takes a process tens of
/// milliseconds.
struct TrustOnFirstTls;

impl ureq::TlsConnector for TrustOnFirstTls {
    fn connect(
        &self,
        dns_name: &str,
        io: Box<dyn ureq::ReadWrite>,
    ) -> Result<Box<dyn ureq::ReadWrite>, ureq::Error> {
        abode_tls::client_config().connect(dns_name, io)
    }
}

impl Client {
    /// A client for the server at `base_url` (e.g. `http://127.0.0.1:7080`).
    pub fn new(base_url: &str, token: Option<String>) -> Self {
        let http = ureq::AgentBuilder::new()
            .timeout_connect(CONNECT_TIMEOUT)
            .timeout_read(READ_TIMEOUT)
            .user_agent(crate::USER_AGENT)
            .tls_connector(Arc::new(TrustOnFirstTls))
            .build();
        Client {
            base_url: base_url.trim_end_matches('/').to_string(),
            token,
            http,
        }
    }

    /// The server's base URL, as given.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    fn request(&self, method: &str, path: &str) -> ureq::Request {
        let url = format!("{}/api/v1{}", self.base_url, path);
        let request = self.http.request(method, &url);
        match &self.token {
            Some(token) => request.set("Authorization", &format!("Bearer {token}")),
            None => request,
        }
    }

    fn finish<T: DeserializeOwned>(
        &self,
        what: &str,
        result: Result<ureq::Response, ureq::Error>,
    ) -> Result<T, ClientError> {
        let response = self.check(result)?;
        response
            .into_json::<T>()
            .map_err(|err| ClientError::BadResponse {
                what: what.to_string(),
                reason: err.to_string(),
            })
    }

    fn check(
        &self,
        result: Result<ureq::Response, ureq::Error>,
    ) -> Result<ureq::Response, ClientError> {
        match result {
            Ok(response) => Ok(response),
            Err(ureq::Error::Status(status, response)) => {
                let body = response.into_string().unwrap_or_default();
                Err(
                    match serde_json::from_str::<abode_sdk::ErrorEnvelope>(&body) {
                        Ok(abode_sdk::ErrorEnvelope { error }) => ClientError::Api {
                            status,
                            code: error.code,
                            message: error.message,
                        },
                        Err(_) => ClientError::Api {
                            status,
                            code: "http".into(),
                            message: format!(
                                "the server answered HTTP {status} without an error message"
                            ),
                        },
                    },
                )
            }
            Err(ureq::Error::Transport(transport)) => {
                let server = self
                    .base_url
                    .split_once("://")
                    .map_or(self.base_url.as_str(), |(_, rest)| rest);
                if let Some(line) = abode_tls::explain(&transport, server) {
                    return Err(ClientError::Certificate(line));
                }
                Err(ClientError::Unreachable {
                    url: self.base_url.clone(),
                    reason: transport_reason(&transport),
                })
            }
        }
    }

    /// `GET /health`: whether a server answers at all.
    pub fn health(&self) -> Result<abode_sdk::Health, ClientError> {
        self.finish("GET /health", self.request("GET", "/health").call())
    }

    /// Creates the first user (the owner); refused once any user exists.
    pub fn create_first_user(
        &self,
        username: &str,
        email: &str,
        password: &str,
    ) -> Result<LoginResponse, ClientError> {
        let body = requests::NewUser {
            username: username.to_string(),
            email: email.to_string(),
            password: password.to_string(),
            roles: None,
            role: None,
        };
        self.finish(
            "POST /users/first",
            self.request("POST", "/users/first").send_json(body),
        )
    }

    /// Logs in with a password and returns a new session token.
    pub fn login(&self, username: &str, password: &str) -> Result<LoginResponse, ClientError> {
        let body = requests::Login {
            username: username.to_string(),
            password: password.to_string(),
        };
        self.finish(
            "POST /login",
            self.request("POST", "/login").send_json(body),
        )
    }

    /// How people sign in to this server (asked without a session).
    pub fn sign_in_methods(&self) -> Result<abode_sdk::SignInMethods, ClientError> {
        self.finish(
            "GET /sign-in-methods",
            self.request("GET", "/sign-in-methods").call(),
        )
    }

    /// Trades the one-time code of a single sign-on for a session.
    pub fn oidc_cli_token(&self, code: &str) -> Result<LoginResponse, ClientError> {
        let body = requests::OidcCode {
            code: code.to_string(),
        };
        self.finish(
            "POST /oidc/cli-token",
            self.request("POST", "/oidc/cli-token").send_json(body),
        )
    }

    /// Revokes the token this client sends (the session, or an API token):
    /// the server answers 401 to it from then on.
    pub fn logout(&self) -> Result<(), ClientError> {
        self.check(
            self.request("POST", "/logout")
                .send_json(requests::Empty {}),
        )
        .map(drop)
    }

    /// Creates a named API token (with a session, not an API token); the
    /// answer holds the token, which the server never shows again.
    pub fn create_api_token(
        &self,
        body: &requests::NewApiToken,
    ) -> Result<CreatedApiToken, ClientError> {
        self.finish(
            "POST /tokens",
            self.request("POST", "/tokens").send_json(body),
        )
    }

    /// The caller's API tokens that are not revoked, by name.
    pub fn api_tokens(&self) -> Result<Vec<ApiToken>, ClientError> {
        self.pages("GET /tokens", "/tokens", "tokens", &[], None)
    }

    /// Revokes the caller's API token `name`.
    pub fn revoke_api_token(&self, name: &str) -> Result<ApiToken, ClientError> {
        let path = format!("/tokens/{}", workspace_segment(name));
        let body: RevokedTokenAnswer =
            self.finish("DELETE /tokens", self.request("DELETE", &path).call())?;
        Ok(body.revoked)
    }

    /// The user the token belongs to.
    pub fn me(&self) -> Result<User, ClientError> {
        let body: UserAnswer =
            self.finish("GET /users/me", self.request("GET", "/users/me").call())?;
        Ok(body.user)
    }

    /// Creates a user holding `roles` (owners; user-admins create members).
    pub fn create_user(
        &self,
        username: &str,
        email: &str,
        password: &str,
        roles: &[String],
    ) -> Result<User, ClientError> {
        let body = requests::NewUser {
            username: username.to_string(),
            email: email.to_string(),
            password: password.to_string(),
            roles: Some(roles.to_vec()),
            role: None,
        };
        let body: UserAnswer = self.finish(
            "POST /users",
            self.request("POST", "/users").send_json(body),
        )?;
        Ok(body.user)
    }

    /// Adds and removes roles of a user (owners only); the answer holds the
    /// roles they hold afterwards.
    pub fn change_roles(
        &self,
        username: &str,
        add: &[String],
        remove: &[String],
    ) -> Result<User, ClientError> {
        let path = format!("/users/{}/roles", workspace_segment(username));
        let body: UserAnswer = self.finish(
            "POST /users/{name}/roles",
            self.request("POST", &path).send_json(requests::RoleChange {
                add: add.to_vec(),
                remove: remove.to_vec(),
            }),
        )?;
        Ok(body.user)
    }

    /// Uploads a packed template folder as a new version of `name`.
    pub fn push_template(
        &self,
        name: &str,
        archive: &[u8],
        activate: bool,
        message: Option<&str>,
    ) -> Result<TemplateVersionResponse, ClientError> {
        self.push_template_with(name, archive, activate, message, false, &[])
    }

    /// Pushes a version; `strict` asks the server to refuse it when its lint
    /// finds an error-level hazard.
    pub fn push_template_with(
        &self,
        name: &str,
        archive: &[u8],
        activate: bool,
        message: Option<&str>,
        strict: bool,
        provisioner_tags: &[String],
    ) -> Result<TemplateVersionResponse, ClientError> {
        let path = format!("/templates/{}/versions", workspace_segment(name));
        let mut request = self
            .request("POST", &path)
            .set("Content-Type", "application/gzip")
            .query("activate", if activate { "true" } else { "false" });
        if let Some(message) = message {
            request = request.query("message", message);
        }
        if strict {
            request = request.query("strict", "true");
        }
        if !provisioner_tags.is_empty() {
            request = request.query("provisioner_tags", &provisioner_tags.join(","));
        }
        self.finish("template push", request.send_bytes(archive))
    }

    /// One version of a template with the lint's findings it keeps.
    pub fn template_version(
        &self,
        name: &str,
        number: u64,
    ) -> Result<TemplateVersionDetail, ClientError> {
        let path = format!("/templates/{}/versions/{number}", workspace_segment(name));
        self.finish("GET template version", self.request("GET", &path).call())
    }

    /// Every server's provisioners, by server and name.
    pub fn provisioners(&self) -> Result<Vec<Provisioner>, ClientError> {
        self.pages(
            "GET /provisioners",
            "/provisioners",
            "provisioners",
            &[],
            None,
        )
    }

    /// Creates a provisioner key (owners) whose daemons offer `tags`
    /// (`key=value`); the answer holds the secret, which the server never
    /// shows again.
    pub fn create_provisioner_key(
        &self,
        name: &str,
        tags: &[String],
    ) -> Result<CreatedProvisionerKey, ClientError> {
        self.finish(
            "POST /provisioner-keys",
            self.request("POST", "/provisioner-keys")
                .send_json(requests::NewProvisionerKey {
                    name: name.to_string(),
                    tags: tags.to_vec(),
                }),
        )
    }

    /// Every provisioner key, by name (owners).
    pub fn provisioner_keys(&self) -> Result<Vec<ProvisionerKey>, ClientError> {
        self.pages(
            "GET /provisioner-keys",
            "/provisioner-keys",
            "provisioner_keys",
            &[],
            None,
        )
    }

    /// Deletes the provisioner key `name` (owners): daemons using it are
    /// refused from then on.
    pub fn delete_provisioner_key(&self, name: &str) -> Result<(), ClientError> {
        let path = format!("/provisioner-keys/{}", workspace_segment(name));
        self.check(self.request("DELETE", &path).call()).map(drop)
    }

    /// Creates a group (owners, user-admins).
    pub fn create_group(&self, group: &requests::NewGroup) -> Result<Group, ClientError> {
        self.finish(
            "POST /groups",
            self.request("POST", "/groups").send_json(group),
        )
    }

    /// Every group, by name.
    pub fn groups(&self) -> Result<Vec<Group>, ClientError> {
        self.pages("GET /groups", "/groups", "groups", &[], None)
    }

    /// The group `name`.
    pub fn group(&self, name: &str) -> Result<Group, ClientError> {
        let path = format!("/groups/{}", workspace_segment(name));
        self.finish("GET /groups/{name}", self.request("GET", &path).call())
    }

    /// Retained resources, every page: one's own, or everyone's (`all`);
    /// open ones, or closed ones too (`closed`).
    pub fn retained_resources(
        &self,
        all: bool,
        closed: bool,
        limit: Option<usize>,
    ) -> Result<Vec<abode_sdk::RetainedResource>, ClientError> {
        let mut filters = Vec::new();
        if all {
            filters.push(("all", "true"));
        }
        if closed {
            filters.push(("closed", "true"));
        }
        self.pages("GET /retained", "/retained", "retained", &filters, limit)
    }

    /// One retained resource.
    pub fn retained_resource(&self, id: &str) -> Result<abode_sdk::RetainedResource, ClientError> {
        let path = format!("/retained/{}", workspace_segment(id));
        self.finish("GET /retained/{id}", self.request("GET", &path).call())
    }

    /// Hands a retained resource to `user`.
    pub fn assign_retained(
        &self,
        id: &str,
        user: &str,
    ) -> Result<abode_sdk::RetainedResource, ClientError> {
        let path = format!("/retained/{}/assign", workspace_segment(id));
        let body = abode_sdk::requests::AssignRetained { user: user.into() };
        self.finish(
            "POST /retained/{id}/assign",
            self.request("POST", &path).send_json(body),
        )
    }

    /// Queues the destroy of a retained resource, or with `digest` confirms
    /// its held plan.
    pub fn destroy_retained(
        &self,
        id: &str,
        digest: Option<&str>,
    ) -> Result<abode_sdk::RetainedResource, ClientError> {
        let path = format!("/retained/{}/destroy", workspace_segment(id));
        let body = requests::DestroyRetained {
            digest: digest.map(str::to_string),
        };
        self.finish(
            "POST /retained/{id}/destroy",
            self.request("POST", &path).send_json(body),
        )
    }

    /// Brings a snapshot's files back into the stopped workspace `to`.
    pub fn restore_retained(
        &self,
        id: &str,
        to: &str,
    ) -> Result<abode_sdk::RestoredSnapshot, ClientError> {
        let path = format!("/retained/{}/restore", workspace_segment(id));
        let body = requests::RestoreRetained { to: to.into() };
        self.finish(
            "POST /retained/{id}/restore",
            self.request("POST", &path).send_json(body),
        )
    }

    /// Keeps a retained resource `by` (`30d`) longer.
    pub fn extend_retained(
        &self,
        id: &str,
        by: &str,
    ) -> Result<abode_sdk::RetainedResource, ClientError> {
        let path = format!("/retained/{}/extend", workspace_segment(id));
        let body = abode_sdk::requests::ExtendRetained { by: by.into() };
        self.finish(
            "POST /retained/{id}/extend",
            self.request("POST", &path).send_json(body),
        )
    }

    /// `username`'s quota (`None`: one's own).
    pub fn quota(&self, username: Option<&str>) -> Result<Quota, ClientError> {
        match username {
            None => self.finish(
                "GET /users/me/quota",
                self.request("GET", "/users/me/quota").call(),
            ),
            Some(name) => {
                let path = format!("/users/{}/quota", workspace_segment(name));
                self.finish("GET /users/{name}/quota", self.request("GET", &path).call())
            }
        }
    }

    /// Every member of the group `name`, by username.
    pub fn group_members(&self, name: &str) -> Result<Vec<GroupMember>, ClientError> {
        let path = format!("/groups/{}/members", workspace_segment(name));
        self.pages("GET /groups/{name}/members", &path, "members", &[], None)
    }

    /// Changes the group `name`'s settings.
    pub fn edit_group(&self, name: &str, edit: &requests::GroupEdit) -> Result<Group, ClientError> {
        let path = format!("/groups/{}", workspace_segment(name));
        self.finish(
            "PATCH /groups/{name}",
            self.request("PATCH", &path).send_json(edit),
        )
    }

    /// Deletes the group `name`.
    pub fn delete_group(&self, name: &str) -> Result<(), ClientError> {
        let path = format!("/groups/{}", workspace_segment(name));
        self.check(self.request("DELETE", &path).call()).map(drop)
    }

    /// Adds and removes members of the group `name` (usernames).
    pub fn change_group_members(
        &self,
        name: &str,
        change: &requests::GroupMembersChange,
    ) -> Result<Group, ClientError> {
        let path = format!("/groups/{}/members", workspace_segment(name));
        self.finish(
            "PATCH /groups/{name}/members",
            self.request("PATCH", &path).send_json(change),
        )
    }

    /// The access list of template `name`.
    pub fn template_permissions(&self, name: &str) -> Result<TemplatePermissions, ClientError> {
        let path = format!("/templates/{}/permissions", workspace_segment(name));
        self.finish(
            "GET /templates/{name}/permissions",
            self.request("GET", &path).call(),
        )
    }

    /// Sets one entry of template `name`'s access list; the list after.
    pub fn set_template_permission(
        &self,
        name: &str,
        change: &requests::TemplatePermissionChange,
    ) -> Result<TemplatePermissions, ClientError> {
        let path = format!("/templates/{}/permissions", workspace_segment(name));
        self.finish(
            "PUT /templates/{name}/permissions",
            self.request("PUT", &path).send_json(change),
        )
    }

    /// The share list of workspace `workspace` (`name` or `owner/name`).
    pub fn workspace_sharing(&self, workspace: &str) -> Result<WorkspaceSharing, ClientError> {
        let path = format!("/workspaces/{}/sharing", workspace_segment(workspace));
        self.finish(
            "GET /workspaces/{ws}/sharing",
            self.request("GET", &path).call(),
        )
    }

    /// Sets or removes one entry of a workspace's share list; the list after.
    pub fn set_workspace_share(
        &self,
        workspace: &str,
        change: &requests::WorkspaceShareChange,
    ) -> Result<WorkspaceSharing, ClientError> {
        let path = format!("/workspaces/{}/sharing", workspace_segment(workspace));
        self.finish(
            "PUT /workspaces/{ws}/sharing",
            self.request("PUT", &path).send_json(change),
        )
    }

    /// Every template, by name.
    pub fn templates(&self, limit: Option<usize>) -> Result<Vec<Template>, ClientError> {
        self.pages("GET /templates", "/templates", "templates", &[], limit)
    }

    /// Follows a list's pages (`next` to `after`) until the last one, or
    /// until `limit` rows are read; `filters` are the list's query
    /// parameters (docs/api.md).
    fn pages<T: DeserializeOwned>(
        &self,
        what: &str,
        path: &str,
        key: &str,
        filters: &[(&str, &str)],
        limit: Option<usize>,
    ) -> Result<Vec<T>, ClientError> {
        let mut items: Vec<T> = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let wanted = match limit {
                Some(limit) if items.len() >= limit => return Ok(items),
                Some(limit) => limit - items.len(),
                None => MAX_PAGE,
            };
            let mut request = self
                .request("GET", path)
                .query("limit", &wanted.min(MAX_PAGE).to_string());
            for (name, value) in filters {
                request = request.query(name, value);
            }
            if let Some(after) = &after {
                request = request.query("after", after);
            }
            let mut body: serde_json::Map<String, serde_json::Value> =
                self.finish(what, request.call())?;
            let bad = |reason: String| ClientError::BadResponse {
                what: what.to_string(),
                reason,
            };
            let page: Vec<T> = serde_json::from_value(body.remove(key).unwrap_or_default())
                .map_err(|error| bad(error.to_string()))?;
            let next = match body.remove("next") {
                Some(serde_json::Value::String(next)) => Some(next),
                _ => None,
            };
            let empty = page.is_empty();
            items.extend(page);
            match next {
                // An empty page with a cursor would loop forever.
                Some(next) if !empty => after = Some(next),
                _ => return Ok(items),
            }
        }
    }

    /// One template.
    pub fn template(&self, name: &str) -> Result<Template, ClientError> {
        let path = format!("/templates/{}", workspace_segment(name));
        let body: TemplateAnswer =
            self.finish("GET template", self.request("GET", &path).call())?;
        Ok(body.template)
    }

    /// Deprecates a template (`PUT /templates/{name}/deprecation`): it takes
    /// no new workspaces; the template as it is now.
    pub fn deprecate_template(
        &self,
        name: &str,
        message: &str,
        replacement: Option<&str>,
    ) -> Result<Template, ClientError> {
        let path = format!("/templates/{}/deprecation", workspace_segment(name));
        let body: TemplateAnswer = self.finish(
            "PUT /templates/{name}/deprecation",
            self.request("PUT", &path)
                .send_json(requests::DeprecateTemplate {
                    message: message.to_string(),
                    replacement: replacement.map(str::to_string),
                }),
        )?;
        Ok(body.template)
    }

    /// Undeprecates a template (`DELETE /templates/{name}/deprecation`).
    pub fn undeprecate_template(&self, name: &str) -> Result<Template, ClientError> {
        let path = format!("/templates/{}/deprecation", workspace_segment(name));
        let body: TemplateAnswer = self.finish(
            "DELETE /templates/{name}/deprecation",
            self.request("DELETE", &path).call(),
        )?;
        Ok(body.template)
    }

    /// The versions of a template, by number.
    pub fn template_versions(&self, name: &str) -> Result<Vec<TemplateVersion>, ClientError> {
        let path = format!("/templates/{}/versions", workspace_segment(name));
        let body: VersionsAnswer =
            self.finish("GET template versions", self.request("GET", &path).call())?;
        Ok(body.versions)
    }

    /// The presets of version `version` of a template (default: the active one).
    pub fn template_presets(
        &self,
        name: &str,
        version: Option<u64>,
    ) -> Result<TemplatePresets, ClientError> {
        let mut path = format!("/templates/{}/presets", workspace_segment(name));
        if let Some(version) = version {
            path.push_str(&format!("?version={version}"));
        }
        self.finish("GET template presets", self.request("GET", &path).call())
    }

    /// Makes version `number` the one new workspaces and updates use.
    pub fn activate_version(
        &self,
        name: &str,
        number: u64,
    ) -> Result<abode_sdk::TemplateActivated, ClientError> {
        self.activate_version_acknowledging(name, number, None)
    }

    /// Activates version `number`, acknowledging its latest preview (the
    /// server refuses an activation whose preview would hold or block
    /// workspaces without it).
    pub fn activate_version_acknowledging(
        &self,
        name: &str,
        number: u64,
        preview: Option<&str>,
    ) -> Result<abode_sdk::TemplateActivated, ClientError> {
        let path = format!(
            "/templates/{}/versions/{number}/activate",
            workspace_segment(name)
        );
        self.finish(
            "activate version",
            self.request("POST", &path)
                .send_json(requests::ActivateVersion {
                    acknowledge_preview: preview.map(str::to_string),
                }),
        )
    }

    /// Starts a fleet preview of version `number` of template `name`, of the
    /// named workspaces or (none named) every live one not on it.
    pub fn start_preview(
        &self,
        name: &str,
        number: u64,
        workspaces: &[String],
    ) -> Result<Preview, ClientError> {
        let path = format!(
            "/templates/{}/versions/{number}/previews",
            workspace_segment(name)
        );
        let body: PreviewAnswer = self.finish(
            "start preview",
            self.request("POST", &path)
                .send_json(requests::StartPreview {
                    workspaces: workspaces.to_vec(),
                }),
        )?;
        Ok(body.preview)
    }

    /// The latest preview of version `number`, of the fleet or of named
    /// workspaces, without its results (`None`: never previewed).
    pub fn latest_preview_summary(
        &self,
        name: &str,
        number: u64,
    ) -> Result<Option<Preview>, ClientError> {
        let path = format!(
            "/templates/{}/versions/{number}/previews/latest",
            workspace_segment(name)
        );
        let page: PreviewPage = self.finish(
            "GET latest preview",
            self.request("GET", &path).query("limit", "1").call(),
        )?;
        Ok(page.preview)
    }

    /// The latest preview of version `number` with every result, read page
    /// by page (`None`: never previewed).
    pub fn latest_preview(
        &self,
        name: &str,
        number: u64,
    ) -> Result<Option<PreviewReport>, ClientError> {
        let path = format!(
            "/templates/{}/versions/{number}/previews/latest",
            workspace_segment(name)
        );
        let mut results = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let mut request = self
                .request("GET", &path)
                .query("limit", &MAX_PAGE.to_string());
            if let Some(after) = &after {
                request = request.query("after", after);
            }
            let page: PreviewPage = self.finish("GET latest preview", request.call())?;
            let Some(preview) = page.preview else {
                return Ok(None);
            };
            let empty = page.results.is_empty();
            results.extend(page.results);
            match page.next {
                Some(next) if !empty => after = Some(next),
                _ => return Ok(Some(PreviewReport { preview, results })),
            }
        }
    }

    /// Creates a workspace and its first (start) build, with `preset`'s
    /// values if given (else the server records the preset whose values are
    /// exactly the requested ones, if any).
    pub fn create_workspace(
        &self,
        name: &str,
        template: &str,
        preset: Option<&str>,
        parameters: &BTreeMap<String, String>,
        adopt: &[String],
    ) -> Result<CreatedWorkspace, ClientError> {
        let body = requests::NewWorkspace {
            name: name.to_string(),
            template: template.to_string(),
            preset: preset.map(str::to_string),
            parameters: string_values(parameters),
            adopt: adopt.to_vec(),
        };
        self.finish(
            "POST /workspaces",
            self.request("POST", "/workspaces").send_json(body),
        )
    }

    /// What a create of a workspace from `template` would cost a day, and
    /// how it sits in the caller's budget (nothing is created).
    pub fn estimate_create(
        &self,
        template: &str,
        preset: Option<&str>,
        parameters: &BTreeMap<String, String>,
    ) -> Result<abode_sdk::CreateEstimate, ClientError> {
        let body = abode_sdk::requests::EstimateCreate {
            preset: preset.map(str::to_string),
            parameters: string_values(parameters),
        };
        let path = format!(
            "/templates/{}/estimate",
            abode_sdk::percent_encode(template)
        );
        self.finish(
            "POST /templates/{name}/estimate",
            self.request("POST", &path).send_json(body),
        )
    }

    /// Every external auth provider, and whether the caller linked it.
    pub fn external_auth(&self) -> Result<Vec<abode_sdk::ExternalAuthLink>, ClientError> {
        self.finish(
            "GET /external-auth",
            self.request("GET", "/external-auth").call(),
        )
    }

    /// Starts linking the caller's account of provider `id`: the URL to open.
    pub fn start_external_auth(
        &self,
        id: &str,
    ) -> Result<abode_sdk::ExternalAuthStart, ClientError> {
        let path = format!("/external-auth/{}/link", abode_sdk::percent_encode(id));
        self.finish(
            "POST /external-auth/{id}/link",
            self.request("POST", &path).call(),
        )
    }

    /// Unlinks the caller's account of provider `id` (its tokens revoked).
    pub fn unlink_external_auth(
        &self,
        id: &str,
    ) -> Result<abode_sdk::ExternalAuthUnlinked, ClientError> {
        let path = format!("/external-auth/{}", abode_sdk::percent_encode(id));
        self.finish(
            "DELETE /external-auth/{id}",
            self.request("DELETE", &path).call(),
        )
    }

    /// The caller's workspaces (`all`: everyone's, for owners and admins).
    /// Workspaces, every page; `filters`: `all`, `owner`, `template`,
    /// `status`, `deleted` (docs/api.md).
    pub fn workspaces(
        &self,
        filters: &[(&str, &str)],
        limit: Option<usize>,
    ) -> Result<Vec<Workspace>, ClientError> {
        self.pages(
            "GET /workspaces",
            "/workspaces",
            "workspaces",
            filters,
            limit,
        )
    }

    /// One workspace, by name or `owner/name`.
    pub fn workspace(&self, workspace: &str) -> Result<Workspace, ClientError> {
        let path = format!("/workspaces/{}", workspace_segment(workspace));
        let body: WorkspaceAnswer =
            self.finish("GET workspace", self.request("GET", &path).call())?;
        Ok(body.workspace)
    }

    /// The scripts of the workspace's agents, with their latest run.
    pub fn workspace_scripts(
        &self,
        workspace: &str,
    ) -> Result<Vec<abode_sdk::WorkspaceScript>, ClientError> {
        let path = format!("/workspaces/{}/scripts", workspace_segment(workspace));
        let body: abode_sdk::WorkspaceScriptsAnswer =
            self.finish("GET workspace scripts", self.request("GET", &path).call())?;
        Ok(body.scripts)
    }

    /// The end of the output of a script's latest run.
    pub fn workspace_script_log(
        &self,
        workspace: &str,
        agent: &str,
        script: &str,
    ) -> Result<abode_sdk::ScriptLog, ClientError> {
        let path = format!("/workspaces/{}/scripts/log", workspace_segment(workspace));
        self.finish(
            "GET script log",
            self.request("GET", &path)
                .query("agent", agent)
                .query("script", script)
                .call(),
        )
    }

    /// The workspace's shared ports.
    pub fn port_shares(&self, workspace: &str) -> Result<Vec<abode_sdk::PortShare>, ClientError> {
        let path = format!("/workspaces/{}/port-shares", workspace_segment(workspace));
        let body: abode_sdk::PortSharesAnswer =
            self.finish("list port shares", self.request("GET", &path).call())?;
        Ok(body.port_shares)
    }

    /// Shares a port of the workspace (`agent`: which one, when several).
    pub fn share_port(
        &self,
        workspace: &str,
        port: u16,
        share: abode_sdk::apps::AppShare,
        agent: Option<&str>,
    ) -> Result<Option<abode_sdk::PortShare>, ClientError> {
        let path = format!(
            "/workspaces/{}/port-shares/{port}",
            workspace_segment(workspace)
        );
        let body = requests::SharePort {
            share,
            agent: agent.map(str::to_string),
        };
        let answer: abode_sdk::PortShareAnswer =
            self.finish("share port", self.request("PUT", &path).send_json(body))?;
        Ok(answer.port_share)
    }

    /// Makes a shared port its owner's alone again.
    pub fn unshare_port(
        &self,
        workspace: &str,
        port: u16,
        agent: Option<&str>,
    ) -> Result<(), ClientError> {
        let path = format!(
            "/workspaces/{}/port-shares/{port}",
            workspace_segment(workspace)
        );
        let mut request = self.request("DELETE", &path);
        if let Some(agent) = agent {
            request = request.query("agent", agent);
        }
        self.check(request.call()).map(drop)
    }

    /// How far a template's workspaces may share ports; sets it first when
    /// `max` is given.
    pub fn template_port_share(
        &self,
        template: &str,
        max: Option<abode_sdk::apps::AppShare>,
    ) -> Result<abode_sdk::TemplatePortShare, ClientError> {
        let path = format!("/templates/{}/port-share", workspace_segment(template));
        match max {
            Some(max) => self.finish(
                "set the maximum port share",
                self.request("PUT", &path)
                    .send_json(requests::SetTemplatePortShare { max }),
            ),
            None => self.finish(
                "read the maximum port share",
                self.request("GET", &path).call(),
            ),
        }
    }

    /// The workspace with its apps (`GET /workspaces/{ws}` whole).
    pub fn workspace_with_apps(&self, workspace: &str) -> Result<WorkspaceAnswer, ClientError> {
        let path = format!("/workspaces/{}", workspace_segment(workspace));
        self.finish("GET workspace", self.request("GET", &path).call())
    }

    /// Asks the workspace's agent for a fresh report of unsaved work.
    pub fn request_unsaved_scan(&self, workspace: &str) -> Result<(), ClientError> {
        let path = format!("/workspaces/{}/unsaved/scan", workspace_segment(workspace));
        self.check(self.request("POST", &path).send_json(requests::Empty {}))
            .map(drop)
    }

    /// Queues a build of the workspace; `parameters` (a start only) are new
    /// values of its mutable parameters.
    pub fn transition_workspace(
        &self,
        workspace: &str,
        transition: Transition,
        parameters: &BTreeMap<String, String>,
    ) -> Result<Build, ClientError> {
        self.post_build(
            workspace,
            transition,
            VersionChoice::Current,
            parameters,
            None,
        )
    }

    /// Queues a delete of the workspace; `retain`: `all` (every protected
    /// resource is retained) or `none` (nothing is), else as the
    /// template's rules say.
    ///
    /// A workspace whose last report shows unsaved work is held (error
    /// code `unsaved_work`) unless `unsaved` discards it or names the
    /// report's digest.
    pub fn delete_workspace(
        &self,
        workspace: &str,
        retain: Option<&str>,
        unsaved: &UnsavedConsent,
    ) -> Result<Build, ClientError> {
        let body = requests::NewBuild {
            transition: Transition::Delete.as_str().to_string(),
            retain: retain.map(str::to_string),
            discard_unsaved: matches!(unsaved, UnsavedConsent::Discard),
            confirm_unsaved: match unsaved {
                UnsavedConsent::Confirm(digest) => Some(digest.clone()),
                _ => None,
            },
            ..requests::NewBuild::default()
        };
        let path = format!("/workspaces/{}/builds", workspace_segment(workspace));
        let body: BuildAnswer =
            self.finish("POST builds", self.request("POST", &path).send_json(body))?;
        Ok(body.build)
    }

    /// Queues a start of the workspace on its template's active version;
    /// `parameters` are new values of its mutable parameters.
    pub fn update_workspace(
        &self,
        workspace: &str,
        parameters: &BTreeMap<String, String>,
    ) -> Result<Build, ClientError> {
        self.post_build(
            workspace,
            Transition::Start,
            VersionChoice::Active,
            parameters,
            None,
        )
    }

    /// Queues the rename of the workspace to `name`: a build of its
    /// current transition planned under the new name, which the workspace
    /// takes when that build succeeds.
    pub fn rename_workspace(&self, workspace: &str, name: &str) -> Result<Build, ClientError> {
        let path = format!("/workspaces/{}/rename", workspace_segment(workspace));
        let body: BuildAnswer = self.finish(
            "rename workspace",
            self.request("POST", &path)
                .send_json(requests::RenameWorkspace {
                    name: name.to_string(),
                }),
        )?;
        Ok(body.build)
    }

    /// Queues the restart of the workspace: its stop, which a start follows
    /// once it succeeded.
    pub fn restart_workspace(&self, workspace: &str) -> Result<Build, ClientError> {
        let path = format!("/workspaces/{}/restart", workspace_segment(workspace));
        let body: BuildAnswer =
            self.finish("restart workspace", self.request("POST", &path).call())?;
        Ok(body.build)
    }

    fn post_build(
        &self,
        workspace: &str,
        transition: Transition,
        version: VersionChoice,
        parameters: &BTreeMap<String, String>,
        retain: Option<&str>,
    ) -> Result<Build, ClientError> {
        let (template_version, update) = version.to_wire();
        let body = requests::NewBuild {
            transition: transition.as_str().to_string(),
            template_version,
            update: update.then_some(true),
            parameters: string_values(parameters),
            retain: retain.map(str::to_string),
            ..requests::NewBuild::default()
        };
        let path = format!("/workspaces/{}/builds", workspace_segment(workspace));
        let body: BuildAnswer =
            self.finish("POST builds", self.request("POST", &path).send_json(body))?;
        Ok(body.build)
    }

    /// The builds of a workspace, newest first.
    /// A workspace's builds, newest first, every page; `status` filters.
    pub fn builds(
        &self,
        workspace: &str,
        status: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<Build>, ClientError> {
        let path = format!("/workspaces/{}/builds", workspace_segment(workspace));
        let filters: Vec<(&str, &str)> = status
            .map(|status| ("status", status))
            .into_iter()
            .collect();
        self.pages("GET builds", &path, "builds", &filters, limit)
    }

    /// One build; `None` for the latest.
    pub fn build(&self, workspace: &str, number: Option<u64>) -> Result<Build, ClientError> {
        let number = number.map_or_else(|| "latest".to_string(), |n| n.to_string());
        let path = format!(
            "/workspaces/{}/builds/{number}",
            workspace_segment(workspace)
        );
        let body: BuildAnswer = self.finish("GET build", self.request("GET", &path).call())?;
        Ok(body.build)
    }

    /// What was measured of a build's time: its stages and resources.
    pub fn build_timings(
        &self,
        workspace: &str,
        number: u64,
    ) -> Result<abode_sdk::BuildTimings, ClientError> {
        let path = format!(
            "/workspaces/{}/builds/{number}/timings",
            workspace_segment(workspace)
        );
        let body: abode_sdk::TimingsAnswer =
            self.finish("GET build timings", self.request("GET", &path).call())?;
        Ok(body.timings)
    }

    /// Log lines after `after`; waits up to `wait_seconds` for new ones.
    pub fn build_logs(
        &self,
        workspace: &str,
        number: u64,
        after: u64,
        wait_seconds: u64,
    ) -> Result<LogPage, ClientError> {
        let path = format!(
            "/workspaces/{}/builds/{number}/logs",
            workspace_segment(workspace)
        );
        let request = self
            .request("GET", &path)
            .query("after", &after.to_string())
            .query("wait", &wait_seconds.to_string());
        self.finish("GET build logs", request.call())
    }

    /// Cancels a pending or running build.
    pub fn cancel_build(&self, workspace: &str, number: u64) -> Result<Build, ClientError> {
        let path = format!(
            "/workspaces/{}/builds/{number}/cancel",
            workspace_segment(workspace)
        );
        let body: BuildAnswer = self.finish("cancel build", self.request("POST", &path).call())?;
        Ok(body.build)
    }

    /// Applies exactly the saved plan of a held build; `digest` is the
    /// `plan_digest` the user saw, so a different plan is never applied.
    pub fn confirm_build(
        &self,
        workspace: &str,
        number: u64,
        digest: &str,
    ) -> Result<Build, ClientError> {
        let path = format!(
            "/workspaces/{}/builds/{number}/confirm",
            workspace_segment(workspace)
        );
        let body: BuildAnswer = self.finish(
            "confirm build",
            self.request("POST", &path)
                .send_json(requests::ConfirmBuild {
                    digest: Some(digest.to_string()),
                }),
        )?;
        Ok(body.build)
    }

    /// The protections a workspace remembers, by address.
    pub fn protections(&self, workspace: &str) -> Result<Vec<Protection>, ClientError> {
        let path = format!("/workspaces/{}/protections", workspace_segment(workspace));
        let body: ProtectionsAnswer =
            self.finish("GET protections", self.request("GET", &path).call())?;
        Ok(body.protections)
    }

    /// Releases one remembered protection (owners and template-admins).
    pub fn release_protection(
        &self,
        workspace: &str,
        address: &str,
    ) -> Result<Protection, ClientError> {
        let path = format!("/workspaces/{}/protections", workspace_segment(workspace));
        let body: ReleasedAnswer = self.finish(
            "release protection",
            self.request("DELETE", &path)
                .query("address", address)
                .call(),
        )?;
        Ok(body.released)
    }

    /// Releases the state lock a lost holder's build keeps (owners and
    /// template admins; audited).
    pub fn unlock_workspace(&self, workspace: &str, build: u64) -> Result<Unlocked, ClientError> {
        let path = format!("/workspaces/{}/unlock", workspace_segment(workspace));
        let body: abode_sdk::UnlockedAnswer = self.finish(
            "unlock workspace",
            self.request("POST", &path).send_json(requests::Unlock {
                // No build has a number past i64's: the server answers 404.
                build: i64::try_from(build).unwrap_or(i64::MAX),
            }),
        )?;
        Ok(body.unlocked)
    }

    /// Moves a workspace to another host (owners; audited): its builds run
    /// there from now on.
    pub fn move_workspace(&self, workspace: &str, host: &str) -> Result<Moved, ClientError> {
        let path = format!("/workspaces/{}/move", workspace_segment(workspace));
        let body: abode_sdk::MovedAnswer = self.finish(
            "move workspace",
            self.request("POST", &path)
                .send_json(requests::MoveWorkspace {
                    host: host.to_string(),
                }),
        )?;
        Ok(body.moved)
    }

    /// Removes a workspace without running Terraform (owners).
    pub fn orphan_workspace(&self, workspace: &str) -> Result<Orphaned, ClientError> {
        let path = format!("/workspaces/{}/orphan", workspace_segment(workspace));
        self.finish("orphan workspace", self.request("POST", &path).call())
    }

    /// The workspace's last Terraform state, as stored (owners; it holds the
    /// workspace's secrets).
    pub fn workspace_state(&self, workspace: &str) -> Result<Vec<u8>, ClientError> {
        use std::io::Read;
        let path = format!("/workspaces/{}/state", workspace_segment(workspace));
        let response = self.check(self.request("GET", &path).call())?;
        let mut bytes = Vec::new();
        response
            .into_reader()
            .take(512 * 1024 * 1024)
            .read_to_end(&mut bytes)
            .map_err(|err| ClientError::BadResponse {
                what: "workspace state".into(),
                reason: err.to_string(),
            })?;
        Ok(bytes)
    }

    /// Writes the tar of a retained volume (with its manifest) to `out`;
    /// how many bytes. A body cut short is an error.
    pub fn export_retained(
        &self,
        id: &str,
        out: &mut dyn std::io::Write,
    ) -> Result<u64, ClientError> {
        let path = format!("/retained/{}/export", workspace_segment(id));
        let response = self.check(self.request("GET", &path).call())?;
        std::io::copy(&mut response.into_reader(), out).map_err(|err| ClientError::BadResponse {
            what: "volume export".into(),
            reason: err.to_string(),
        })
    }

    /// The server's orphaned volume directories (owners).
    pub fn orphan_volumes(&self) -> Result<Vec<abode_sdk::OrphanVolume>, ClientError> {
        let answer: abode_sdk::OrphanVolumesAnswer = self.finish(
            "GET /volumes/orphans",
            self.request("GET", "/volumes/orphans").call(),
        )?;
        Ok(answer.orphans)
    }

    /// The connection log, newest first, every page; `filters`:
    /// `workspace`, `user`, `since` (docs/api.md).
    pub fn connections(
        &self,
        filters: &[(&str, &str)],
        limit: Option<usize>,
    ) -> Result<Vec<abode_sdk::ConnectionLogEntry>, ClientError> {
        self.pages(
            "GET /connections",
            "/connections",
            "connections",
            filters,
            limit,
        )
    }

    /// Audit events, newest first, optionally of one workspace.
    /// Audit events, newest first, every page; `filters`: `workspace`,
    /// `target`, `actor`, `action`, `since`, `until` (docs/api.md).
    pub fn audit(
        &self,
        filters: &[(&str, &str)],
        limit: Option<usize>,
    ) -> Result<Vec<AuditEvent>, ClientError> {
        self.pages("GET /audit", "/audit", "events", filters, limit)
    }

    /// Writes the audit log's export (`GET /audit/export`; `filters`:
    /// `since`, `until`, `format`) to `out` as it arrives; how many bytes.
    pub fn export_audit(
        &self,
        filters: &[(&str, &str)],
        out: &mut dyn std::io::Write,
    ) -> Result<u64, ClientError> {
        let mut request = self.request("GET", "/audit/export");
        for (name, value) in filters {
            request = request.query(name, value);
        }
        let response = self.check(request.call())?;
        std::io::copy(&mut response.into_reader(), out).map_err(|err| ClientError::BadResponse {
            what: "audit export".into(),
            reason: err.to_string(),
        })
    }

    /// The caller's inbox, newest first, every page (`unread_only`: unread
    /// messages only).
    pub fn notifications(
        &self,
        unread_only: bool,
        limit: Option<usize>,
    ) -> Result<Vec<Notification>, ClientError> {
        let filters: &[(&str, &str)] = if unread_only {
            &[("unread", "true")]
        } else {
            &[]
        };
        self.pages(
            "GET /notifications",
            "/notifications",
            "notifications",
            filters,
            limit,
        )
    }

    /// Deliveries the server gave up on, newest first, every page (owners).
    pub fn failed_notifications(
        &self,
        limit: Option<usize>,
    ) -> Result<Vec<FailedNotification>, ClientError> {
        self.pages(
            "GET /notifications/failed",
            "/notifications/failed",
            "notifications",
            &[],
            limit,
        )
    }

    /// Marks one of the caller's messages read.
    pub fn read_notification(&self, id: &str) -> Result<Notification, ClientError> {
        let path = format!("/notifications/{}/read", workspace_segment(id));
        let body: NotificationAnswer = self.finish(
            "POST /notifications/{id}/read",
            self.request("POST", &path).send_json(requests::Empty {}),
        )?;
        Ok(body.notification)
    }

    /// Marks every message of the caller read; how many were unread.
    pub fn read_all_notifications(&self) -> Result<u64, ClientError> {
        let body: MarkedAnswer = self.finish(
            "POST /notifications/read-all",
            self.request("POST", "/notifications/read-all")
                .send_json(requests::Empty {}),
        )?;
        Ok(body.marked)
    }

    /// The caller's notification settings, after disabling and enabling
    /// the kinds given (none: just read them).
    pub fn notification_settings(
        &self,
        disable: &[String],
        enable: &[String],
    ) -> Result<Vec<NotificationSetting>, ClientError> {
        let body: NotificationSettingsAnswer = if disable.is_empty() && enable.is_empty() {
            self.finish(
                "GET /notifications/settings",
                self.request("GET", "/notifications/settings").call(),
            )?
        } else {
            self.finish(
                "POST /notifications/settings",
                self.request("POST", "/notifications/settings").send_json(
                    requests::NotificationSettingsChange {
                        disable: disable.to_vec(),
                        enable: enable.to_vec(),
                    },
                ),
            )?
        };
        Ok(body.settings)
    }

    /// Makes a kind mandatory or optional (owners); the caller's settings after.
    pub fn set_notification_kind_mandatory(
        &self,
        kind: &str,
        mandatory: bool,
    ) -> Result<Vec<NotificationSetting>, ClientError> {
        let body: NotificationSettingsAnswer = self.finish(
            "POST /notifications/mandatory",
            self.request("POST", "/notifications/mandatory")
                .send_json(requests::MandatoryKind {
                    kind: kind.to_string(),
                    mandatory,
                }),
        )?;
        Ok(body.settings)
    }

    /// Users (owners and user admins), by name, every page; deleted
    /// accounts only with `deleted`.
    pub fn users(&self, limit: Option<usize>) -> Result<Vec<User>, ClientError> {
        self.users_with(limit, false)
    }

    /// [`Client::users`], deleted accounts included when `deleted`.
    pub fn users_with(
        &self,
        limit: Option<usize>,
        deleted: bool,
    ) -> Result<Vec<User>, ClientError> {
        let filters: &[(&str, &str)] = if deleted { &[("deleted", "true")] } else { &[] };
        self.pages("GET /users", "/users", "users", filters, limit)
    }

    /// One person's account (owners and user admins; anyone their own).
    pub fn user(&self, username: &str) -> Result<User, ClientError> {
        let path = format!("/users/{}", workspace_segment(username));
        let body: UserAnswer =
            self.finish("GET /users/{name}", self.request("GET", &path).call())?;
        Ok(body.user)
    }

    /// Suspends (`suspend`) or activates (`activate`) an account; the
    /// account as it is afterwards.
    pub fn set_user_status(&self, username: &str, verb: &str) -> Result<User, ClientError> {
        let path = format!("/users/{}/{verb}", workspace_segment(username));
        let body: UserAnswer = self.finish(
            "POST /users/{name}/{verb}",
            self.request("POST", &path).send_json(requests::Empty {}),
        )?;
        Ok(body.user)
    }

    /// Deletes an account (it must own no workspace); the account as kept.
    pub fn delete_user(&self, username: &str) -> Result<User, ClientError> {
        let path = format!("/users/{}", workspace_segment(username));
        let body: UserAnswer =
            self.finish("DELETE /users/{name}", self.request("DELETE", &path).call())?;
        Ok(body.user)
    }

    /// Changes the caller's own password; how many other sessions ended.
    pub fn change_password(&self, current: &str, new: &str) -> Result<u64, ClientError> {
        let body: abode_sdk::SessionsEnded = self.finish(
            "PUT /users/me/password",
            self.request("PUT", "/users/me/password")
                .send_json(requests::PasswordChange {
                    current_password: current.to_string(),
                    password: new.to_string(),
                }),
        )?;
        Ok(body.sessions_ended)
    }

    /// Agent: what the server knows about this agent (token-authenticated).
    pub fn agent_me(&self) -> Result<AgentMe, ClientError> {
        self.finish("GET /agent/me", self.request("GET", "/agent/me").call())
    }

    /// Agent: reports a lifecycle state (`starting`, `ready`, `start_error`
    /// with the startup script's exit status when it had one).
    /// Reports the health an agent found for one of its apps.
    pub fn agent_app_health(
        &self,
        slug: &str,
        health: abode_sdk::apps::AppHealth,
    ) -> Result<(), ClientError> {
        let body = requests::AgentAppHealth {
            slug: slug.to_string(),
            health,
        };
        self.check(self.request("POST", "/agent/apps/health").send_json(body))
            .map(drop)
    }

    /// Agent: what its scan of the home found (unsaved work).
    pub fn agent_unsaved(&self, report: &requests::AgentUnsaved) -> Result<(), ClientError> {
        self.check(self.request("POST", "/agent/unsaved").send_json(report))
            .map(drop)
    }

    /// How the shutdown script a build asked for ended.
    /// Reports a run of one of the agent's scripts.
    pub fn agent_script_run(
        &self,
        report: &requests::AgentScriptReport,
    ) -> Result<(), ClientError> {
        self.check(self.request("POST", "/agent/scripts").send_json(report))
            .map(drop)
    }

    /// Agent: the latest results of its `metadata` blocks and monitors.
    pub fn agent_metadata(
        &self,
        report: &requests::AgentMetadataReport,
    ) -> Result<(), ClientError> {
        self.check(self.request("POST", "/agent/metadata").send_json(report))
            .map(drop)
    }

    pub fn agent_shutdown(
        &self,
        report: &requests::AgentShutdownReport,
    ) -> Result<(), ClientError> {
        self.check(self.request("POST", "/agent/shutdown").send_json(report))
            .map(drop)
    }

    /// The workspace owner's token of `provider` (by id) or of the provider
    /// serving `git_url`.
    pub fn agent_external_auth_token(
        &self,
        request: &requests::AgentExternalAuthToken,
    ) -> Result<abode_sdk::ExternalAuthToken, ClientError> {
        let body = request;
        self.finish(
            "POST /agent/external-auth/token",
            self.request("POST", "/agent/external-auth/token")
                .send_json(body),
        )
    }

    pub fn agent_lifecycle(
        &self,
        state: &str,
        exit_status: Option<i32>,
    ) -> Result<(), ClientError> {
        let body = requests::AgentLifecycle {
            state: state.to_string(),
            exit_status: exit_status.map(i64::from),
        };
        self.check(self.request("POST", "/agent/lifecycle").send_json(body))
            .map(drop)
    }

    /// The pools of prebuilt workspaces, of every template or of one.
    pub fn prebuild_status(
        &self,
        template: Option<&str>,
    ) -> Result<Vec<PrebuildPool>, ClientError> {
        let mut request = self.request("GET", "/prebuilds");
        if let Some(template) = template {
            request = request.query("template", template);
        }
        self.finish("GET /prebuilds", request.call())
    }

    /// Owners: pauses (`true`) or resumes the prebuilds reconciliation.
    pub fn set_prebuilds_paused(&self, paused: bool) -> Result<(), ClientError> {
        let path = if paused {
            "/prebuilds/pause"
        } else {
            "/prebuilds/resume"
        };
        self.finish::<abode_sdk::PrebuildsPaused>(
            &format!("POST {path}"),
            self.request("POST", path).send_json(requests::Empty {}),
        )
        .map(drop)
    }

    /// A template's lifecycle policy.
    pub fn template_policy(&self, name: &str) -> Result<TemplatePolicy, ClientError> {
        let path = format!("/templates/{}/policy", workspace_segment(name));
        let body: PolicyAnswer =
            self.finish("GET template policy", self.request("GET", &path).call())?;
        Ok(body.policy)
    }

    /// Changes a template's lifecycle policy (template admins); the policy
    /// after.
    pub fn edit_template_policy(
        &self,
        name: &str,
        patch: &TemplatePolicyPatch,
    ) -> Result<TemplatePolicy, ClientError> {
        let path = format!("/templates/{}/policy", workspace_segment(name));
        let body: PolicyAnswer = self.finish(
            "PATCH template policy",
            self.request("PATCH", &path).send_json(patch),
        )?;
        Ok(body.policy)
    }

    /// A workspace's schedule and lifecycle times.
    pub fn workspace_schedule(&self, workspace: &str) -> Result<WorkspaceSchedule, ClientError> {
        let path = format!("/workspaces/{}/schedule", workspace_segment(workspace));
        let body: ScheduleAnswer =
            self.finish("GET schedule", self.request("GET", &path).call())?;
        Ok(body.schedule)
    }

    /// Sets a workspace's whole schedule (its owner).
    pub fn set_workspace_schedule(
        &self,
        workspace: &str,
        spec: &ScheduleSpec,
    ) -> Result<WorkspaceSchedule, ClientError> {
        let path = format!("/workspaces/{}/schedule", workspace_segment(workspace));
        let body: ScheduleAnswer =
            self.finish("PUT schedule", self.request("PUT", &path).send_json(spec))?;
        Ok(body.schedule)
    }

    /// Moves a running workspace's deadline to now + `duration_ms`.
    pub fn extend_workspace(
        &self,
        workspace: &str,
        duration_ms: u64,
    ) -> Result<WorkspaceSchedule, ClientError> {
        let path = format!("/workspaces/{}/extend", workspace_segment(workspace));
        let body: ScheduleAnswer = self.finish(
            "extend workspace",
            self.request("POST", &path)
                .send_json(requests::ExtendWorkspace { duration_ms }),
        )?;
        Ok(body.schedule)
    }

    /// Wakes a dormant workspace.
    pub fn wake_workspace(&self, workspace: &str) -> Result<WorkspaceSchedule, ClientError> {
        let path = format!("/workspaces/{}/wake", workspace_segment(workspace));
        let body: ScheduleAnswer = self.finish(
            "wake workspace",
            self.request("POST", &path).send_json(requests::Empty {}),
        )?;
        Ok(body.schedule)
    }

    /// Agent: something in the workspace is in use.
    pub fn agent_activity(&self) -> Result<(), ClientError> {
        self.check(
            self.request("POST", "/agent/activity")
                .send_json(requests::Empty {}),
        )
        .map(drop)
    }

    /// Agent: tells the server it is still alive; the answer is the
    /// workspace's owner and name now.
    pub fn agent_heartbeat(
        &self,
        report: &requests::AgentHeartbeatReport,
    ) -> Result<AgentHeartbeat, ClientError> {
        let response = self.check(self.request("POST", "/agent/heartbeat").send_json(report))?;
        if response.status() == 204 {
            return Ok(AgentHeartbeat::default());
        }
        response
            .into_json()
            .map_err(|err| ClientError::BadResponse {
                what: "POST /agent/heartbeat".into(),
                reason: err.to_string(),
            })
    }
}

fn transport_reason(transport: &ureq::Transport) -> String {
    // ureq's Display repeats the URL; the kind and the innermost message suffice.
    let detail = transport
        .message()
        .map(str::to_string)
        .or_else(|| std::error::Error::source(transport).map(|source| source.to_string()));
    match detail {
        Some(detail) => format!("{} ({detail})", transport.kind()),
        None => transport.kind().to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;

    /// Serves one canned HTTP answer and returns what the client sent.
    fn serve_once(status: u16, body: &'static str) -> (String, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap();
                }
                if line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let mut body_in = vec![0; length];
            reader.read_exact(&mut body_in).unwrap();
            let mut stream = stream;
            write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            head + "\n" + &String::from_utf8_lossy(&body_in)
        });
        (url, handle)
    }

    #[test]
    fn api_errors_carry_the_server_message() {
        let (url, server) = serve_once(
            409,
            r#"{"error":{"code":"conflict","message":"workspace \"dev\" is already running"}}"#,
        );
        let client = Client::new(&url, Some("tok".into()));
        let err = client
            .transition_workspace("dev", Transition::Start, &BTreeMap::new())
            .unwrap_err();
        assert_eq!(err.to_string(), "workspace \"dev\" is already running");
        assert_eq!(err.code(), Some("conflict"));
        assert_eq!(err.status(), Some(409));
        let request = server.join().unwrap();
        assert!(
            request.starts_with("POST /api/v1/workspaces/dev/builds "),
            "{request}"
        );
        assert!(request.contains("Bearer tok"));
        assert!(request.ends_with(r#"{"transition":"start"}"#), "{request}");
    }

    #[test]
    fn error_without_json_body_still_reads_well() {
        let (url, server) = serve_once(502, "bad gateway");
        let err = Client::new(&url, None).templates(None).unwrap_err();
        assert_eq!(err.status(), Some(502));
        assert!(err.is_transient());
        assert!(err.to_string().contains("HTTP 502"));
        server.join().unwrap();
    }

    #[test]
    fn unreachable_server_is_one_clear_line() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let err = Client::new(&url, None).health().unwrap_err();
        assert!(err.is_transient());
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("cannot reach the Abode server at {url}")),
            "{text}"
        );
        assert!(!text.contains('\n'));
    }

    #[test]
    fn decodes_documented_shapes() {
        let (url, server) = serve_once(
            200,
            r#"{"workspace":{"id":"w1","name":"dev","owner":"alice","template":"docker","template_version":2,
               "parameters":{"cpu":"2"},"status":"running","created_at":"t","updated_at":"t",
               "latest_build":{"id":"b","workspace":"dev","owner":"alice","number":3,"transition":"start",
                 "status":"succeeded","template_version":2,"initiator":"alice","reason":"update","error":null,
                 "created_at":"t","started_at":"t","finished_at":"t","guard":{"decision":"allow","protected_changes":[]}},
               "agent":{"status":"ready","lifecycle":"ready","last_heartbeat_at":"t","connected_at":"t"},
               "healthy":true,"future_field":1}}"#,
        );
        let workspace = Client::new(&url, Some("t".into()))
            .workspace("bob/dev")
            .unwrap();
        assert_eq!(workspace.agent.status, "ready");
        assert_eq!(workspace.latest_build.unwrap().number, 3);
        let request = server.join().unwrap();
        assert!(
            request.starts_with("GET /api/v1/workspaces/bob%2Fdev "),
            "{request}"
        );
    }

    #[test]
    fn debug_hides_token() {
        let client = Client::new("http://x", Some("secret-token".into()));
        assert!(!format!("{client:?}").contains("secret-token"));
    }
}
