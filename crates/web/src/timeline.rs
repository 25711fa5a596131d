//! A build's timeline on its page (issue 50): each stage that ran with when
//! it started and how long it took, and a bar of where it sits in the
//! build; then each Terraform resource's plan and apply. The bars are SVG
//! rectangles placed by attributes (the pages allow no inline style), the
//! service's `build_timings` read as the API's route reads it.

use maud::{html, Markup};

use abode_store::BuildTimings;

/// The SVG's width in user units: a bar's `x` and `width` are per mille
/// of the build.
const SCALE: f64 = 1000.0;

/// Seconds as people read them: milliseconds under a second.
fn took(micros: i64) -> String {
    let seconds = micros as f64 / 1e6;
    if seconds < 1.0 {
        format!("{:.1} ms", seconds * 1000.0)
    } else {
        format!("{seconds:.2} s")
    }
}

/// A bar from `from` to `to` (µs) in a build spanning `[first, last]`.
fn bar(from: i64, to: i64, first: i64, last: i64) -> Markup {
    let span = (last - first).max(1) as f64;
    let x = ((from - first) as f64 / span * SCALE).clamp(0.0, SCALE - 2.0);
    let width = ((to - from) as f64 / span * SCALE).clamp(2.0, SCALE - x);
    html! {
        svg class="timeline-bar" viewBox="0 0 1000 10" preserveAspectRatio="none" aria-hidden="true" {
            rect x=(format!("{x:.1}")) y="0" width=(format!("{width:.1}")) height="10" {}
        }
    }
}

/// The timeline, or a line saying nothing was recorded.
pub(crate) fn render(timings: &BuildTimings) -> Markup {
    let first = timings
        .stages
        .iter()
        .map(|stage| stage.started_us)
        .chain(timings.resources.iter().map(|resource| resource.started_us))
        .min();
    let Some(first) = first else {
        return html! { p class="muted" { "No stage of this build was recorded." } };
    };
    let last = timings
        .stages
        .iter()
        .map(|stage| stage.ended_us.unwrap_or(stage.started_us))
        .chain(timings.resources.iter().map(|resource| resource.ended_us))
        .max()
        .unwrap_or(first);
    html! {
        p { "From its first stage to its last: " strong { (took(last - first)) } "." }
        table class="timeline" aria-label="Build timeline" {
            thead { tr { th { "Stage" } th { "Run" } th { "Start" } th { "Took" } th { "Timeline" } } }
            tbody {
                @for stage in &timings.stages {
                    tr {
                        td { (stage.stage) }
                        td { (stage.job.replace(':', " ")) }
                        td { "+" (took(stage.started_us - first)) }
                        td {
                            @match stage.ended_us {
                                Some(ended) => (took(ended - stage.started_us)),
                                None => "under way",
                            }
                        }
                        td { (bar(stage.started_us, stage.ended_us.unwrap_or(last), first, last)) }
                    }
                }
            }
        }
        @if !timings.resources.is_empty() {
            details {
                summary { "Terraform resources (" (timings.resources.len()) ")" }
                table class="timeline" aria-label="Terraform resources" {
                    thead { tr { th { "Resource" } th { "Phase" } th { "Action" } th { "Start" } th { "Took" } th { "Timeline" } } }
                    tbody {
                        @for resource in &timings.resources {
                            tr {
                                td { code { (resource.address) } }
                                td { (resource.phase) }
                                td { (resource.action) }
                                td { "+" (took(resource.started_us - first)) }
                                td { (took(resource.ended_us - resource.started_us)) }
                                td { (bar(resource.started_us, resource.ended_us, first, last)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use abode_store::{ResourceTiming, StageTiming};

    #[test]
    fn each_stage_is_a_row_with_its_bar_where_it_ran() {
        let timings = BuildTimings {
            stages: vec![
                StageTiming {
                    job: "build".into(),
                    stage: "plan".into(),
                    started_us: 1_000_000,
                    ended_us: Some(1_500_000),
                },
                StageTiming {
                    job: "agent:main".into(),
                    stage: "scripts".into(),
                    started_us: 1_500_000,
                    ended_us: None,
                },
            ],
            resources: vec![ResourceTiming {
                job: "build".into(),
                phase: "apply".into(),
                address: "terraform_data.a".into(),
                action: "create".into(),
                started_us: 1_200_000,
                ended_us: 1_200_269,
            }],
        };
        let page = render(&timings).into_string();
        assert!(page.contains("<td>plan</td>"), "{page}");
        assert!(page.contains("500.0 ms"), "{page}");
        assert!(page.contains("agent main"), "{page}");
        assert!(page.contains("under way"), "{page}");
        assert!(
            page.contains(r#"<rect x="0.0" y="0" width="1000.0""#),
            "{page}"
        );
        assert!(page.contains("terraform_data.a"), "{page}");
        assert!(!page.contains("style="), "{page}");
        let empty = render(&BuildTimings::default()).into_string();
        assert!(empty.contains("No stage"), "{empty}");
    }
}
