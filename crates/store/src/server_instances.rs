//! Which process runs as each server id: its host, data dir and pid, and
//! when it last said it was alive (every keeper round). A copied data dir
//! carries its original's id; the control plane refuses to start a second
//! live process under one id (`Control::claim_server_identity`).

from_row! {
    /// A server id's running process as last recorded. Times are Unix ms.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ServerInstance {
        pub server_id: String,
        pub host: String,
        pub data_dir: String,
        pub pid: i64,
        pub beat_at: i64,
    }
}

/// The server instance methods of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! server_instance_queries {
    () => {
    pub(crate) async fn server_instance(
        &self,
        server_id: &str,
    ) -> Result<Option<ServerInstance>, StoreError> {
        sqlx::query_as(&sql(
            "SELECT server_id, host, data_dir, pid, beat_at FROM server_instances WHERE server_id = ?",
        ))
        .bind(server_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error("server instance"))
    }

    pub(crate) async fn put_server_instance(
        &self,
        server_id: &str,
        host: &str,
        data_dir: &str,
        pid: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(&sql(
            "INSERT INTO server_instances (server_id, host, data_dir, pid, beat_at) \
             VALUES (?, ?, ?, ?, ?) ON CONFLICT (server_id) DO UPDATE SET host = excluded.host, \
             data_dir = excluded.data_dir, pid = excluded.pid, beat_at = excluded.beat_at",
        ))
        .bind(server_id)
        .bind(host)
        .bind(data_dir)
        .bind(pid)
        .bind(self.now_ms())
        .execute(&self.pool)
        .await
        .map_err(db_error("server instance"))?;
        Ok(())
    }

    pub(crate) async fn beat_server_instance(
        &self,
        server_id: &str,
        host: &str,
        data_dir: &str,
        pid: i64,
    ) -> Result<bool, StoreError> {
        let beaten = sqlx::query(&sql(
            "UPDATE server_instances SET beat_at = ? \
             WHERE server_id = ? AND host = ? AND data_dir = ? AND pid = ?",
        ))
        .bind(self.now_ms())
        .bind(server_id)
        .bind(host)
        .bind(data_dir)
        .bind(pid)
        .execute(&self.pool)
        .await
        .map_err(db_error("server instance"))?;
        Ok(beaten.rows_affected() > 0)
    }

    pub(crate) async fn forget_server_instance(
        &self,
        server_id: &str,
        host: &str,
        data_dir: &str,
        pid: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(&sql(
            "DELETE FROM server_instances WHERE server_id = ? AND host = ? AND data_dir = ? AND pid = ?",
        ))
        .bind(server_id)
        .bind(host)
        .bind(data_dir)
        .bind(pid)
        .execute(&self.pool)
        .await
        .map_err(db_error("server instance"))?;
        Ok(())
    }
    };
}

pub(crate) use server_instance_queries;
