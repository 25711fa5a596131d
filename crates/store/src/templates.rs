//! Templates and their immutable versions: pushing a version (creating the
//! template on its first push), reading versions and archives, choosing the
//! active version, and the template page by name.

use crate::records::TemplateVersion;

pub(crate) const TEMPLATE_SELECT: &str =
    "SELECT t.id, t.name, t.active_version_id, v.number AS active_version, \
     t.created_at, t.updated_at, t.deprecation_message, t.deprecation_replacement \
     FROM templates t LEFT JOIN template_versions v ON v.id = t.active_version_id";

pub(crate) const VERSION_SELECT: &str =
    "SELECT v.id, v.template_id, t.name AS template_name, v.number, \
     COALESCE(t.active_version_id = v.id, FALSE) AS active, v.message, u.username AS created_by, \
     v.archive_sha256, v.validation_ok, v.validation_message, v.parameters, v.presets, v.created_at \
     FROM template_versions v \
     JOIN templates t ON t.id = v.template_id \
     JOIN users u ON u.id = v.created_by";

from_row! {
    /// A version as [`VERSION_SELECT`] reads it, its parameter declarations
    /// still text; it becomes a [`TemplateVersion`] only when they read.
    pub(crate) struct TemplateVersionRow {
        id: String,
        template_id: String,
        template_name: String,
        number: i64,
        active: bool,
        message: String,
        created_by: String,
        archive_sha256: String,
        validation_ok: bool,
        validation_message: String,
        /// The declarations' JSON text: only `stored::declarations` reads it.
        parameters_json: Option<String> = "parameters",
        presets: Option<String>,
        created_at: i64,
    }
}

impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for TemplateVersion
where
    TemplateVersionRow: sqlx::FromRow<'r, R>,
{
    fn from_row(row: &'r R) -> Result<TemplateVersion, sqlx::Error> {
        let row = TemplateVersionRow::from_row(row)?;
        let parameters = crate::stored::declarations(&row.id, row.parameters_json)?;
        Ok(TemplateVersion {
            id: row.id,
            template_id: row.template_id,
            template_name: row.template_name,
            number: row.number,
            active: row.active,
            message: row.message,
            created_by: row.created_by,
            archive_sha256: row.archive_sha256,
            validation_ok: row.validation_ok,
            validation_message: row.validation_message,
            parameters,
            presets: row.presets,
            created_at: row.created_at,
        })
    }
}

/// The template and version methods of [`crate::Store`]; expanded inside
/// each backend's `impl`.
macro_rules! template_queries {
    () => {
    pub(crate) async fn template_by_name(&self, name: &str) -> Result<Template, StoreError> {
        sqlx::query_as(&sql(&format!("{TEMPLATE_SELECT} WHERE t.name = ?")))
            .bind(name)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("template"))
    }

    pub(crate) async fn set_template_deprecation(
        &self,
        name: &str,
        deprecation: Option<(&str, Option<&str>)>,
    ) -> Result<Template, StoreError> {
        let (message, replacement) = deprecation.map_or((None, None), |(m, r)| (Some(m), r));
        let now = self.now_ms();
        let changed = sqlx::query(&sql(
            "UPDATE templates SET deprecation_message = ?, deprecation_replacement = ?, \
             deprecated_at = ?, updated_at = ? WHERE name = ?",
        ))
        .bind(message)
        .bind(replacement)
        .bind(message.map(|_| now))
        .bind(now)
        .bind(name)
        .execute(&self.pool)
        .await
        .map_err(db_error("template"))?;
        if changed.rows_affected() == 0 {
            return Err(StoreError::NotFound("template"));
        }
        self.template_by_name(name).await
    }

    pub(crate) async fn list_templates(&self) -> Result<Vec<Template>, StoreError> {
        sqlx::query_as(&sql(&format!("{TEMPLATE_SELECT} ORDER BY t.name")))
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("template"))
    }

    pub(crate) async fn create_template_version(
        &self,
        version: &NewTemplateVersion,
    ) -> Result<(Template, TemplateVersion), StoreError> {
        self.create_linted_template_version(version, None, &[], true, &[]).await
    }

    pub(crate) async fn create_linted_template_version(
        &self,
        version: &NewTemplateVersion,
        lint: Option<&str>,
        provisioner_tags: &[String],
        everyone_may_use: bool,
        external_auth: &[abode_contract::external_auth::ExternalAuthNeed],
    ) -> Result<(Template, TemplateVersion), StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        // The upsert comes first: it takes the write lock (see the module doc).
        let template_id: String = sqlx::query(
            &sql("INSERT INTO templates (id, name, created_at, updated_at) VALUES (?, ?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET updated_at = excluded.updated_at RETURNING id"),
        )
        .bind(new_id())
        .bind(&version.template_name)
        .bind(now)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error("template"))?
        .try_get("id")
        .map_err(StoreError::Database)?;
        let number: i64 = sqlx::query(
            &sql("SELECT COALESCE(MAX(number), 0) + 1 AS next FROM template_versions WHERE template_id = ?"),
        )
        .bind(&template_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error("template version"))?
        .try_get("next")
        .map_err(StoreError::Database)?;
        let version_id = new_id();
        sqlx::query(
            &sql("INSERT INTO template_versions (id, template_id, number, archive, archive_sha256, \
             message, created_by, validation_ok, validation_message, parameters, presets, created_at, \
             lint) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        )
        .bind(&version_id)
        .bind(&template_id)
        .bind(number)
        .bind(&version.archive)
        .bind(&version.archive_sha256)
        .bind(&version.message)
        .bind(&version.created_by)
        .bind(version.validation_ok)
        .bind(&version.validation_message)
        .bind(
            version
                .parameters
                .as_deref()
                .map($crate::stored::declarations_text)
                .transpose()?,
        )
        .bind(&version.presets)
        .bind(now)
        .bind(lint)
        .execute(&mut *tx)
        .await
        .map_err(db_error("template version"))?;
        for tag in provisioner_tags {
            sqlx::query(&sql(
                "INSERT INTO template_version_tags (template_version_id, tag) VALUES (?, ?) \
                 ON CONFLICT DO NOTHING",
            ))
            .bind(&version_id)
            .bind(tag)
            .execute(&mut *tx)
            .await
            .map_err(db_error("template version"))?;
        }
        for need in external_auth {
            sqlx::query(&sql(
                "INSERT INTO template_version_external_auth (template_version_id, provider_id, optional) \
                 VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            ))
            .bind(&version_id)
            .bind(&need.provider)
            .bind(need.optional)
            .execute(&mut *tx)
            .await
            .map_err(db_error("template version"))?;
        }
        // A template's first version is its creation: its access list
        // starts with `Everyone: use` unless the server says otherwise.
        if number == 1 && everyone_may_use {
            sqlx::query(&sql(
                "INSERT INTO template_access (template_id, group_id, role) \
                 VALUES (?, 'everyone', 'use') ON CONFLICT DO NOTHING",
            ))
            .bind(&template_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("template access"))?;
        }
        if version.activate || number == 1 {
            sqlx::query(&sql("UPDATE templates SET active_version_id = ? WHERE id = ?"))
                .bind(&version_id)
                .bind(&template_id)
                .execute(&mut *tx)
                .await
                .map_err(db_error("template"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        let template = self.template_by_name(&version.template_name).await?;
        let stored = self.template_version_by_id(&version_id).await?;
        Ok((template, stored))
    }

    pub(crate) async fn template_version_external_auth(
        &self,
        version_id: &str,
    ) -> Result<Vec<abode_contract::external_auth::ExternalAuthNeed>, StoreError> {
        let rows: Vec<(String, bool)> = sqlx::query_as(&sql(
            "SELECT provider_id, optional FROM template_version_external_auth \
             WHERE template_version_id = ? ORDER BY provider_id",
        ))
        .bind(version_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("template version"))?;
        Ok(rows
            .into_iter()
            .map(|(provider, optional)| abode_contract::external_auth::ExternalAuthNeed {
                provider,
                optional,
            })
            .collect())
    }

    pub(crate) async fn template_version_tags(
        &self,
        version_id: &str,
    ) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar(&sql(
            "SELECT tag FROM template_version_tags WHERE template_version_id = ? ORDER BY tag",
        ))
        .bind(version_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("template version"))
    }

    pub(crate) async fn list_template_versions(
        &self,
        template_id: &str,
    ) -> Result<Vec<TemplateVersion>, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{VERSION_SELECT} WHERE v.template_id = ? ORDER BY v.number"
        )))
        .bind(template_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("template version"))
    }

    pub(crate) async fn template_version(
        &self,
        template_id: &str,
        number: i64,
    ) -> Result<TemplateVersion, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{VERSION_SELECT} WHERE v.template_id = ? AND v.number = ?"
        )))
        .bind(template_id)
        .bind(number)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("template version"))
    }

    pub(crate) async fn template_version_by_id(
        &self,
        version_id: &str,
    ) -> Result<TemplateVersion, StoreError> {
        sqlx::query_as(&sql(&format!("{VERSION_SELECT} WHERE v.id = ?")))
            .bind(version_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("template version"))
    }

    pub(crate) async fn template_version_archive(
        &self,
        version_id: &str,
    ) -> Result<Vec<u8>, StoreError> {
        sqlx::query(&sql("SELECT archive FROM template_versions WHERE id = ?"))
            .bind(version_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("template version"))?
            .try_get("archive")
            .map_err(StoreError::Database)
    }

    pub(crate) async fn template_version_lint(
        &self,
        version_id: &str,
    ) -> Result<Option<String>, StoreError> {
        sqlx::query(&sql("SELECT lint FROM template_versions WHERE id = ?"))
            .bind(version_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("template version"))?
            .try_get("lint")
            .map_err(StoreError::Database)
    }

    pub(crate) async fn activate_template_version(
        &self,
        template_id: &str,
        version_id: &str,
    ) -> Result<(), StoreError> {
        let result = sqlx::query(
            &sql("UPDATE templates SET active_version_id = ?, updated_at = ? WHERE id = ? \
             AND EXISTS (SELECT 1 FROM template_versions WHERE id = ? AND template_id = ?)"),
        )
        .bind(version_id)
        .bind(self.now_ms())
        .bind(template_id)
        .bind(version_id)
        .bind(template_id)
        .execute(&self.pool)
        .await
        .map_err(db_error("template"))?;
        if result.rows_affected() == 0 {
            return Err(StoreError::NotFound("template version"));
        }
        Ok(())
    }

    // ---- the template page ----

    pub(crate) async fn list_template_page(
        &self,
        after: Option<&str>,
        limit: i64,
        usable_by: Option<&str>,
    ) -> Result<Page<Template>, StoreError> {
        let after = after
            .map(|cursor| decode_cursor(TEMPLATE_CURSOR, cursor, 1))
            .transpose()?;
        let after = after.as_ref().map(|key| key[0].as_str());
        let visible = match usable_by {
            Some(_) => $crate::groups::may_use_clause(3, false),
            None => "TRUE".to_string(),
        };
        let text = sql(&format!(
            "{TEMPLATE_SELECT} WHERE (?1 IS NULL OR t.name > ?1) AND {visible} \
             ORDER BY t.name LIMIT ?2"
        ))
        .into_owned();
        let mut query = sqlx::query_as(&text).bind(after).bind(limit + 1);
        if let Some(user_id) = usable_by {
            query = query.bind(user_id);
        }
        let rows: Vec<Template> = query
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("template"))?;
        Ok(paged(rows, limit, |template| {
            encode_cursor(TEMPLATE_CURSOR, &[&template.name])
        }))
    }
    };
}

pub(crate) use template_queries;
