//! Templates and their versions: listing, presets, pushing an archive,
//! activating a version, and a template's access list.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;

use abode_sdk::requests::ActivateVersion;

use crate::extract::{
    discard_upload, list_query, parse_json, parse_number, read_upload, ListQueryResult,
};
use crate::pages::{ok, page_answer, ApiResult, PageQuery};
use crate::views::{preset_view, preview_view, template_view, unsigned, version_view};
use crate::{ApiError, AppState, Authenticated};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/templates", get(list_templates))
        .route("/templates/:name", get(get_template))
        .route("/templates/:name/presets", get(list_presets))
        .route(
            "/templates/:name/versions",
            get(list_versions)
                .post(push_version)
                .layer(DefaultBodyLimit::disable()),
        )
        .route("/templates/:name/versions/:number", get(get_version))
        .route(
            "/templates/:name/versions/:number/activate",
            post(activate_version),
        )
        .route(
            "/templates/:name/deprecation",
            axum::routing::put(deprecate).delete(undeprecate),
        )
        .route(
            "/templates/:name/permissions",
            get(get_permissions).put(set_permission),
        )
}

/// A template's access list as the wire shows it.
fn permissions_view(
    template: &abode_store::Template,
    entries: &[abode_store::TemplateAccessEntry],
) -> abode_sdk::TemplatePermissions {
    abode_sdk::TemplatePermissions {
        template: template.name.clone(),
        permissions: entries
            .iter()
            .map(|entry| abode_sdk::TemplatePermission {
                kind: entry.kind.clone(),
                name: entry.name.clone(),
                role: entry.role.to_string(),
            })
            .collect(),
    }
}

async fn get_permissions(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
) -> ApiResult {
    let (template, entries) = state
        .control
        .templates()
        .template_permissions(&caller, &name)
        .await?;
    ok(StatusCode::OK, permissions_view(&template, &entries))
}

async fn set_permission(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    // Refused (or not found) before the body is read.
    state
        .control
        .templates()
        .template_for(
            &caller,
            &name,
            abode_control::authz::Action::TemplatePermissionsEdit,
        )
        .await?;
    let body: abode_sdk::requests::TemplatePermissionChange = parse_json(body)?;
    let whom = match (body.user, body.group) {
        (Some(user), None) => abode_control::PermissionSubject::User(user),
        (None, Some(group)) => abode_control::PermissionSubject::Group(group),
        _ => return Err(ApiError::bad_request("name one `user` or one `group`")),
    };
    let role = match body.role.as_str() {
        "none" => None,
        other => Some(other.parse::<abode_store::TemplateRole>().map_err(|_| {
            ApiError::bad_request(format!("unknown role {other:?} (one of: use, admin, none)"))
        })?),
    };
    let (template, entries) = state
        .control
        .templates()
        .set_template_permission(&caller, &name, &whom, role)
        .await?;
    ok(StatusCode::OK, permissions_view(&template, &entries))
}

async fn list_templates(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: ListQueryResult<PageQuery>,
) -> ApiResult {
    let query = list_query(query)?;
    let page = state
        .control
        .templates()
        .list_templates(&caller, query.after.as_deref(), query.limit)
        .await?;
    let templates: Vec<abode_sdk::Template> = page.items.iter().map(template_view).collect();
    page_answer("templates", templates, page.next)
}

async fn get_template(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
) -> ApiResult {
    let template = state
        .control
        .templates()
        .read_template(&caller, &name)
        .await?;
    template_answer(&template)
}

async fn list_versions(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
) -> ApiResult {
    let versions = state
        .control
        .templates()
        .template_versions(&caller, &name)
        .await?;
    let versions: Vec<abode_sdk::TemplateVersion> = versions.iter().map(version_view).collect();
    ok(StatusCode::OK, abode_sdk::VersionsAnswer { versions })
}

#[derive(Deserialize)]
struct PresetsQuery {
    #[serde(default)]
    version: Option<i64>,
}

async fn list_presets(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
    query: Result<Query<PresetsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    if let Some(number) = query.version.filter(|number| *number < 1) {
        return Err(ApiError::bad_request(format!(
            "invalid version `{number}`: use a positive number"
        )));
    }
    let (version, presets) = state
        .control
        .templates()
        .template_presets(&caller, &name, query.version)
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::TemplatePresets {
            template: version.template_name,
            version: unsigned(version.number),
            presets: presets.iter().map(preset_view).collect(),
        },
    )
}

#[derive(Deserialize)]
struct PushQuery {
    #[serde(default)]
    activate: Option<bool>,
    #[serde(default)]
    message: Option<String>,
    /// Refuse the version when the lint finds an error-level hazard.
    #[serde(default)]
    strict: Option<bool>,
    /// The provisioner tags its builds need, `key=value` separated by commas.
    #[serde(default)]
    provisioner_tags: Option<String>,
    /// With `activate`: the preview of these files acknowledged, when
    /// activating them needs one.
    #[serde(default)]
    acknowledge_preview: Option<String>,
}

async fn push_version(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
    query: Result<Query<PushQuery>, axum::extract::rejection::QueryRejection>,
    body: axum::body::Body,
) -> ApiResult {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    let message = query.message.as_deref().unwrap_or("");
    if let Err(refusal) = state
        .control
        .templates()
        .may_push_template(&caller, &name, message)
        .await
    {
        // Nothing of it is kept; it is read (and dropped) only so that the
        // client, still sending, gets to read why.
        discard_upload(body).await;
        return Err(refusal.into());
    }
    let archive = read_upload(body).await?;
    if archive.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_archive",
            "the request body is empty: send the template folder as a .tar.gz archive",
        ));
    }
    let options = abode_control::PushOptions {
        activate: query.activate.unwrap_or(false),
        message: message.to_string(),
        strict: query.strict.unwrap_or(false),
        provisioner_tags: query
            .provisioner_tags
            .as_deref()
            .map(|tags| {
                tags.split(',')
                    .filter(|tag| !tag.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        acknowledge_preview: query.acknowledge_preview,
    };
    let (template, version, lint) = state
        .control
        .templates()
        .push_template_with(&caller, &name, archive.to_vec(), &options)
        .await?;
    let provisioner_tags = state
        .control
        .templates()
        .provisioner_tags_of(&version)
        .await?;
    let warning = state.host.unserved_warning(&provisioner_tags).await;
    ok(
        StatusCode::CREATED,
        abode_sdk::TemplateVersionResponse {
            lint: Some(lint),
            provisioner_tags,
            template: template_view(&template),
            version: version_view(&version),
            warning,
        },
    )
}

/// One version with the lint's findings it keeps (`null`: pushed before
/// the lint existed).
async fn get_version(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((name, number)): Path<(String, String)>,
) -> ApiResult {
    let number = parse_number(&number, "version")?
        .ok_or_else(|| ApiError::bad_request("give a version number"))?;
    let (version, lint) = state
        .control
        .templates()
        .template_version_detail(&caller, &name, number)
        .await?;
    let gate = state
        .control
        .previews()
        .gate(&caller, &name, number)
        .await?;
    let preview = gate.as_ref().map(|gate| preview_view(&gate.preview));
    let provisioner_tags = state
        .control
        .templates()
        .provisioner_tags_of(&version)
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::TemplateVersionDetail {
            lint,
            preview,
            provisioner_tags,
            version: version_view(&version),
        },
    )
}

async fn activate_version(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((name, number)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: ActivateVersion = parse_json(body)?;
    let number = parse_number(&number, "version")?
        .ok_or_else(|| ApiError::bad_request("give a version number to activate"))?;
    let (template, version) = state
        .control
        .templates()
        .activate_previewed_version(&caller, &name, number, body.acknowledge_preview.as_deref())
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::TemplateActivated {
            template: template_view(&template),
            version: version_view(&version),
        },
    )
}

/// Deprecates a template: no new workspaces from it (its admins; audited).
async fn deprecate(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: abode_sdk::requests::DeprecateTemplate = parse_json(body)?;
    let deprecation = Some((body.message.as_str(), body.replacement.as_deref()));
    let template = state
        .control
        .templates()
        .set_deprecation(&caller, &name, deprecation)
        .await?;
    template_answer(&template)
}

/// Undeprecates a template (its admins; audited).
async fn undeprecate(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
) -> ApiResult {
    let template = state
        .control
        .templates()
        .set_deprecation(&caller, &name, None)
        .await?;
    template_answer(&template)
}

/// A template as the API answers it (200).
fn template_answer(template: &abode_store::Template) -> ApiResult {
    ok(
        StatusCode::OK,
        abode_sdk::TemplateAnswer {
            template: template_view(template),
        },
    )
}
