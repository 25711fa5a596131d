//! Ports shared without a template change (`abode port-share`,
//! docs/apps.md): which port of which agent of a workspace is open to whom,
//! and how far a template lets its workspaces share.

use abode_contract::apps::AppShare;

/// A shared port of a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortShare {
    pub workspace_id: String,
    pub agent_name: String,
    pub port: u16,
    pub share: AppShare,
    pub created_by: String,
    pub created_at: i64,
}

from_row! {
    pub(crate) struct PortShareRow {
        workspace_id: String,
        agent_name: String,
        port: i64,
        share: String,
        created_by: String,
        created_at: i64,
    }
}

impl PortShareRow {
    pub(crate) fn decode(self) -> Result<PortShare, crate::Corrupt> {
        let of = format!("port share {}:{}", self.workspace_id, self.port);
        let share = AppShare::parse(&self.share).ok_or_else(|| crate::Corrupt {
            what: "share level",
            of: of.clone(),
            reason: format!("unknown share level `{}`", self.share),
        })?;
        let port = u16::try_from(self.port).map_err(|_| crate::Corrupt {
            what: "port",
            of,
            reason: format!("{} is not a port", self.port),
        })?;
        Ok(PortShare {
            workspace_id: self.workspace_id,
            agent_name: self.agent_name,
            port,
            share,
            created_by: self.created_by,
            created_at: self.created_at,
        })
    }
}

/// Decodes a template's stored `max_port_share`.
pub(crate) fn decode_max(template_id: &str, stored: &str) -> Result<AppShare, crate::Corrupt> {
    AppShare::parse(stored).ok_or_else(|| crate::Corrupt {
        what: "maximum port share level",
        of: format!("template {template_id}"),
        reason: format!("unknown share level `{stored}`"),
    })
}

/// The port share methods of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! port_share_queries {
    () => {
    pub(crate) async fn template_max_port_share(
        &self,
        template_id: &str,
    ) -> Result<abode_contract::apps::AppShare, StoreError> {
        let stored: String = sqlx::query_scalar(&sql("SELECT max_port_share FROM templates WHERE id = ?"))
            .bind(template_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("template"))?;
        Ok(crate::port_shares::decode_max(template_id, &stored)?)
    }

    pub(crate) async fn set_template_max_port_share(
        &self,
        template_id: &str,
        max: abode_contract::apps::AppShare,
    ) -> Result<(), StoreError> {
        sqlx::query(&sql("UPDATE templates SET max_port_share = ? WHERE id = ?"))
            .bind(max.as_str())
            .bind(template_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("template"))?;
        Ok(())
    }

    pub(crate) async fn put_port_share(
        &self,
        workspace_id: &str,
        agent_name: &str,
        port: u16,
        share: abode_contract::apps::AppShare,
        created_by: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(&sql(
            "INSERT INTO workspace_port_shares (workspace_id, agent_name, port, share, created_by, created_at) \
             VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (workspace_id, agent_name, port) DO UPDATE SET \
             share = excluded.share, created_by = excluded.created_by, created_at = excluded.created_at",
        ))
        .bind(workspace_id)
        .bind(agent_name)
        .bind(i64::from(port))
        .bind(share.as_str())
        .bind(created_by)
        .bind(self.now_ms())
        .execute(&self.pool)
        .await
        .map_err(db_error("port share"))?;
        Ok(())
    }

    pub(crate) async fn delete_port_share(
        &self,
        workspace_id: &str,
        agent_name: &str,
        port: u16,
    ) -> Result<bool, StoreError> {
        let deleted = sqlx::query(&sql(
            "DELETE FROM workspace_port_shares WHERE workspace_id = ? AND agent_name = ? AND port = ?",
        ))
        .bind(workspace_id)
        .bind(agent_name)
        .bind(i64::from(port))
        .execute(&self.pool)
        .await
        .map_err(db_error("port share"))?;
        Ok(deleted.rows_affected() > 0)
    }

    pub(crate) async fn port_shares(
        &self,
        workspace_id: &str,
    ) -> Result<Vec<crate::port_shares::PortShare>, StoreError> {
        let rows: Vec<crate::port_shares::PortShareRow> = sqlx::query_as(&sql(
            "SELECT workspace_id, agent_name, port, share, created_by, created_at \
             FROM workspace_port_shares WHERE workspace_id = ? ORDER BY agent_name, port",
        ))
        .bind(workspace_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("port share"))?;
        Ok(rows
            .into_iter()
            .map(crate::port_shares::PortShareRow::decode)
            .collect::<Result<Vec<_>, _>>()?)
    }
    };
}
pub(crate) use port_share_queries;
