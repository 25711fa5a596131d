//! The Prometheus listener of an in-process server: requests are counted by
//! route template (never the raw path), and the scrape is served on its own
//! address. The end-to-end check with builds and promtool lives in
//! crates/abode/tests/e2e_metrics.rs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::*;

async fn scrape(harness: &Harness) -> String {
    let address = harness
        .server()
        .prometheus_addr()
        .expect("a metrics listener");
    tokio::task::spawn_blocking(move || {
        let response = ureq::get(&format!("http://{address}/metrics"))
            .call()
            .unwrap();
        assert!(
            response.content_type().starts_with("text/plain"),
            "{}",
            response.content_type()
        );
        response.into_string().unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_are_counted_by_route_template_on_the_metrics_listener() {
    let harness = Harness::start_with(tempfile::tempdir().unwrap(), |options| {
        options.prometheus_address = Some("127.0.0.1:0".parse().unwrap());
        options.metrics_refresh_interval = Duration::from_millis(200);
    })
    .await;
    let token = harness.owner().await;
    for name in ["one", "two", "three"] {
        let (status, _) = harness
            .call("GET", &format!("/workspaces/{name}"), Some(&token), None)
            .await;
        assert_eq!(status, 404);
    }
    let (status, _) = harness.call("GET", "/no/such/endpoint", None, None).await;
    assert_eq!(status, 404);

    let text = scrape(&harness).await;
    let cases = [
        (
            r#"abode_http_requests_total{route="/api/v1/workspaces/:workspace",method="GET",status="404"} 3"#,
            "one series for every workspace path",
        ),
        (
            r#"abode_http_requests_total{route="unmatched",method="GET",status="404"} 1"#,
            "a path no route matches",
        ),
        (
            r#"abode_http_request_duration_seconds_count{route="/api/v1/workspaces/:workspace",method="GET"} 3"#,
            "the duration histogram by route",
        ),
        (
            r#"abode_provisioners{state="idle"} 2"#,
            "the harness's two workers",
        ),
    ];
    for (line, why) in cases {
        assert!(text.lines().any(|l| l == line), "{why}: {line} in\n{text}");
    }
    for raw in ["/workspaces/one", "/workspaces/two", "/no/such"] {
        assert!(!text.contains(raw), "a raw path {raw} in\n{text}");
    }
    // The database gauges are refreshed in the background.
    let refreshed = loop {
        let text = scrape(&harness).await;
        if !text.contains("abode_metrics_last_updated_seconds 0.0") {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        refreshed.contains("abode_agents{status=\"ready\"} 0"),
        "{refreshed}"
    );
    harness.stop().await;
}

/// Sends one raw HTTP/1.1 request (a method no client library would send)
/// and reads the answer's status line.
fn raw_request(address: std::net::SocketAddr, method: &str, path: &str) -> String {
    use std::io::{BufRead, BufReader, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut status = String::new();
    BufReader::new(stream).read_line(&mut status).unwrap();
    status
}

/// A method is whatever token a client sends: labelling it as sent made a
/// series per invented method, kept for the server's life (7,000 requests
/// with 4,000-character methods once grew the scrape to 165 MB).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn invented_methods_do_not_grow_the_scrape() {
    let harness = Harness::start_with(tempfile::tempdir().unwrap(), |options| {
        options.prometheus_address = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let address = harness.server().local_addr();
    let send = |from: usize, to: usize| {
        tokio::task::spawn_blocking(move || {
            for n in from..to {
                let method = format!("INVENTED{n}{}", "M".repeat(4000));
                // A route that exists, one that does not, and the web side.
                for path in ["/api/v1/health", "/api/v1/no/such", "/"] {
                    let status = raw_request(address, &method, path);
                    assert!(status.starts_with("HTTP/1.1 "), "{status:?}");
                }
            }
        })
    };
    send(0, 2).await.unwrap();
    let before = scrape(&harness).await;
    send(2, 200).await.unwrap();
    let after = scrape(&harness).await;
    assert!(!after.contains("INVENTED"), "an invented method is a label");
    // Only the HTTP series: background loops add series of their own as
    // they first run, whenever a loaded machine gets to them.
    let http_series = |scrape: &str| {
        scrape
            .lines()
            .filter(|line| line.starts_with("abode_http_"))
            .count()
    };
    assert_eq!(
        http_series(&before),
        http_series(&after),
        "the scrape grew with invented methods:\n{after}"
    );
    for route in ["/api/v1/health", "unmatched"] {
        let series = format!(
            r#"abode_http_requests_total{{route="{route}",method="other",status="405"}} 200"#
        );
        let unmatched = format!(
            r#"abode_http_requests_total{{route="{route}",method="other",status="404"}} 200"#
        );
        assert!(
            after
                .lines()
                .any(|line| line == series || line == unmatched),
            "no `other` series for {route} in\n{after}"
        );
    }
    harness.stop().await;
}
