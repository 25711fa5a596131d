//! `abode builds show WS N --timings` as text: each stage of the build with
//! when it started (from the first stage's start) and how long it took, a
//! bar of where it sits in the build, then each Terraform resource's plan
//! and apply.

use abode_sdk::BuildTimings;

use crate::output::{self, visible};

/// The width of a stage's bar, in characters.
const BAR: usize = 30;

/// A length as people read it: milliseconds under a second.
pub(super) fn took(seconds: f64) -> String {
    if seconds < 1.0 {
        format!("{:.1}ms", seconds * 1000.0)
    } else {
        format!("{seconds:.2}s")
    }
}

/// Where `[offset, offset + length]` sits in `[0, total]`, as a bar (no
/// trailing blanks: it is the table's last column).
fn bar(offset: f64, length: f64, total: f64) -> String {
    if total <= 0.0 {
        return "|".to_string();
    }
    let cell = |at: f64| ((at / total) * BAR as f64).floor().clamp(0.0, BAR as f64) as usize;
    let start = cell(offset).min(BAR - 1);
    let end = cell(offset + length).max(start + 1).min(BAR);
    format!("{}{}", " ".repeat(start), "#".repeat(end - start))
}

/// The whole text: a heading, the stages and the resources.
pub(super) fn render(timings: &BuildTimings) -> String {
    let total = timings
        .stages
        .iter()
        .map(|stage| stage.offset_seconds + stage.seconds.unwrap_or(0.0))
        .chain(
            timings
                .resources
                .iter()
                .map(|resource| resource.offset_seconds + resource.seconds),
        )
        .fold(0.0, f64::max);
    let mut out = format!(
        "Build #{} of {} ({}): {} from its first stage to its last\n\n",
        timings.build,
        visible(&timings.workspace),
        timings.status,
        took(total)
    );
    if timings.stages.is_empty() {
        out.push_str("No stage was recorded for this build.\n");
        return out;
    }
    let rows: Vec<Vec<String>> = timings
        .stages
        .iter()
        .map(|stage| {
            let run = match &stage.agent {
                Some(agent) => format!("agent {agent}"),
                None => stage.run.clone(),
            };
            vec![
                stage.stage.clone(),
                run,
                format!("+{}", took(stage.offset_seconds)),
                stage.seconds.map_or("under way".to_string(), took),
                bar(
                    stage.offset_seconds,
                    stage.seconds.unwrap_or(total - stage.offset_seconds),
                    total,
                ),
            ]
        })
        .collect();
    out.push_str(&output::table(
        &["STAGE", "RUN", "START", "TOOK", "TIMELINE"],
        &rows,
    ));
    if !timings.resources.is_empty() {
        out.push('\n');
        let rows: Vec<Vec<String>> = timings
            .resources
            .iter()
            .map(|resource| {
                vec![
                    resource.address.clone(),
                    resource.phase.clone(),
                    resource.action.clone(),
                    format!("+{}", took(resource.offset_seconds)),
                    took(resource.seconds),
                ]
            })
            .collect();
        out.push_str(&output::table(
            &["RESOURCE", "PHASE", "ACTION", "START", "TOOK"],
            &rows,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_read_in_milliseconds_under_a_second() {
        assert_eq!(took(0.000_269), "0.3ms");
        assert_eq!(took(0.25), "250.0ms");
        assert_eq!(took(3.456), "3.46s");
    }

    #[test]
    fn a_bar_sits_where_its_stage_does() {
        assert_eq!(bar(0.0, 1.0, 2.0), "#".repeat(15));
        assert_eq!(bar(1.0, 0.0, 2.0), format!("{}#", " ".repeat(15)));
        assert_eq!(bar(2.0, 0.0, 2.0).len(), BAR);
    }
}
