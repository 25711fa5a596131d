//! Shared harness of the API tests: an in-process server on a free loopback
//! port with a temporary data dir, an HTTP helper, archive builders.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::time::{Duration, Instant};

use abode_api::{Server, ServerOptions};
use serde_json::{json, Value};

/// A template whose apply takes `seconds` (a local-exec sleep), so that
/// tests can act while a build runs.
pub fn slow_template(seconds: u32) -> Vec<(&'static str, String)> {
    vec![(
        "main.tf",
        format!(
            r#"resource "terraform_data" "home" {{
  input = "home"
}}
resource "terraform_data" "slow" {{
  input = "slow"
  provisioner "local-exec" {{
    command = "echo sleeping; sleep {seconds}"
  }}
}}
"#
        ),
    )]
}

pub fn quick_template() -> Vec<(&'static str, String)> {
    vec![(
        "main.tf",
        r#"variable "size" {
  default = "small"
}
resource "terraform_data" "home" {
  input = "home"
}
resource "terraform_data" "process" {
  input = var.size
}
output "size" {
  value = terraform_data.process.output
}
"#
        .to_string(),
    )]
}

/// A `.tar.gz` of the given files (paths as written, so tests can forge bad ones).
pub fn archive(files: &[(&str, String)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    for (path, content) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        // Written by hand so that `..` and absolute paths reach the server.
        let name = header.as_old_mut().name.as_mut();
        name[..path.len()].copy_from_slice(path.as_bytes());
        header.set_cksum();
        builder.append(&header, content.as_bytes()).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

pub fn archive_with_symlink(link: &str, target: &str) -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    let main = quick_template().remove(0).1;
    let mut header = tar::Header::new_gnu();
    header.set_size(main.len() as u64);
    header.set_mode(0o644);
    builder
        .append_data(&mut header, "main.tf", main.as_bytes())
        .unwrap();
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Symlink);
    header.set_size(0);
    builder.append_link(&mut header, link, target).unwrap();
    builder.into_inner().unwrap().finish().unwrap()
}

pub fn require_terraform() {
    let found = std::process::Command::new("terraform")
        .arg("version")
        .output()
        .is_ok_and(|output| output.status.success());
    assert!(
        found,
        "terraform is not installed or not on PATH: these tests run real Terraform 1.x"
    );
}

pub struct Harness {
    pub server: Option<Server>,
    pub base: String,
    pub data_dir: tempfile::TempDir,
    /// The server's database, opened apart: a test looks behind the API
    /// here, where no route can (the control plane keeps its store).
    store: abode_store::Store,
}

impl Harness {
    pub async fn start() -> Harness {
        require_terraform();
        let data_dir = tempfile::tempdir().unwrap();
        Harness::start_in(data_dir).await
    }

    pub async fn start_in(data_dir: tempfile::TempDir) -> Harness {
        Harness::start_with(data_dir, |_| {}).await
    }

    pub async fn start_with(
        data_dir: tempfile::TempDir,
        adjust: impl FnOnce(&mut ServerOptions),
    ) -> Harness {
        require_terraform();
        let mut options =
            ServerOptions::new("127.0.0.1:0".parse().unwrap(), data_dir.path().into());
        options.provisioners = 2;
        options.cancel_grace = Duration::from_secs(5);
        options.agent_connect_timeout = Duration::from_secs(2);
        options.agent_heartbeat_timeout = Duration::from_secs(2);
        adjust(&mut options);
        let database_url = options.database_url.clone();
        let server = Server::start(options).await.unwrap();
        let base = format!("http://{}/api/v1", server.local_addr());
        let store = match database_url {
            Some(url) => abode_store::Store::open_postgres(&url).await.unwrap(),
            None => {
                abode_store::Store::open_sqlite(&data_dir.path().join(abode_api::DATABASE_FILE))
                    .await
                    .unwrap()
            }
        };
        Harness {
            server: Some(server),
            base,
            data_dir,
            store,
        }
    }

    /// The server's database, read and written behind the API's back.
    pub fn store(&self) -> &abode_store::Store {
        &self.store
    }

    pub fn server(&self) -> &Server {
        self.server.as_ref().unwrap()
    }

    pub async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let url = format!("{}{}", self.base, path);
        let method = method.to_string();
        let token = token.map(String::from);
        tokio::task::spawn_blocking(move || {
            let mut request = ureq::request(&method, &url);
            if let Some(token) = token {
                request = request.set("Authorization", &format!("Bearer {token}"));
            }
            let result = match body {
                Some(body) => request.send_json(body),
                None => request.call(),
            };
            respond(result)
        })
        .await
        .unwrap()
    }

    pub async fn push(&self, token: &str, name: &str, query: &str, bytes: Vec<u8>) -> (u16, Value) {
        let url = format!("{}/templates/{name}/versions{query}", self.base);
        let token = token.to_string();
        tokio::task::spawn_blocking(move || {
            respond(
                ureq::post(&url)
                    .set("Authorization", &format!("Bearer {token}"))
                    .set("Content-Type", "application/gzip")
                    .send_bytes(&bytes),
            )
        })
        .await
        .unwrap()
    }

    pub async fn owner(&self) -> String {
        let (status, body) = self
            .call(
                "POST",
                "/users/first",
                None,
                Some(json!({"username": "alice", "email": "alice@example.com", "password": "correct horse"})),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        body["token"].as_str().unwrap().to_string()
    }

    /// Polls a build until it reaches a final status; returns its JSON.
    pub async fn wait_build(&self, token: &str, workspace: &str, number: i64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (status, body) = self
                .call(
                    "GET",
                    &format!("/workspaces/{workspace}/builds/{number}"),
                    Some(token),
                    None,
                )
                .await;
            assert_eq!(status, 200, "{body}");
            let build = body["build"].clone();
            if ["succeeded", "failed", "canceled"].contains(&build["status"].as_str().unwrap()) {
                return build;
            }
            assert!(
                Instant::now() < deadline,
                "build #{number} did not finish: {build}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn wait_status(&self, token: &str, workspace: &str, number: i64, wanted: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, body) = self
                .call(
                    "GET",
                    &format!("/workspaces/{workspace}/builds/{number}"),
                    Some(token),
                    None,
                )
                .await;
            if body["build"]["status"] == wanted {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "build #{number} never {wanted}: {body}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The workspace's stored Terraform state, read from the store.
    pub async fn stored_state(&self, token: &str, workspace: &str) -> Option<Vec<u8>> {
        let (_, body) = self
            .call(
                "GET",
                &format!("/workspaces/{workspace}"),
                Some(token),
                None,
            )
            .await;
        let workspace_id = body["workspace"]["id"].as_str().unwrap().to_string();
        self.store().state(&workspace_id).await.unwrap()
    }

    pub async fn log_text(&self, token: &str, workspace: &str, number: i64) -> String {
        let (status, body) = self
            .call(
                "GET",
                &format!("/workspaces/{workspace}/builds/{number}/logs"),
                Some(token),
                None,
            )
            .await;
        assert_eq!(status, 200, "{body}");
        body["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|line| {
                format!(
                    "{} {} {}\n",
                    line["stage"].as_str().unwrap(),
                    line["level"].as_str().unwrap(),
                    line["text"].as_str().unwrap()
                )
            })
            .collect()
    }

    pub async fn stop(mut self) -> tempfile::TempDir {
        if let Some(server) = self.server.take() {
            server.shutdown().await;
        }
        self.data_dir
    }
}

pub fn respond(result: Result<ureq::Response, ureq::Error>) -> (u16, Value) {
    let response = match result {
        Ok(response) => response,
        Err(ureq::Error::Status(_, response)) => response,
        Err(other) => panic!("transport error: {other}"),
    };
    let status = response.status();
    assert!(
        response.header("x-request-id").is_some(),
        "every answer has a request id"
    );
    let text = response.into_string().unwrap();
    // A body that is not one JSON value (an export's JSON lines or CSV)
    // comes back as text.
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    (status, body)
}
