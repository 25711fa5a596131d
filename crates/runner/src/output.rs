//! Terraform's output as the build log shows it: each `-json` line rendered
//! as its message and level, written as it arrives; the last error kept for
//! the build's one-line error.

use abode_terraform::run::{OutputLine, Stream};
use tokio::sync::mpsc;

use crate::host::{LogLevel, LogSink, LogStage};

/// A Terraform output line as the build log shows it: the `@message` of a
/// `-json` line with its level (plus a diagnostic's detail), or the raw text.
pub fn render_line(line: &OutputLine) -> Option<(LogLevel, String)> {
    let text = line.text.trim_end();
    if text.trim().is_empty() {
        return None;
    }
    if line.stream == Stream::Stdout && text.starts_with('{') {
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
            let message = value.get("@message").and_then(|m| m.as_str()).unwrap_or("");
            let level = match value
                .get("@level")
                .and_then(|l| l.as_str())
                .unwrap_or("info")
            {
                "error" => LogLevel::Error,
                "warn" => LogLevel::Warn,
                "trace" | "debug" => LogLevel::Debug,
                _ => LogLevel::Info,
            };
            let detail = value
                .pointer("/diagnostic/detail")
                .and_then(|d| d.as_str())
                .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
                .filter(|d| !d.is_empty());
            let rendered = match detail {
                Some(detail) => format!("{message}: {detail}"),
                None => message.to_string(),
            };
            if rendered.is_empty() {
                return None;
            }
            return Some((level, rendered));
        }
    }
    let level = match line.stream {
        Stream::Stderr => LogLevel::Error,
        Stream::Stdout => LogLevel::Info,
    };
    Some((level, text.to_string()))
}

/// The summary of a `-json` diagnostic line.
fn diagnostic_summary(line: &OutputLine) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(line.text.trim()).ok()?;
    value
        .pointer("/diagnostic/summary")?
        .as_str()
        .map(str::to_string)
}

/// The last error a Terraform run printed.
pub struct TerraformError {
    /// As the build log shows it: the build's one-line error.
    pub text: String,
    /// The diagnostic's summary, when it was a `-json` diagnostic.
    pub summary: Option<String>,
}

/// Writes Terraform's output lines into a build's log as they come, skipping
/// the first `skip` rendered lines (already logged by a server that died);
/// returns the last error, for the build's one-line error. Without a sink
/// (a preview's plan, which has no log) only the last error is kept.
pub async fn log_output<S: LogSink>(
    sink: Option<&S>,
    stage: &LogStage,
    mut receiver: mpsc::UnboundedReceiver<OutputLine>,
    skip: usize,
) -> Option<TerraformError> {
    let mut last_error = None;
    let mut seen = 0;
    while let Some(line) = receiver.recv().await {
        let Some((level, text)) = render_line(&line) else {
            continue;
        };
        seen += 1;
        if level == LogLevel::Error {
            last_error = Some(TerraformError {
                text: text.clone(),
                summary: diagnostic_summary(&line),
            });
        }
        let Some(sink) = sink.filter(|_| seen > skip) else {
            continue;
        };
        sink.log(stage, level, &text).await;
    }
    last_error
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn json_lines_render_as_their_message_with_level() {
        let line = |stream, text: &str| OutputLine {
            stream,
            text: text.into(),
        };
        let cases = [
            (
                line(
                    Stream::Stdout,
                    r#"{"@level":"info","@message":"terraform_data.a: Creating...","type":"apply_start"}"#,
                ),
                Some((LogLevel::Info, "terraform_data.a: Creating...".to_string())),
            ),
            (
                line(
                    Stream::Stdout,
                    r#"{"@level":"error","@message":"Error: boom","type":"diagnostic","diagnostic":{"severity":"error","summary":"boom","detail":"it\nbroke"}}"#,
                ),
                Some((LogLevel::Error, "Error: boom: it broke".to_string())),
            ),
            (
                line(Stream::Stdout, "plain text"),
                Some((LogLevel::Info, "plain text".to_string())),
            ),
            (
                line(Stream::Stderr, "panic: x"),
                Some((LogLevel::Error, "panic: x".to_string())),
            ),
            (line(Stream::Stdout, "   "), None),
        ];
        for (input, expected) in cases {
            assert_eq!(render_line(&input), expected, "{}", input.text);
        }
    }
}
