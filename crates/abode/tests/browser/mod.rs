//! Headless Chromium behind its own chromedriver, driven over WebDriver
//! with fantoccini (Debian's `chromium` and `chromium-driver`, installed by
//! scripts/bootstrap.sh): the browser of the dashboard's end-to-end tests.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::elements::Element;
use fantoccini::error::CmdError;
use fantoccini::key::Key;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{json, Value};

use crate::util::free_port;

/// Headless Chromium behind its own chromedriver, driven with fantoccini;
/// the methods are the steps the scenarios are written in.
pub struct Browser {
    pub client: Client,
    driver: Child,
    /// The session was ended by `close` (the scenario got to its end).
    closed: bool,
    _profile: tempfile::TempDir,
}

/// A step the browser must do; a failure names the step.
#[track_caller]
pub fn done<T>(result: Result<T, CmdError>, step: &str) -> T {
    result.unwrap_or_else(|error| panic!("WebDriver: {step}: {error}"))
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session; fails with one
    /// line when they are not installed.
    pub async fn start() -> Browser {
        Browser::start_with_args(&[]).await
    }

    /// [`Browser::start`] with more Chromium flags (a host resolver rule).
    pub async fn start_with_args(extra: &[&str]) -> Browser {
        let path_of = |program: &str| -> String {
            let found = Command::new("sh")
                .args(["-c", &format!("command -v {program}")])
                .output()
                .ok()
                .filter(|output| output.status.success())
                .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string());
            found.unwrap_or_else(|| panic!(
                "{program} is not on PATH: the web dashboard's browser tests need Debian's chromium and chromium-driver (source scripts/bootstrap.sh)"
            ))
        };
        path_of("chromedriver");
        let chromium = path_of("chromium");
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let profile = tempfile::tempdir().unwrap();
        let mut args = vec![
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=1280,1800".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        args.extend(extra.iter().map(|arg| arg.to_string()));
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": args,
            }
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        // chromedriver is on loopback: plain HTTP, no TLS connector.
        let mut builder = ClientBuilder::new(HttpConnector::new());
        builder.capabilities(capabilities);
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            match builder.connect(&url).await {
                Ok(client) => break client,
                Err(error) => {
                    assert!(
                        Instant::now() < deadline,
                        "chromedriver never started a session: {error}"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        Browser {
            client,
            driver,
            closed: false,
            _profile: profile,
        }
    }

    pub async fn go(&self, url: &str) {
        done(self.client.goto(url).await, url);
    }

    pub async fn url(&self) -> String {
        done(self.client.current_url().await, "current url").to_string()
    }

    pub async fn find(&self, css: &str) -> Element {
        done(self.client.find(Locator::Css(css)).await, css)
    }

    pub async fn count(&self, css: &str) -> usize {
        done(self.client.find_all(Locator::Css(css)).await, css).len()
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        done(self.find(css).await.send_keys(text).await, css);
    }

    pub async fn clear(&self, css: &str) {
        done(self.find(css).await.clear().await, css);
    }

    pub async fn click(&self, css: &str) {
        done(self.find(css).await.click().await, css);
    }

    pub async fn text(&self, css: &str) -> String {
        done(self.find(css).await.text().await, css)
    }

    /// The `value` of the field matching `css`.
    pub async fn value(&self, css: &str) -> String {
        done(self.find(css).await.prop("value").await, css).unwrap_or_default()
    }

    /// Whether the checkbox matching `css` is checked.
    pub async fn checked(&self, css: &str) -> bool {
        done(self.find(css).await.is_selected().await, css)
    }

    /// Whether the field matching `css` is enabled.
    pub async fn enabled(&self, css: &str) -> bool {
        done(self.find(css).await.is_enabled().await, css)
    }

    pub async fn script(&self, script: &str) -> Value {
        done(self.client.execute(script, Vec::new()).await, script)
    }

    /// The visible text of the whole page.
    pub async fn page_text(&self) -> String {
        self.script("return document.body.innerText;")
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Waits (up to two minutes) until the page's text contains `needle`.
    pub async fn wait_for_text(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let text = self.page_text().await;
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "the page never showed {needle:?}; it shows:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Presses and releases one key, as a keyboard user would.
    pub async fn press(&self, key: Key) {
        let key = char::from(key);
        let keys = KeyActions::new("keyboard".to_string())
            .then(KeyAction::Down { value: key })
            .then(KeyAction::Up { value: key });
        done(self.client.perform_actions(keys).await, "a key press");
    }

    /// Moves the focus with Tab, as a keyboard user would, until the element
    /// matching `css` has it; fails if it is never reached.
    pub async fn tab_to(&self, css: &str) {
        let check = format!(
            "return document.activeElement === document.querySelector({});",
            serde_json::to_string(css).unwrap()
        );
        for _ in 0..80 {
            if self.script(&check).await == true {
                return;
            }
            self.press(Key::Tab).await;
        }
        panic!("{css} is not reachable with the keyboard");
    }

    /// Signs in to the dashboard at `base` with its login form and waits
    /// for the signed-in page.
    pub async fn sign_in(&self, base: &str, username: &str, password: &str) {
        self.go(&format!("{base}/login")).await;
        self.type_into("#username", username).await;
        self.type_into("#password", password).await;
        self.click("button[type=submit].primary").await;
        self.wait_for_text(&format!("Signed in as {username}"))
            .await;
    }

    /// Waits (up to a minute) until an element matches `css`: the page a
    /// click navigated to has loaded.
    pub async fn wait_for_element(&self, css: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.count(css).await == 0 {
            assert!(Instant::now() < deadline, "no {css} on the page");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Saves a screenshot of the page as PNG under `path`.
    pub async fn screenshot(&self, path: &Path) {
        let png = done(self.client.screenshot().await, "screenshot");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, png).unwrap();
    }

    /// Ends the session (Chromium quits), then chromedriver.
    pub async fn close(mut self) {
        done(self.client.clone().close().await, "closing the session");
        self.closed = true;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // A scenario that failed never reached `close`: end the session from
        // a thread of its own (this one may be inside the test's runtime,
        // whose workers still run the session), so that Chromium quits
        // before chromedriver is killed.
        if !self.closed {
            let client = self.client.clone();
            let closing = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .unwrap();
                runtime.block_on(async {
                    let _ = tokio::time::timeout(Duration::from_secs(10), client.close()).await;
                });
            });
            let _ = closing.join();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
