//! Templates and their immutable versions: who may push, what a pushed
//! archive must pass (safe unpacking, `terraform init` and `validate`), the
//! lint's findings a version keeps (and a strict push's refusal), which
//! version new workspaces get (activation, gated by the latest preview),
//! and the presets a version offers.
//!
//! It is a service of its own, not methods on `Control`, so that it holds
//! only what it needs (the store, an audit writer, the few settings a push
//! runs Terraform with) and the rest of the control plane reaches templates
//! through its methods.

mod access;
mod estimate;

use std::path::{Path, PathBuf};

use abode_terraform::run::{self, Invocation, RunError};

use abode_store::{
    page_size, NewTemplateVersion, Page, ParameterDefinition, Preview, Store, Template,
    TemplateVersion,
};

use crate::audit::{audit_event, Audit};
use crate::authz::{self, Action};
use crate::error::or_not_found;
use crate::parameters::declarations_from_template;
use crate::presets::{stored_presets, PresetDefinition};
use crate::validate_name;
use crate::{notifications, secrets, Caller, ControlError};
use abode_runner::archive;
use abode_runner::workdir::{self, TEMPLATE_SUBDIR};

pub use access::PermissionSubject;

/// What a push runs Terraform with (read from `Config`).
#[derive(Debug, Clone)]
pub struct TemplatesConfig {
    /// Where a push unpacks and validates its archive (`Config::work_dir`).
    pub work_dir: PathBuf,
    /// Where `terraform init` finds the abode provider (`Config::provider_mirror`).
    pub provider_mirror: Option<PathBuf>,
    /// What a push's Terraform gets of the server's environment.
    pub terraform_env: Vec<(String, String)>,
    /// The sandbox a push's Terraform runs in (`Config::terraform_isolation`).
    pub isolation: Option<std::sync::Arc<abode_terraform::isolation::Isolation>>,
    /// Whether a new template's access list starts with `Everyone: use`
    /// (`Config::new_templates_for_everyone`).
    pub new_templates_for_everyone: bool,
    /// The ids of the server's external auth providers: a template may
    /// only require one of them.
    pub external_auth_providers: Vec<String>,
}

/// Templates, their versions, their activation and their presets.
pub struct Templates {
    store: Store,
    config: TemplatesConfig,
    audit: Audit,
    /// Create estimates already planned (`estimate.rs`).
    estimates: estimate::Estimates,
}

impl Templates {
    /// The longest message a template version keeps.
    pub const MAX_VERSION_MESSAGE_CHARS: usize = 1024;

    pub fn new(store: Store, config: TemplatesConfig) -> Templates {
        Templates {
            audit: Audit::new(store.clone()),
            store,
            config,
            estimates: estimate::Estimates::default(),
        }
    }

    /// Records what a person did to a template (push, preview, activation).
    pub(crate) async fn audit_template(
        &self,
        caller: &Caller,
        action: &str,
        template: &str,
        outcome: &str,
        details: Option<String>,
    ) {
        let (user, request_id) = (Some(&caller.user), caller.request_id.clone());
        let event = audit_event(
            user, request_id, action, "template", template, outcome, details,
        );
        self.audit.record(&event).await;
    }

    /// Whether `caller` may push version `message` of template `name`,
    /// checked before the upload is read: a caller who may not gets the
    /// answer without the server holding their archive. A new template
    /// needs the global grant; an existing one, that or `admin` on its
    /// access list.
    pub async fn may_push_template(
        &self,
        caller: &Caller,
        name: &str,
        message: &str,
    ) -> Result<(), ControlError> {
        validate_name("template name", name)?;
        // A token's scope may name a template that does not exist yet.
        authz::scope_permits(
            &caller.scope,
            Action::TemplatePush,
            Some(authz::ScopedObject::Template(name)),
        )?;
        let subject = caller.subject();
        match self.store.template_by_name(name).await {
            Ok(template) => {
                if let Err(refusal) = self
                    .authorize_on(&subject, &template, Action::TemplatePush)
                    .await
                {
                    // A template they may not see: the answer a new name
                    // gets, so a push tells nobody whether it exists.
                    if matches!(refusal, ControlError::NotFound(_)) {
                        authz::authorize_roles(&subject, Action::TemplatePush, None)?;
                    }
                    return Err(refusal);
                }
            }
            Err(abode_store::StoreError::NotFound(_)) => {
                authz::authorize_roles(&subject, Action::TemplatePush, None)?
            }
            Err(error) => return Err(error.into()),
        }
        if message.chars().count() > Self::MAX_VERSION_MESSAGE_CHARS {
            return Err(ControlError::BadRequest(format!(
                "a version message is at most {} characters",
                Self::MAX_VERSION_MESSAGE_CHARS
            )));
        }
        Ok(())
    }

    pub async fn push_template(
        &self,
        caller: &Caller,
        name: &str,
        archive_bytes: Vec<u8>,
        activate: bool,
        message: &str,
    ) -> Result<(Template, TemplateVersion), ControlError> {
        let options = PushOptions {
            activate,
            message: message.to_string(),
            ..PushOptions::default()
        };
        let (template, version, _) = self
            .push_template_with(caller, name, archive_bytes, &options)
            .await?;
        Ok((template, version))
    }

    /// Pushes a version and returns it with the lint's findings, which it
    /// keeps; a strict push with an error-level finding is refused (and
    /// audited) before Terraform runs.
    pub async fn push_template_with(
        &self,
        caller: &Caller,
        name: &str,
        archive_bytes: Vec<u8>,
        options: &PushOptions,
    ) -> Result<(Template, TemplateVersion, VersionLint), ControlError> {
        let (activate, message) = (options.activate, options.message.as_str());
        self.may_push_template(caller, name, message).await?;
        if activate {
            self.may_activate_pushed(caller, name, &archive_bytes, options)
                .await?;
        }
        let provisioner_tags =
            crate::tags::parse_tags(&options.provisioner_tags).map_err(ControlError::BadRequest)?;
        let validation = validate_template(&self.config, &archive_bytes, options.strict).await;
        let validated = match validation {
            Ok(validated) => validated,
            Err(error) => {
                let details = Some(error.to_string());
                self.audit_template(caller, "template.push", name, "failure", details)
                    .await;
                return Err(error);
            }
        };
        let lint_json = serde_json::to_string(&validated.lint)
            .map_err(|error| ControlError::Internal(error.to_string()))?;
        let (template, version) = self
            .store
            .create_linted_template_version(
                &NewTemplateVersion {
                    template_name: name.into(),
                    archive_sha256: secrets::sha256_hex(&archive_bytes),
                    archive: archive_bytes,
                    message: message.into(),
                    created_by: caller.user.id.clone(),
                    validation_ok: true,
                    validation_message: validated.message,
                    parameters: Some(validated.parameters),
                    presets: Some(validated.presets),
                    activate,
                },
                Some(&lint_json),
                &provisioner_tags,
                self.config.new_templates_for_everyone,
                &validated.external_auth,
            )
            .await?;
        let (number, active, summary) = (version.number, version.active, validated.lint.summary());
        let details = Some(format!(
            "version={number} active={active} lint=\"{summary}\""
        ));
        self.audit_template(caller, "template.push", name, "success", details)
            .await;
        // A new version starts its pools with a fresh failure history: a
        // preset's next hard limit is told again.
        for preset in stored_presets(&version)? {
            let recovered = notifications::preset_recovered(&self.store, &template, &preset.name);
            if let Err(error) = recovered.await {
                tracing::error!(%error, "cannot clear a preset's hard-limit notice");
            }
        }
        Ok((template, version, validated.lint))
    }

    /// Version `number` of a template with the lint's findings it keeps
    /// (`None`: pushed before the lint existed).
    pub async fn template_version_detail(
        &self,
        caller: &Caller,
        name: &str,
        number: i64,
    ) -> Result<(TemplateVersion, Option<VersionLint>), ControlError> {
        self.template_for(caller, name, Action::TemplateRead)
            .await?;
        let (_, version) = self.version_of(name, number).await?;
        let lint = self.stored_lint(&version).await?;
        Ok((version, lint))
    }

    /// The provisioner tags a version's builds need (`key=value`, sorted).
    pub async fn provisioner_tags_of(
        &self,
        version: &TemplateVersion,
    ) -> Result<Vec<String>, ControlError> {
        Ok(self.store.template_version_tags(&version.id).await?)
    }

    /// One page of templates, by name.
    pub async fn list_templates(
        &self,
        caller: &Caller,
        after: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Page<Template>, ControlError> {
        // A list names no template: only a scope that reads any covers it.
        authz::scope_permits(&caller.scope, Action::TemplateRead, None)?;
        let usable_by = match authz::template_visibility(&caller.subject()) {
            authz::TemplateVisibility::All => None,
            authz::TemplateVisibility::Listed => Some(caller.user.id.as_str()),
            authz::TemplateVisibility::None => {
                return Err(caller
                    .authorize(Action::TemplateRead, None)
                    .err()
                    .map_or_else(
                        || ControlError::Internal("template list without a grant".into()),
                        ControlError::from,
                    ))
            }
        };
        Ok(self
            .store
            .list_template_page(after, page_size(limit), usable_by)
            .await?)
    }

    /// A template, as a person reads it.
    pub async fn read_template(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<Template, ControlError> {
        self.template_for(caller, name, Action::TemplateRead).await
    }

    pub async fn template(&self, name: &str) -> Result<Template, ControlError> {
        or_not_found(self.store.template_by_name(name).await, || {
            format!("template \"{name}\" not found")
        })
    }

    pub async fn template_versions(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<Vec<TemplateVersion>, ControlError> {
        let template = self
            .template_for(caller, name, Action::TemplateRead)
            .await?;
        Ok(self.store.list_template_versions(&template.id).await?)
    }

    /// The presets of version `number` of a template (default: the active
    /// version), with that version: what `abode create --preset` offers.
    pub async fn template_presets(
        &self,
        caller: &Caller,
        name: &str,
        number: Option<i64>,
    ) -> Result<(TemplateVersion, Vec<PresetDefinition>), ControlError> {
        let template = self
            .template_for(caller, name, Action::TemplateRead)
            .await?;
        let version = match (number, template.active_version_id.as_deref()) {
            (Some(number), _) => or_not_found(
                self.store.template_version(&template.id, number).await,
                || format!("template \"{name}\" has no version {number}"),
            )?,
            (None, Some(active)) => self.store.template_version_by_id(active).await?,
            (None, None) => {
                return Err(ControlError::Conflict(format!(
                    "template \"{name}\" has no active version"
                )))
            }
        };
        let presets = stored_presets(&version)?;
        Ok((version, presets))
    }

    /// The lint kept with a version, parsed (`None`: pushed before the lint).
    pub(crate) async fn stored_lint(
        &self,
        version: &TemplateVersion,
    ) -> Result<Option<VersionLint>, ControlError> {
        self.store
            .template_version_lint(&version.id)
            .await?
            .map(|json| {
                serde_json::from_str::<VersionLint>(&json).map_err(|error| {
                    ControlError::Internal(format!(
                        "the lint kept with version {} of template \"{}\" is unreadable: {error}",
                        version.number, version.template_name
                    ))
                })
            })
            .transpose()
    }

    /// What activating a version is weighed by: the newest preview of the
    /// whole fleet of any version of the template with the same files (a
    /// copy pushed again plans as the original does: a preview of the one
    /// stands for the other, so that pushing the same files again does not
    /// shed a preview's warning). `None`: those files were never previewed.
    pub async fn activation_gate(
        &self,
        template_id: &str,
        archive_sha256: &str,
    ) -> Result<Option<PreviewGate>, ControlError> {
        Ok(self
            .store
            .latest_fleet_preview_of_archive(template_id, archive_sha256)
            .await?
            .map(PreviewGate::of))
    }

    /// A push that activates its version is held to the rule of
    /// [`Templates::activate_previewed_version`]: when these files' preview
    /// would hold or block workspaces (or is unfinished), only with that
    /// preview acknowledged; refused (and audited) before anything is
    /// validated or stored otherwise.
    async fn may_activate_pushed(
        &self,
        caller: &Caller,
        name: &str,
        archive: &[u8],
        options: &PushOptions,
    ) -> Result<(), ControlError> {
        let template = match self.store.template_by_name(name).await {
            Ok(template) => {
                self.authorize_on(&caller.subject(), &template, Action::TemplateActivate)
                    .await?;
                template
            }
            // A new template's first version: nothing was ever previewed.
            Err(abode_store::StoreError::NotFound(_)) => {
                authz::scope_permits(
                    &caller.scope,
                    Action::TemplateActivate,
                    Some(authz::ScopedObject::Template(name)),
                )?;
                return Ok(authz::authorize_roles(
                    &caller.subject(),
                    Action::TemplateActivate,
                    None,
                )?);
            }
            Err(error) => return Err(error.into()),
        };
        let digest = secrets::sha256_hex(archive);
        let Some(gate) = self.activation_gate(&template.id, &digest).await? else {
            return Ok(());
        };
        let (Some(concern), preview) = (&gate.concern, &gate.preview) else {
            return Ok(());
        };
        if options.acknowledge_preview.as_deref() == Some(preview.id.as_str()) {
            return Ok(());
        }
        let details = Some(format!(
            "activate=true preview={} held={} blocked={} failed={} pending={} acknowledged=false",
            preview.id, preview.held, preview.blocked, preview.failed, preview.pending
        ));
        self.audit_template(caller, "template.push", name, "failure", details)
            .await;
        Err(ControlError::Conflict(format!(
            "not pushed: these files are version {}'s of template \"{name}\", and {concern}; \
             push without --activate, then review and activate the new version \
             (abode templates versions activate {name} N), which acknowledges preview {}",
            preview.version, preview.id
        )))
    }

    /// Activates version `number` without acknowledging a preview: refused
    /// when its latest preview would hold or block workspaces
    /// ([`Templates::activate_previewed_version`]).
    pub async fn activate_template_version(
        &self,
        caller: &Caller,
        name: &str,
        number: i64,
    ) -> Result<(Template, TemplateVersion), ControlError> {
        self.activate_previewed_version(caller, name, number, None)
            .await
    }

    /// Activates version `number`; when its latest preview would hold or
    /// block workspaces (or is unfinished), only if `acknowledged` is that
    /// preview's id. The audit log records the preview and the decision.
    pub async fn activate_previewed_version(
        &self,
        caller: &Caller,
        name: &str,
        number: i64,
        acknowledged: Option<&str>,
    ) -> Result<(Template, TemplateVersion), ControlError> {
        self.template_for(caller, name, Action::TemplateActivate)
            .await?;
        let (template, version) = self.version_of(name, number).await?;
        let gate = self
            .activation_gate(&template.id, &version.archive_sha256)
            .await?;
        let mut details = format!("version={number}");
        if let Some(gate) = &gate {
            let preview = &gate.preview;
            details.push_str(&format!(
                " preview={} held={} blocked={} failed={} pending={}",
                preview.id, preview.held, preview.blocked, preview.failed, preview.pending
            ));
            if let Some(concern) = &gate.concern {
                if acknowledged != Some(preview.id.as_str()) {
                    let message = format!(
                        "version {number} of template \"{name}\" is not activated: {concern}; \
                         review it (abode templates versions show {name} {number}) and activate \
                         acknowledging preview {} (abode templates versions activate {name} {number} --yes)",
                        preview.id
                    );
                    let details = Some(format!("{details} acknowledged=false"));
                    self.audit_template(caller, "template.activate", name, "failure", details)
                        .await;
                    return Err(ControlError::Conflict(message));
                }
                details.push_str(" acknowledged=true");
            }
        }
        self.store
            .activate_template_version(&template.id, &version.id)
            .await?;
        self.audit_template(caller, "template.activate", name, "success", Some(details))
            .await;
        let template = self.template(name).await?;
        let version = self.store.template_version_by_id(&version.id).await?;
        Ok((template, version))
    }

    /// A template and its version `number`.
    pub(crate) async fn version_of(
        &self,
        name: &str,
        number: i64,
    ) -> Result<(Template, TemplateVersion), ControlError> {
        let template = self.template(name).await?;
        let version = or_not_found(
            self.store.template_version(&template.id, number).await,
            || format!("template \"{name}\" has no version {number}"),
        )?;
        Ok((template, version))
    }
}

/// How a version is pushed.
#[derive(Debug, Clone, Default)]
pub struct PushOptions {
    /// Make it the active version.
    pub activate: bool,
    /// The note kept with it.
    pub message: String,
    /// Refuse it when the lint finds an error-level hazard (or cannot read it).
    pub strict: bool,
    /// The provisioner tags its builds need (`key=value`; checked at push).
    pub provisioner_tags: Vec<String>,
    /// With `activate`: the preview acknowledged, when activating these
    /// files needs one ([`Templates::activation_gate`]).
    pub acknowledge_preview: Option<String>,
}

/// What the lint said about a version's files, as the version keeps it
/// (docs/lint.md): the report, or why the lint could not read them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VersionLint {
    #[serde(flatten)]
    pub report: abode_lint::Report,
    /// Why the lint could not read the files (its report is then empty);
    /// Terraform's own checks still decide whether the push passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl VersionLint {
    /// `1 error, 2 warnings`, `no findings`, or `not linted: <why>`.
    pub fn summary(&self) -> String {
        match &self.failure {
            Some(failure) => format!("not linted: {failure}"),
            None => self.report.summary(),
        }
    }

    /// Why a strict push refuses this version, if it does.
    fn strict_refusal(&self) -> Option<String> {
        if let Some(failure) = &self.failure {
            return Some(format!(
                "a strict push needs a lint, and the lint could not read the template: {failure}"
            ));
        }
        let first = self
            .report
            .findings
            .iter()
            .find(|f| f.severity == abode_lint::Severity::Error)?;
        Some(format!(
            "a strict push refuses templates with lint errors, and this one has {} (first: {}:{}:{} {} {}); \
             `abode templates lint DIR` lists them",
            self.report.summary(),
            first.file,
            first.line,
            first.column,
            first.rule,
            first.resource
        ))
    }
}

/// Whether activating a version needs its preview acknowledged, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewGate {
    pub preview: Preview,
    /// Why it needs acknowledging; `None`: nothing would be held or blocked.
    pub concern: Option<String>,
}

impl PreviewGate {
    pub(crate) fn of(preview: Preview) -> PreviewGate {
        let concern = activation_concern(&preview);
        PreviewGate { preview, concern }
    }
}

/// Why activating the version of `preview` (its latest preview of the whole
/// fleet) needs it acknowledged: it would hold or block workspaces, some
/// could not be planned (their fate is unknown), or it has not finished;
/// `None` otherwise.
pub fn activation_concern(preview: &Preview) -> Option<String> {
    if preview.pending > 0 {
        Some(format!(
            "its preview has not finished ({} of {} workspaces still to plan)",
            preview.pending, preview.total
        ))
    } else if preview.held + preview.blocked + preview.failed > 0 {
        let mut concern = format!(
            "its preview would hold {} and block {} of {} workspaces",
            preview.held, preview.blocked, preview.total
        );
        if preview.failed > 0 {
            concern.push_str(&format!(", and could not plan {}", preview.failed));
        }
        Some(concern)
    } else {
        None
    }
}

/// Lints an unpacked template with the built-in persistent types.
async fn lint_template(template_dir: &Path) -> Result<VersionLint, ControlError> {
    let dir = template_dir.to_path_buf();
    let result = tokio::task::spawn_blocking(move || {
        abode_lint::lint_dir(&dir, &abode_lint::Options::default())
    })
    .await
    .map_err(|error| ControlError::Internal(format!("lint task failed: {error}")))?;
    Ok(match result {
        Ok(report) => VersionLint {
            report,
            failure: None,
        },
        Err(error) => VersionLint {
            report: abode_lint::Report::new(Vec::new()),
            failure: Some(error.to_string()),
        },
    })
}

/// Readies an unpacked template in `dir` (`dir/TEMPLATE_SUBDIR`) for
/// Terraform as a push does (the CLI config naming the provider mirror, the
/// provider lock, the sandbox's ownership) and runs `terraform init`;
/// answers the environment the next runs use.
pub(crate) async fn init_template(
    config: &TemplatesConfig,
    dir: &Path,
    template_dir: &Path,
) -> Result<Vec<(String, String)>, ControlError> {
    let mirror = config.provider_mirror.clone();
    let (config_dir, lock_dir) = (dir.to_path_buf(), template_dir.to_path_buf());
    let isolation = config.isolation.clone();
    let cli_config = tokio::task::spawn_blocking(move || {
        let cli_config = workdir::write_cli_config(&config_dir, mirror.as_deref())?;
        workdir::write_provider_lock(&lock_dir, mirror.as_deref())?;
        // Terraform writes here as the sandbox's user.
        if let Some(isolation) = &isolation {
            isolation
                .hand_over(&config_dir)
                .map_err(|error| error.to_string())?;
        }
        Ok::<_, String>(cli_config)
    })
    .await
    .map_err(|error| ControlError::Internal(format!("preparing the work dir failed: {error}")))?
    .map_err(ControlError::Internal)?;
    let mut env = config.terraform_env.clone();
    env.push((
        "TF_CLI_CONFIG_FILE".to_string(),
        cli_config.display().to_string(),
    ));
    run::capture(
        &Invocation::new(template_dir, ["init", "-input=false", "-no-color"], &env)
            .isolated(config.isolation.as_ref(), dir),
    )
    .await
    .map_err(as_template_error("init"))?;
    Ok(env)
}

/// A Terraform step's failure: the template's fault when Terraform said
/// so, the server's when it could not run.
fn as_template_error(step: &'static str) -> impl Fn(RunError) -> ControlError {
    move |error: RunError| match error {
        RunError::Failed { message, .. } => {
            ControlError::InvalidTemplate(format!("terraform {step} failed: {message}"))
        }
        other => ControlError::Internal(other.to_string()),
    }
}

/// What a pushed template passed, and the parameters and presets it declares.
struct Validated {
    /// Terraform's validation message.
    message: String,
    /// The parameter declarations read from a template-import plan.
    parameters: Vec<ParameterDefinition>,
    /// The presets read from the same plan, as the JSON the version keeps.
    presets: String,
    /// The lint's findings.
    lint: VersionLint,
    /// The external auth providers it asks for.
    external_auth: Vec<abode_contract::external_auth::ExternalAuthNeed>,
}

/// Checks a pushed template: safe to unpack, `terraform init` and
/// `terraform validate` pass, and a template-import plan reads its parameter
/// declarations (which the door checks every build's values against) and
/// its presets (checked against those declarations).
async fn validate_template(
    config: &TemplatesConfig,
    archive_bytes: &[u8],
    strict: bool,
) -> Result<Validated, ControlError> {
    let dir = workdir::create(&config.work_dir, &format!("push-{}", abode_store::new_id()))
        .map_err(|error| ControlError::Internal(format!("cannot create a work dir: {error}")))?;
    let result = validate_in(config, archive_bytes, &dir, strict).await;
    workdir::remove_off_runtime(dir).await;
    result
}

/// Abode keeps every build's state, and its lock is what keeps one
/// Terraform per workspace: a template with a backend of its own is refused
/// (`state_backend.rs`).
async fn refuse_own_backend(template_dir: &Path) -> Result<(), ControlError> {
    let dir = template_dir.to_path_buf();
    let declared = tokio::task::spawn_blocking(move || {
        abode_lint::read_dir(&dir)
            .ok()
            .and_then(|files| abode_lint::declared_backend(&files))
    })
    .await
    .map_err(|error| ControlError::Internal(format!("backend check failed: {error}")))?;
    match declared {
        Some(backend) => Err(ControlError::InvalidTemplate(format!(
            "{}:{}:{}: the template declares its own state backend ({}); Abode keeps every \
             workspace's state itself and locks it for one Terraform at a time: remove the block",
            backend.file, backend.line, backend.column, backend.what
        ))),
        None => Ok(()),
    }
}

async fn validate_in(
    config: &TemplatesConfig,
    archive_bytes: &[u8],
    dir: &Path,
    strict: bool,
) -> Result<Validated, ControlError> {
    let template_dir = dir.join(TEMPLATE_SUBDIR);
    let bytes = archive_bytes.to_vec();
    let target = template_dir.clone();
    tokio::task::spawn_blocking(move || archive::unpack(&bytes, &target))
        .await
        .map_err(|error| ControlError::Internal(format!("unpack task failed: {error}")))??;
    refuse_own_backend(&template_dir).await?;
    // The lint reads the files before Terraform touches the folder, and a
    // strict push it refuses costs no Terraform run.
    let lint = lint_template(&template_dir).await?;
    if let Some(refusal) = lint.strict_refusal().filter(|_| strict) {
        return Err(ControlError::InvalidTemplate(refusal));
    }
    let env = init_template(config, dir, &template_dir).await?;
    let output = run::capture(
        &Invocation::new(&template_dir, ["validate", "-no-color"], &env)
            .isolated(config.isolation.as_ref(), dir),
    )
    .await
    .map_err(as_template_error("validate"))?;
    let message = String::from_utf8_lossy(&output)
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("The configuration is valid.")
        .to_string();
    let imported =
        declarations_from_template(&template_dir, &env, dir, config.isolation.as_ref()).await?;
    let declarations = imported.declarations;
    // What a delete would retain must be something Terraform can forget.
    if let Ok(plan) = abode_guard::read_plan_slice(&imported.plan_json) {
        if let Some(reason) = abode_guard::annotations(&plan).unforgettable.first() {
            return Err(ControlError::InvalidTemplate(reason.clone()));
        }
    }
    // A required provider this server does not have could never be linked.
    if let Some(missing) = declarations
        .external_auth
        .iter()
        .find(|need| !need.optional && !config.external_auth_providers.contains(&need.provider))
    {
        let configured = if config.external_auth_providers.is_empty() {
            "it has none (--external-auth-config)".to_string()
        } else {
            format!("it has {}", config.external_auth_providers.join(", "))
        };
        return Err(ControlError::InvalidTemplate(format!(
            "data.abode_external_auth.{0}: the template requires external auth provider \"{0}\", which this server does not configure: {configured}",
            missing.provider
        )));
    }
    let as_json = |value: Result<String, serde_json::Error>| {
        value.map_err(|error| ControlError::Internal(error.to_string()))
    };
    Ok(Validated {
        message,
        parameters: declarations.parameters,
        presets: as_json(serde_json::to_string(&declarations.presets))?,
        lint,
        external_auth: declarations.external_auth,
    })
}
