//! `abode provisioner keys` against a real server: an owner creates a key
//! whose secret is printed once, alone on stdout, and kept nowhere in
//! clear (not in the list, the audit log or the server's log); members are
//! refused; a duplicate name and a bad tag are refused in one line; a
//! deleted key is gone. (That a deleted key's secret no longer
//! authenticates is held by `crates/control/tests/provisioner_keys.rs`
//! until the daemon's routes use it.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util;

use util::Platform;

fn keys(platform: &Platform) -> Vec<serde_json::Value> {
    platform
        .run(&["provisioner", "keys", "list", "-o", "json"])
        .ok()
        .json()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn owners_create_list_and_delete_provisioner_keys_whose_secret_is_shown_once() {
    let platform = Platform::start();
    platform.login_owner();

    let created = platform
        .run(&[
            "provisioner",
            "keys",
            "create",
            "aws-prod",
            "--tag",
            "zone=b",
            "--tag",
            "cloud=aws",
        ])
        .ok();
    let secret = created.stdout.strip_suffix('\n').unwrap().to_string();
    assert!(
        secret.starts_with("abode_pk_") && !secret.contains(char::is_whitespace),
        "{created}"
    );
    assert_eq!(created.stdout, format!("{secret}\n"));
    for needle in [
        "shown only now",
        "abode provisioner start --url",
        "--key-file",
    ] {
        assert!(created.stderr.contains(needle), "{needle}: {created}");
    }
    assert!(!created.stderr.contains(&secret), "{created}");
    platform
        .run(&["provisioner", "keys", "create", "spare"])
        .ok();

    // Listed by name, with tags and maker, never the secret.
    let listed = keys(&platform);
    let names: Vec<&str> = listed.iter().map(|k| k["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["aws-prod", "spare"]);
    assert_eq!(
        listed[0]["tags"],
        serde_json::json!(["cloud=aws", "zone=b"])
    );
    assert_eq!(listed[0]["created_by"], "alice");
    assert_eq!(listed[1]["tags"], serde_json::json!([]));
    let table = platform.run(&["provisioner", "keys", "list"]).ok();
    for needle in [
        "NAME",
        "TAGS",
        "CREATED BY",
        "aws-prod",
        "cloud=aws,zone=b",
        "alice",
    ] {
        assert!(table.stdout.contains(needle), "{needle}: {table}");
    }
    for run in [
        &table,
        &platform.run(&["provisioner", "keys", "list", "-o", "json"]),
    ] {
        assert!(!run.stdout.contains(&secret), "{run}");
    }

    // Refusals, each one line.
    let member = platform.login_new_user("mem", "member");
    let member_refusals: [&[&str]; 3] = [
        &["provisioner", "keys", "create", "mine"],
        &["provisioner", "keys", "list"],
        &["provisioner", "keys", "delete", "aws-prod"],
    ];
    for args in member_refusals {
        platform
            .run_as(&member, args, None)
            .fails_with(1, &["provisioner keys", "owner"]);
    }
    let refusals: [(&[&str], &[&str]); 4] = [
        (
            &["provisioner", "keys", "create", "aws-prod"],
            &["\"aws-prod\" exists"],
        ),
        (
            &["provisioner", "keys", "create", "other", "--tag", "cloud"],
            &["provisioner tag `cloud` is not key=value"],
        ),
        (
            &["provisioner", "keys", "create", "Bad_Name"],
            &["invalid provisioner key name"],
        ),
        (
            &["provisioner", "keys", "delete", "nothing"],
            &["no provisioner key named \"nothing\""],
        ),
    ];
    for (args, needles) in refusals {
        platform.run(args).fails_with(1, needles);
    }
    assert_eq!(keys(&platform).len(), 2);

    // Deleted: gone from the list, and a second delete is refused.
    let deleted = platform
        .run(&["provisioner", "keys", "delete", "aws-prod"])
        .ok();
    assert!(
        deleted.stdout.contains("Deleted provisioner key aws-prod"),
        "{deleted}"
    );
    let names: Vec<String> = keys(&platform)
        .iter()
        .map(|k| k["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["spare"]);
    platform
        .run(&["provisioner", "keys", "delete", "aws-prod"])
        .fails_with(1, &["no provisioner key named"]);

    // Audited, without the secret; the server's log never saw it either.
    let audit = platform
        .run(&["audit", "--limit", "1000", "--output", "json"])
        .ok();
    let events = audit.json();
    let actions: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|event| event["action"].as_str())
        .filter(|action| action.starts_with("provisioner_key."))
        .collect();
    assert_eq!(
        actions,
        [
            "provisioner_key.delete",
            "provisioner_key.create",
            "provisioner_key.create"
        ]
    );
    assert!(!audit.stdout.contains(&secret));
    assert!(!platform.server_log().contains(&secret));
}

#[test]
fn the_creation_answer_is_not_cached_and_the_list_holds_no_secret() {
    let platform = Platform::start();
    platform.login_owner();
    let token = abode_client::config::load_session(&platform.config_dir())
        .unwrap()
        .expect("logged in")
        .token;
    let url = format!("{}/api/v1/provisioner-keys", platform.url);
    let created = ureq::post(&url)
        .set("Authorization", &format!("Bearer {token}"))
        .send_json(serde_json::json!({"name": "west", "tags": ["cloud=gcp"]}))
        .unwrap();
    assert_eq!(created.status(), 201);
    assert_eq!(created.header("cache-control"), Some("no-store"));
    let body: serde_json::Value = created.into_json().unwrap();
    let secret = body["secret"].as_str().unwrap().to_string();
    assert_eq!(body["key"]["name"], "west");
    assert_eq!(body["key"]["tags"], serde_json::json!(["cloud=gcp"]));
    assert_eq!(body["key"]["created_by"], "alice");
    assert!(body["key"]["created_at"].is_string());

    let listed = ureq::get(&format!("{url}?limit=1"))
        .set("Authorization", &format!("Bearer {token}"))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    assert!(!listed.contains(&secret), "{listed}");
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["provisioner_keys"][0]["name"], "west");
    assert!(listed["next"].is_null());

    let deleted = ureq::delete(&format!("{url}/west"))
        .set("Authorization", &format!("Bearer {token}"))
        .call()
        .unwrap();
    assert_eq!(deleted.status(), 204);
}
