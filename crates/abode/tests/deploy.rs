//! The Kubernetes manifests (`deploy/kubernetes`) as an operator applies
//! them: rendered by `kubectl kustomize` and checked against Kubernetes' own
//! schemas (PyPI's `kubernetes-validate`, installed by `scripts/bootstrap.sh`
//! and named by `ABODE_KUBERNETES_VALIDATE`), strictly: a misspelt field is
//! an error, not a field Kubernetes silently drops. Then what the schemas
//! cannot say, and issue 28 asks of them: no privileged container, probes on
//! the server's health and readiness, the database URL and the provisioner
//! key only from Secrets.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn validator() -> PathBuf {
    match std::env::var_os("ABODE_KUBERNETES_VALIDATE") {
        Some(path) => PathBuf::from(path),
        None => panic!(
            "ABODE_KUBERNETES_VALIDATE is not set: run the tests with scripts/run-tests, which installs kubernetes-validate"
        ),
    }
}

/// `kubectl kustomize deploy/kubernetes`, as YAML documents.
fn rendered() -> String {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(project_root().join("deploy/kubernetes"))
        .output()
        .expect("kubectl runs (scripts/bootstrap.sh checks it is on PATH)");
    assert!(
        output.status.success(),
        "kubectl kustomize failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Runs the validator on `yaml`; its verdict and what it printed.
fn validate(yaml: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rendered.yaml");
    std::fs::write(&file, yaml).unwrap();
    let output = Command::new(validator())
        .arg("--strict")
        .arg(&file)
        .output()
        .expect("kubernetes-validate runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), said)
}

/// The rendered resources, as JSON values, read by the PyYAML the
/// validator's virtualenv carries (the project has no YAML reader of its own
/// and needs none).
fn resources() -> Vec<serde_json::Value> {
    let python = validator().with_file_name("python3");
    let mut child = Command::new(&python)
        .args([
            "-c",
            "import json, sys, yaml; json.dump([d for d in yaml.safe_load_all(sys.stdin) if d], sys.stdout)",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot run {}: {err}", python.display()));
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(rendered().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn the_kubernetes_manifests_pass_kubernetes_schemas() {
    let yaml = rendered();
    let (passed, said) = validate(&yaml);
    assert!(passed, "deploy/kubernetes does not validate:\n{said}");
    for kind in [
        "Deployment",
        "Service",
        "Ingress",
        "PodDisruptionBudget",
        "ConfigMap",
    ] {
        assert!(
            yaml.contains(&format!("kind: {kind}\n")),
            "no {kind} rendered"
        );
    }
}

#[test]
fn the_validator_refuses_what_kubernetes_would_refuse() {
    // Without this, a validator that passes everything would pass the
    // manifests too.
    let yaml = rendered().replacen("replicas: 2", "replicas: two", 1);
    let (passed, said) = validate(&yaml);
    assert!(!passed, "a Deployment with replicas: two passed:\n{said}");
    let yaml = rendered().replacen("containerPort:", "containerPrt:", 1);
    let (passed, said) = validate(&yaml);
    assert!(
        !passed,
        "a misspelt field passed strict validation:\n{said}"
    );
}

#[test]
fn the_servers_and_daemons_run_unprivileged_with_secrets_from_secrets() {
    let resources = resources();
    let deployments: Vec<&serde_json::Value> = resources
        .iter()
        .filter(|r| r["kind"] == "Deployment")
        .collect();
    assert_eq!(
        deployments.len(),
        2,
        "a server and a provisioner Deployment"
    );
    for deployment in &deployments {
        let name = deployment["metadata"]["name"].as_str().unwrap();
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{name}");
        for container in pod["containers"].as_array().unwrap() {
            let security = &container["securityContext"];
            assert_eq!(security["privileged"], false, "{name}");
            assert_eq!(security["allowPrivilegeEscalation"], false, "{name}");
            assert_eq!(security["capabilities"]["drop"][0], "ALL", "{name}");
            assert!(
                container["resources"]["requests"].is_object(),
                "{name}: no resource requests"
            );
            // No secret value is written in the manifests.
            for variable in container["env"].as_array().into_iter().flatten() {
                let variable_name = variable["name"].as_str().unwrap();
                assert!(
                    !variable_name.contains("DATABASE_URL") || variable["value"].is_null(),
                    "{name}: {variable_name} is written in the manifest"
                );
            }
        }
    }
    let server = deployments
        .iter()
        .find(|d| d["metadata"]["name"] == "abode-server")
        .unwrap();
    assert!(server["spec"]["replicas"].as_u64().unwrap() >= 2);
    let container = &server["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["livenessProbe"]["httpGet"]["path"],
        "/api/v1/health"
    );
    assert_eq!(
        container["readinessProbe"]["httpGet"]["path"],
        "/api/v1/ready"
    );
    let database_url = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "ABODE_DATABASE_URL")
        .expect("the server gets its database URL");
    assert_eq!(
        database_url["valueFrom"]["secretKeyRef"]["name"],
        "abode-database"
    );
    let daemon = deployments
        .iter()
        .find(|d| d["metadata"]["name"] == "abode-provisioner")
        .unwrap();
    let volumes = daemon["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap();
    assert!(
        volumes
            .iter()
            .any(|v| v["secret"]["secretName"] == "abode-provisioner-key"),
        "the daemon's key comes from a Secret"
    );
    let pdbs = resources
        .iter()
        .filter(|r| r["kind"] == "PodDisruptionBudget")
        .count();
    assert_eq!(pdbs, 2);
    let ingress = resources.iter().find(|r| r["kind"] == "Ingress").unwrap();
    assert!(
        ingress["spec"]["tls"][0]["secretName"].is_string(),
        "the Ingress serves TLS"
    );
}
