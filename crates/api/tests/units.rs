//! The crate's pure helpers, case by case (`abode_api::units`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abode_api::units::*;

#[test]
fn only_probes_and_the_state_backend_stay_on_plain_http() {
    for path in [
        "/api/v1/health",
        "/api/v1/ready",
        "/api/v1/builds/b1/state",
        "/api/v1/builds/b1/state/lock",
        "/api/v1/builds/b1/state/unlock",
    ] {
        assert!(stays_plain(path), "{path}");
    }
    for path in [
        "/",
        "/login",
        "/api/v1/login",
        "/api/v1/builds/b1",
        "/api/v1/builds/b1/logs",
        "/api/v1/builds/state",
        "/api/v1/users/me",
    ] {
        assert!(!stays_plain(path), "{path}");
    }
}

#[test]
fn the_policy_names_its_max_age_and_zero_is_none() {
    assert_eq!(
        hsts_policy(31_536_000)
            .as_ref()
            .and_then(|v| v.to_str().ok()),
        Some("max-age=31536000")
    );
    assert_eq!(hsts_policy(0), None);
}

#[test]
fn a_csv_field_is_quoted_only_when_it_must_be() {
    let cases: [(&[&str], &str); 4] = [
        (&["a", "b"], "a,b\r\n"),
        (&["a,b", "c"], "\"a,b\",c\r\n"),
        (&["say \"hi\"", ""], "\"say \"\"hi\"\"\",\r\n"),
        (&["two\nlines"], "\"two\nlines\"\r\n"),
    ];
    for (fields, row) in cases {
        let fields: Vec<String> = fields.iter().map(|field| field.to_string()).collect();
        assert_eq!(csv_row(&fields), row);
    }
}

#[test]
fn hosts_of_this_server() {
    let names = ServerNames::new("https://Abode.Example.com", Some("http://10.1.2.3:7080"));
    let cases = [
        ("abode.example.com:443", true),
        ("abode.example.com.", true),
        ("ABODE.example.com", true),
        ("10.1.2.3:7080", true),
        ("localhost:7080", true),
        ("127.0.0.1:7080", true),
        ("127.8.0.1", true),
        ("[::1]:7080", true),
        ("evil.example", false),
        ("abode.example.com.evil.example", false),
        ("10.1.2.4:7080", false),
        ("[::2]", false),
        ("", false),
        ("alice@abode.example.com", false),
        ("abode.example.com:443@evil.example", false),
        ("evil.example@abode.example.com", false),
        ("abode.example.com:443:443", false),
        ("abode.example.com:x", false),
        ("abode.example.com/x", false),
        ("[::1]x", false),
    ];
    for (host, answers) in cases {
        let bare = authority_host(host);
        assert_eq!(
            bare.as_deref().is_some_and(|bare| names.answers_for(bare)),
            answers,
            "{host}"
        );
    }
    let everywhere = ServerNames::new("http://0.0.0.0:7080", None);
    assert!(everywhere.answers_for("192.168.1.5"));
    assert!(!everywhere.answers_for("evil.example"));
}

#[test]
fn origins_as_browsers_write_them() {
    let cases = [
        (
            "https://abode.example.com",
            Some("https://abode.example.com"),
        ),
        (
            "https://abode.example.com:443/",
            Some("https://abode.example.com"),
        ),
        ("HTTP://127.0.0.1:7080/x", Some("http://127.0.0.1:7080")),
        ("http://h:80", Some("http://h")),
        ("ftp://h", None),
        ("h", None),
    ];
    for (url, origin) in cases {
        assert_eq!(origin_of(url).as_deref(), origin, "{url}");
    }
}

#[test]
fn json_content_types() {
    let cases = [
        ("application/json", true),
        ("application/json; charset=utf-8", true),
        ("Application/JSON", true),
        ("text/plain", false),
        ("application/x-www-form-urlencoded", false),
        ("multipart/form-data; boundary=x", false),
        ("application/jsonx", false),
        ("", false),
    ];
    for (content_type, json) in cases {
        assert_eq!(is_json(content_type), json, "{content_type}");
    }
}

/// The wire of a build, byte for byte: the fields in docs/api.md's
/// order, the guard's report as the guard writes it, and a client reads
/// it back.
#[test]
fn a_build_is_written_as_before_with_its_report() {
    let report: abode_guard::Report =
        serde_json::from_str(r#"{"schema_version":1,"decision":"allow","transition":"start","terraform_version":"1.11.4"}"#)
            .unwrap();
    let report_json = serde_json::to_string(&report).unwrap();
    let build = abode_store::Build {
        id: "b1".into(),
        workspace_id: "w1".into(),
        workspace_name: "dev".into(),
        owner_name: "alice".into(),
        number: 2,
        transition: abode_store::Transition::Start,
        status: abode_store::BuildStatus::Succeeded,
        template_version_id: "v1".into(),
        template_version: 3,
        initiator_id: "u1".into(),
        initiator_name: "alice".into(),
        reason: abode_store::BuildReason::Initiator,
        parameters: None,
        error: None,
        guard_report: Some(report),
        created_at: 0,
        started_at: Some(1),
        finished_at: None,
        plan_digest: None,
        expires_at: None,
        confirmed_by: None,
        confirmed_at: None,
        daily_cost: None,
        refusal: None,
        rename_to: None,
        then_start: false,
        waiting: None,
    };
    let json = serde_json::to_string(&build_view(&build)).unwrap();
    assert_eq!(
        json,
        concat!(
            r#"{"id":"b1","workspace":"dev","owner":"alice","number":2,"transition":"start","#,
            r#""status":"succeeded","template_version":3,"initiator":"alice","initiator_type":"user","#,
            r#""reason":"initiator","error":null,"created_at":"1970-01-01T00:00:00.000Z","#,
            r#""started_at":"1970-01-01T00:00:00.001Z","finished_at":null,"#,
            r#""guard":REPORT,"#,
            r#""plan_digest":null,"expires_at":null,"confirmed_by":null,"confirmed_at":null}"#
        )
        .replace("REPORT", &report_json)
    );
    let read: abode_sdk::Build = serde_json::from_str(&json).unwrap();
    assert!(read.is_final());
    assert_eq!(read.guard.unwrap()["decision"], "allow");
}

#[test]
fn rfc3339_times_parse_back() {
    for ms in [0, 1_714_564_800_123, 951_782_400_000, -86_400_000] {
        assert_eq!(parse_rfc3339(&rfc3339(ms)), Some(ms));
    }
    assert_eq!(
        parse_rfc3339("2024-05-01T14:00:00+02:00"),
        parse_rfc3339("2024-05-01T12:00:00Z")
    );
    for bad in [
        "",
        "yesterday",
        "2024-05-01",
        "2024-13-01T00:00:00Z",
        "2024-05-01T00:00:00",
    ] {
        assert_eq!(parse_rfc3339(bad), None, "{bad}");
    }
}

#[test]
fn times_format_as_rfc3339_utc() {
    let cases = [
        (0, "1970-01-01T00:00:00.000Z"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z"),
        (1_795_974_000_123, "2026-11-29T17:40:00.123Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
    ];
    for (ms, expected) in cases {
        assert_eq!(rfc3339(ms), expected, "{ms}");
    }
}
