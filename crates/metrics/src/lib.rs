//! Abode's Prometheus metrics: one registry per server, the typed points
//! where the rest of the platform records into it, and its text exposition.
//!
//! It exists so that the control plane (builds, the guard, provisioners,
//! the background refresh of database gauges) and the API (HTTP requests)
//! record into the same registry without knowing about each other, and so
//! that every metric's name, labels and help text are declared in one place
//! ([`Metrics::new`]). Encoding uses `prometheus-client`'s Prometheus text
//! format (0.0.4), never hand-formatted text.
//!
//! Nothing here reads the database or a clock: counters are moved where the
//! event happens, and gauges that need the database are set by a refresher
//! (`abode-control`) at an interval, so a scrape only encodes memory.
//!
//! It lives in the control plane's `Config.metrics`. The API counts each
//! request by route template (a middleware) and serves `GET /metrics` on the
//! `--prometheus-address` listener; builds are counted just before their end is
//! recorded, guard decisions where the guard's verdict is taken. Each
//! background loop (scheduler, prebuild reconciler, notification dispatcher,
//! keeper, provisioner workers) counts its passes (`background_pass`) as each
//! pass ends, so that an operator, and a test that proves nothing happened, can
//! see that the loop ran. Label values are bounded (enums, route templates,
//! standard methods or `other`), never a name, an id, a raw path or a method as
//! a client sent it.

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Metric, Registry};

/// The `Content-Type` of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Provisioner states of `abode_provisioners{state}`.
pub const PROVISIONER_BUSY: &str = "busy";
pub const PROVISIONER_IDLE: &str = "idle";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    route: String,
    method: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    transition: String,
    status: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransitionLabels {
    transition: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    stage: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    decision: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PresetLabels {
    template_name: String,
    preset_name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentLabels {
    workspace: String,
    agent: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VolumeLabels {
    workspace: String,
    agent: String,
    path: String,
}

/// One resource monitor's latest reading (an agent's memory, or a volume
/// when `path` is set), in percent used.
#[derive(Debug, Clone, PartialEq)]
pub struct MonitorGauge {
    pub workspace: String,
    pub agent: String,
    pub path: Option<String>,
    pub used_percent: f64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeliveryLabels {
    channel: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabels {
    task: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    action: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CarriedLabels {
    carried: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

/// How an app request reached its agent (`abode_app_streams{carried}`): on
/// a connection the agent dialed back for it, or through its tunnel.
pub const APP_STREAM_DIALED_BACK: &str = "dial_back";
pub const APP_STREAM_TUNNEL: &str = "tunnel";

/// Background loops of `abode_background_passes_total{task}`.
pub const PASS_SCHEDULER: &str = "scheduler";
pub const PASS_PREBUILDS: &str = "prebuilds";
pub const PASS_NOTIFICATIONS: &str = "notifications";
pub const PASS_KEEPER: &str = "keeper";
pub const PASS_PROVISIONER: &str = "provisioner";

/// Outcomes of `abode_notifications_total{outcome}`: delivered, failed
/// but to be tried again, or given up on.
pub const NOTIFICATION_SENT: &str = "sent";
pub const NOTIFICATION_RETRY: &str = "retry";
pub const NOTIFICATION_FAILED: &str = "failed";

type FloatGauge = Gauge<f64, AtomicU64>;
type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Request latency: 5 ms to ~20 s.
fn request_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 13))
}

/// Build duration: 1 s to ~4.5 h.
fn build_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 15))
}

/// A build stage: 1 ms to ~9 min.
fn stage_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

/// Claim latency: 50 ms to ~7 min.
fn claim_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.05, 2.0, 14))
}

/// One prebuild pool (a preset of a template's active version) as the
/// reconciliation sees it now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolGauges {
    pub template_name: String,
    pub preset_name: String,
    pub desired: i64,
    pub running: i64,
    /// Ready to be claimed.
    pub eligible: i64,
    pub hard_limited: bool,
    /// The `prebuilds` budget holds the pool below its desired count.
    pub quota_limited: bool,
    pub paused: bool,
}

/// What the database says about the platform now, set by one refresh.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlatformGauges {
    /// Builds awaiting confirmation.
    pub builds_held: i64,
    /// Jobs queued and not yet claimed.
    pub jobs_pending: i64,
    /// Age of the oldest queued job (0 when none is queued).
    pub job_queue_oldest_seconds: f64,
    /// Agents by status; give every status the platform knows (0 included)
    /// so that a status nobody is in any more drops to 0.
    pub agents: Vec<(String, i64)>,
    /// Notifications not yet delivered (pending or being delivered).
    pub notifications_pending: i64,
    /// When this was read, seconds since the epoch.
    pub updated_at_seconds: f64,
}

/// The registry and every metric in it; cheap to clone (one registry shared).
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    http_requests: Family<HttpLabels, Counter>,
    http_duration: HistogramFamily<RouteLabels>,
    builds: Family<BuildLabels, Counter>,
    build_duration: HistogramFamily<TransitionLabels>,
    build_stages: HistogramFamily<StageLabels>,
    guard_decisions: Family<DecisionLabels, Counter>,
    quota_refusals: Family<ReasonLabels, Counter>,
    builds_held: Gauge,
    jobs_pending: Gauge,
    job_queue_oldest: FloatGauge,
    provisioners: Family<StateLabels, Gauge>,
    agents: Family<StatusLabels, Gauge>,
    notifications: Family<DeliveryLabels, Counter>,
    notifications_pending: Gauge,
    last_updated: FloatGauge,
    prebuilds_created: Family<PresetLabels, Counter>,
    prebuilds_failed: Family<PresetLabels, Counter>,
    prebuilds_claimed: Family<PresetLabels, Counter>,
    prebuild_replacements: Family<PresetLabels, Counter>,
    prebuild_claim_duration: HistogramFamily<PresetLabels>,
    pools_desired: Family<PresetLabels, Gauge>,
    pools_running: Family<PresetLabels, Gauge>,
    pools_eligible: Family<PresetLabels, Gauge>,
    pools_hard_limited: Family<PresetLabels, Gauge>,
    pools_quota_limited: Family<PresetLabels, Gauge>,
    pools_paused: Family<PresetLabels, Gauge>,
    data_dir_free: Gauge,
    data_dir_low: Gauge,
    background_passes: Family<TaskLabels, Counter>,
    scheduler_actions: Family<ActionLabels, Counter>,
    app_streams: Family<CarriedLabels, Counter>,
    connections: Family<KindLabels, Counter>,
    connections_open: Family<KindLabels, Gauge>,
    agent_memory: Family<AgentLabels, FloatGauge>,
    agent_volumes: Family<VolumeLabels, FloatGauge>,
}

/// Registers `metric` under `name` and hands it back to be kept in a field.
fn register<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

impl Metrics {
    /// A fresh registry with every metric declared (counters at zero).
    ///
    /// Adding a metric: a field in `Inner`, one `register(...)` line here,
    /// and a method that records into it (docs/metrics.md).
    pub fn new() -> Metrics {
        let mut r = Registry::default();
        let reg = &mut r;
        let inner = Inner {
            http_requests: register(reg, "abode_http_requests", "HTTP API requests answered, by route template, method and status", Family::default()),
            http_duration: register(reg, "abode_http_request_duration_seconds", "Time to answer an HTTP API request, by route template and method", Family::new_with_constructor(request_buckets as fn() -> Histogram)),
            builds: register(reg, "abode_builds", "Build runs that ended, by transition, how they ended and why the build was started", Family::default()),
            build_duration: register(reg, "abode_build_duration_seconds", "Time from a worker claiming a build's job to the run's end, by transition", Family::new_with_constructor(build_buckets as fn() -> Histogram)),
            build_stages: register(reg, "abode_build_stage_seconds", "Time a build spent in each stage (queue_wait, setup, snapshot, init, plan, guard, retain, quota, apply, state_write, agent_connected, scripts, ready: from the build's request to its agent's ready), measured as each stage ended", Family::new_with_constructor(stage_buckets as fn() -> Histogram)),
            guard_decisions: register(reg, "abode_guard_decisions", "Decisions of the plan guard (allow, confirm, block)", Family::default()),
            quota_refusals: register(reg, "abode_quota_refusals", "Builds refused before apply because their plan's cost did not fit the owner's budget, by reason (quota: over budget; cost: the plan's cost could not be read)", Family::default()),
            builds_held: register(reg, "abode_builds_held", "Builds held by the guard, awaiting confirmation (refreshed)", Gauge::default()),
            jobs_pending: register(reg, "abode_jobs_pending", "Build jobs queued and not yet claimed by a provisioner (refreshed)", Gauge::default()),
            job_queue_oldest: register(reg, "abode_job_queue_oldest_seconds", "Age of the oldest queued job, 0 when none (refreshed)", FloatGauge::default()),
            provisioners: register(reg, "abode_provisioners", "This server's provisioner workers, busy running a build or idle", Family::default()),
            agents: register(reg, "abode_agents", "Workspace agents by status (refreshed)", Family::default()),
            notifications: register(reg, "abode_notifications", "Notification delivery attempts, by channel (inbox, webhook, email) and outcome (sent, retry, failed)", Family::default()),
            notifications_pending: register(reg, "abode_notifications_pending", "Notifications not yet delivered, pending or being delivered (refreshed)", Gauge::default()),
            last_updated: register(reg, "abode_metrics_last_updated_seconds", "When the refreshed gauges were last read from the database, seconds since the epoch", FloatGauge::default()),
            prebuilds_created: register(reg, "abode_prebuilt_workspaces_created", "Prebuilt workspaces whose first build succeeded, by template and preset", Family::default()),
            prebuilds_failed: register(reg, "abode_prebuilt_workspaces_failed", "Prebuilt workspaces whose first build failed, by template and preset", Family::default()),
            prebuilds_claimed: register(reg, "abode_prebuilt_workspaces_claimed", "Prebuilt workspaces claimed by a person (claim build succeeded), by template and preset", Family::default()),
            prebuild_replacements: register(reg, "abode_prebuilt_workspaces_resource_replacements", "Resources a claim build replaced or deleted, by template and preset", Family::default()),
            prebuild_claim_duration: register(reg, "abode_prebuilt_workspaces_claim_duration_seconds", "Time from a claim to its claim build's success, by template and preset", Family::new_with_constructor(claim_buckets as fn() -> Histogram)),
            pools_desired: register(reg, "abode_prebuilt_workspaces_desired", "Prebuilt workspaces a preset wants now, by template and preset (refreshed)", Family::default()),
            pools_running: register(reg, "abode_prebuilt_workspaces_running", "Prebuilt workspaces running, by template and preset (refreshed)", Family::default()),
            pools_eligible: register(reg, "abode_prebuilt_workspaces_eligible", "Prebuilt workspaces ready to be claimed, by template and preset (refreshed)", Family::default()),
            pools_hard_limited: register(reg, "abode_prebuilt_workspaces_hard_limited", "1 when a preset's pool hit the failure hard limit, by template and preset (refreshed)", Family::default()),
            pools_quota_limited: register(reg, "abode_prebuilt_workspaces_quota_limited", "1 when the prebuilds budget holds a preset's pool below its desired count, by template and preset (refreshed)", Family::default()),
            pools_paused: register(reg, "abode_prebuilt_workspaces_paused", "1 when prebuild reconciliation is paused, by template and preset (refreshed)", Family::default()),
            data_dir_free: register(reg, "abode_data_dir_free_bytes", "Free space of this server's data dir (its database on SQLite, work dirs, volumes), in bytes", Gauge::default()),
            data_dir_low: register(reg, "abode_data_dir_low", "1 while this server's data dir has less free space than --min-free-disk: it starts no build", Gauge::default()),
            background_passes: register(reg, "abode_background_passes", "Passes of this server's background loops (scheduler, prebuilds, notifications, keeper, provisioner), counted as each pass ends", Family::default()),
            scheduler_actions: register(reg, "abode_scheduler_actions", "What this server's scheduler ticks did: builds asked for, workspaces marked dormant, deletions notified, actions that failed", Family::default()),
            connections: register(reg, "abode_connections", "Connections into workspaces this server opened and logged (the server holding the agent's tunnel), by kind: ssh, port-forward, pty, app", Family::default()),
            connections_open: register(reg, "abode_connections_open", "Connections into workspaces open on this server now, by kind", Family::default()),
            app_streams: register(reg, "abode_app_streams", "App requests carried to their workspace's agent, by how: dial_back (a connection the agent opened for the request) or tunnel (through the agent's tunnel: an older agent, or a dial-back a proxy or another server did not let through)", Family::default()),
            agent_memory: register(reg, "abode_agent_memory_used_percent", "A workspace's memory in use, in percent, as its agent's memory monitor last said to this server", Family::default()),
            agent_volumes: register(reg, "abode_agent_volume_used_percent", "A monitored volume's use, in percent, as its agent last said to this server", Family::default()),
            registry: r,
        };
        Metrics {
            inner: Arc::new(inner),
        }
    }

    /// The data dir's free space, and whether it is below the minimum.
    pub fn data_dir_free(&self, bytes: u64, low: bool) {
        self.inner
            .data_dir_free
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
        self.inner.data_dir_low.set(i64::from(low));
    }

    /// One HTTP request answered. `route` is the route template
    /// (`/api/v1/workspaces/:workspace`), never the raw path: raw paths would make
    /// a series per workspace. `method` is whatever the client sent; only the
    /// standard methods are labels of their own ([`method_label`]).
    pub fn http_request(&self, route: &str, method: &str, status: u16, seconds: f64) {
        let inner = &self.inner;
        let method = method_label(method);
        inner
            .http_requests
            .get_or_create(&HttpLabels {
                route: route.to_string(),
                method: method.to_string(),
                status: status.to_string(),
            })
            .inc();
        inner
            .http_duration
            .get_or_create(&RouteLabels {
                route: route.to_string(),
                method: method.to_string(),
            })
            .observe(seconds);
    }

    /// One run of a build ended (`status`: succeeded, failed, canceled or
    /// awaiting_confirmation; `reason`: why the build was started).
    pub fn build_ended(&self, transition: &str, status: &str, reason: &str, seconds: f64) {
        let inner = &self.inner;
        inner
            .builds
            .get_or_create(&BuildLabels {
                transition: transition.to_string(),
                status: status.to_string(),
                reason: reason.to_string(),
            })
            .inc();
        inner
            .build_duration
            .get_or_create(&TransitionLabels {
                transition: transition.to_string(),
            })
            .observe(seconds);
    }

    /// A stage of a build ended after `seconds` (`stage`: one of
    /// `abode_contract::timings::Stage`'s names, a bounded set).
    pub fn build_stage(&self, stage: &str, seconds: f64) {
        self.inner
            .build_stages
            .get_or_create(&StageLabels {
                stage: stage.to_string(),
            })
            .observe(seconds.max(0.0));
    }

    /// The guard decided (`allow`, `confirm` or `block`).
    pub fn guard_decision(&self, decision: &str) {
        self.inner
            .guard_decisions
            .get_or_create(&DecisionLabels {
                decision: decision.to_string(),
            })
            .inc();
    }

    /// A build was refused before apply by the quota (`quota`: over
    /// budget; `cost`: its plan's cost could not be read).
    pub fn quota_refusal(&self, reason: &str) {
        self.inner
            .quota_refusals
            .get_or_create(&ReasonLabels {
                reason: reason.to_string(),
            })
            .inc();
    }

    /// `count` provisioner workers start, all idle.
    pub fn provisioners_started(&self, count: usize) {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        self.provisioner_state(PROVISIONER_IDLE).inc_by(count);
        self.provisioner_state(PROVISIONER_BUSY).inc_by(0);
    }

    /// A worker runs a build until the returned guard drops.
    pub fn provisioner_busy(&self) -> BusyProvisioner {
        self.provisioner_state(PROVISIONER_IDLE).dec();
        self.provisioner_state(PROVISIONER_BUSY).inc();
        BusyProvisioner {
            metrics: self.clone(),
        }
    }

    fn provisioner_state(&self, state: &str) -> Gauge {
        self.inner.provisioners.get_or_create_owned(&StateLabels {
            state: state.to_string(),
        })
    }

    /// One delivery attempt of a notification on `channel` ended with
    /// `outcome` ([`NOTIFICATION_SENT`], [`NOTIFICATION_RETRY`] or
    /// [`NOTIFICATION_FAILED`]).
    pub fn notification_attempt(&self, channel: &str, outcome: &str) {
        self.inner
            .notifications
            .get_or_create(&DeliveryLabels {
                channel: channel.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
    }

    /// One pass of the background loop `task` ([`PASS_SCHEDULER`],
    /// [`PASS_PREBUILDS`], [`PASS_NOTIFICATIONS`], [`PASS_KEEPER`],
    /// [`PASS_PROVISIONER`]) ended, whether or not it found work (or, for a
    /// loop under a lease, held it).
    pub fn background_pass(&self, task: &str) {
        self.inner
            .background_passes
            .get_or_create(&TaskLabels {
                task: task.to_string(),
            })
            .inc();
    }

    /// A scheduler tick of this server did `count` things of `action`
    /// (`build`, `dormant`, `notified`, `failed`).
    pub fn scheduler_actions(&self, action: &str, count: u64) {
        self.inner
            .scheduler_actions
            .get_or_create(&ActionLabels {
                action: action.to_string(),
            })
            .inc_by(count);
    }

    /// An app request reached its agent, `carried` as
    /// [`APP_STREAM_DIALED_BACK`] or [`APP_STREAM_TUNNEL`].
    pub fn app_stream(&self, carried: &str) {
        self.inner
            .app_streams
            .get_or_create(&CarriedLabels {
                carried: carried.to_string(),
            })
            .inc();
    }

    /// A connection of `kind` (`ssh`, `port-forward`, `pty`, `app`) opened.
    pub fn connection_opened(&self, kind: &str) {
        let labels = KindLabels {
            kind: kind.to_string(),
        };
        self.inner.connections.get_or_create(&labels).inc();
        self.inner.connections_open.get_or_create(&labels).inc();
    }

    /// A connection of `kind` that [`Metrics::connection_opened`] counted ended.
    pub fn connection_closed(&self, kind: &str) {
        self.inner
            .connections_open
            .get_or_create(&KindLabels {
                kind: kind.to_string(),
            })
            .dec();
    }

    /// The gauges read from the database by one refresh.
    pub fn set_platform(&self, gauges: &PlatformGauges) {
        let inner = &self.inner;
        inner.builds_held.set(gauges.builds_held);
        inner.jobs_pending.set(gauges.jobs_pending);
        inner.job_queue_oldest.set(gauges.job_queue_oldest_seconds);
        for (status, count) in &gauges.agents {
            inner
                .agents
                .get_or_create(&StatusLabels {
                    status: status.clone(),
                })
                .set(*count);
        }
        inner
            .notifications_pending
            .set(gauges.notifications_pending);
        inner.last_updated.set(gauges.updated_at_seconds);
    }

    /// A prebuilt workspace's first build ended: `succeeded` counts it
    /// created, anything else failed.
    pub fn prebuild_ended(&self, template: &str, preset: &str, succeeded: bool) {
        let family = if succeeded {
            &self.inner.prebuilds_created
        } else {
            &self.inner.prebuilds_failed
        };
        family.get_or_create(&preset_labels(template, preset)).inc();
    }

    /// A claim build succeeded `seconds` after the claim, replacing or
    /// deleting `replaced` resources.
    pub fn prebuild_claimed(&self, template: &str, preset: &str, seconds: f64, replaced: u64) {
        let labels = preset_labels(template, preset);
        let inner = &self.inner;
        inner.prebuilds_claimed.get_or_create(&labels).inc();
        inner
            .prebuild_claim_duration
            .get_or_create(&labels)
            .observe(seconds);
        inner
            .prebuild_replacements
            .get_or_create(&labels)
            .inc_by(replaced);
    }

    /// The pools as one refresh saw them; pools that are gone drop out.
    pub fn set_pools(&self, pools: &[PoolGauges]) {
        let inner = &self.inner;
        let families = [
            &inner.pools_desired,
            &inner.pools_running,
            &inner.pools_eligible,
            &inner.pools_hard_limited,
            &inner.pools_quota_limited,
            &inner.pools_paused,
        ];
        for family in families {
            family.clear();
        }
        for pool in pools {
            let labels = preset_labels(&pool.template_name, &pool.preset_name);
            let values = [
                pool.desired,
                pool.running,
                pool.eligible,
                i64::from(pool.hard_limited),
                i64::from(pool.quota_limited),
                i64::from(pool.paused),
            ];
            for (family, value) in families.iter().zip(values) {
                family.get_or_create(&labels).set(value);
            }
        }
    }

    /// The agents' monitors as this server holds them now; the rest drop out.
    pub fn set_monitors(&self, gauges: &[MonitorGauge]) {
        self.inner.agent_memory.clear();
        self.inner.agent_volumes.clear();
        for gauge in gauges {
            match &gauge.path {
                None => self
                    .inner
                    .agent_memory
                    .get_or_create(&AgentLabels {
                        workspace: gauge.workspace.clone(),
                        agent: gauge.agent.clone(),
                    })
                    .set(gauge.used_percent),
                Some(path) => self
                    .inner
                    .agent_volumes
                    .get_or_create(&VolumeLabels {
                        workspace: gauge.workspace.clone(),
                        agent: gauge.agent.clone(),
                        path: path.clone(),
                    })
                    .set(gauge.used_percent),
            };
        }
    }

    /// The whole registry in Prometheus text format (version 0.0.4).
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &self.inner.registry)?;
        Ok(text)
    }
}

/// The `method` label of a request: one of HTTP's standard methods, or
/// [`OTHER_METHOD`]. A client chooses its method freely (any token, of any
/// length), and every distinct label value is a series kept for the
/// server's life: labelling methods as sent let anyone grow the registry,
/// and every scrape, without bound.
pub fn method_label(method: &str) -> &'static str {
    const KNOWN: [&str; 9] = [
        "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE",
    ];
    KNOWN
        .into_iter()
        .find(|known| *known == method)
        .unwrap_or(OTHER_METHOD)
}

/// The `method` label of every request whose method is not a standard one.
pub const OTHER_METHOD: &str = "other";

fn preset_labels(template: &str, preset: &str) -> PresetLabels {
    PresetLabels {
        template_name: template.to_string(),
        preset_name: preset.to_string(),
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// A provisioner counted busy; back to idle when dropped.
#[must_use = "the provisioner counts as busy only while this lives"]
pub struct BusyProvisioner {
    metrics: Metrics,
}

impl Drop for BusyProvisioner {
    fn drop(&mut self) {
        self.metrics.provisioner_state(PROVISIONER_BUSY).dec();
        self.metrics.provisioner_state(PROVISIONER_IDLE).inc();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn sample(text: &str, series: &str) -> Option<String> {
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .map(str::to_string)
    }

    #[test]
    fn only_standard_methods_are_labels_of_their_own() {
        let cases = [
            ("GET", "GET"),
            ("DELETE", "DELETE"),
            ("OPTIONS", "OPTIONS"),
            // Methods are case-sensitive: `get` is not GET.
            ("get", OTHER_METHOD),
            ("PROPFIND", OTHER_METHOD),
            ("", OTHER_METHOD),
        ];
        for (method, label) in cases {
            assert_eq!(method_label(method), label, "{method:?}");
        }
        let metrics = Metrics::new();
        for n in 0..50 {
            let invented = format!("X{}", "Y".repeat(n * 80));
            metrics.http_request("unmatched", &invented, 405, 0.001);
        }
        let text = metrics.encode().unwrap();
        assert!(!text.contains("XY"), "an invented method became a label");
        assert_eq!(
            sample(
                &text,
                r#"abode_http_requests_total{route="unmatched",method="other",status="405"}"#
            )
            .as_deref(),
            Some("50")
        );
    }

    #[test]
    fn every_recording_point_shows_in_the_exposition() {
        let metrics = Metrics::new();
        metrics.http_request("/api/v1/workspaces/:workspace", "GET", 200, 0.01);
        metrics.http_request("/api/v1/workspaces/:workspace", "GET", 200, 0.02);
        metrics.build_ended("start", "succeeded", "initiator", 3.0);
        metrics.build_ended("stop", "awaiting_confirmation", "initiator", 2.0);
        metrics.guard_decision("confirm");
        metrics.provisioners_started(3);
        let busy = metrics.provisioner_busy();
        metrics.notification_attempt("webhook", NOTIFICATION_RETRY);
        metrics.notification_attempt("webhook", NOTIFICATION_SENT);
        metrics.notification_attempt("inbox", NOTIFICATION_SENT);
        metrics.set_platform(&PlatformGauges {
            builds_held: 1,
            jobs_pending: 2,
            job_queue_oldest_seconds: 1.5,
            agents: vec![("ready".into(), 4), ("disconnected".into(), 0)],
            notifications_pending: 5,
            updated_at_seconds: 1_700_000_000.0,
        });
        metrics.background_pass(PASS_KEEPER);
        metrics.background_pass(PASS_KEEPER);
        metrics.scheduler_actions("build", 2);
        metrics.prebuild_ended("base", "small", true);
        metrics.prebuild_ended("base", "small", false);
        metrics.prebuild_claimed("base", "small", 1.5, 2);
        metrics.set_pools(&[PoolGauges {
            template_name: "gone".into(),
            preset_name: "old".into(),
            desired: 9,
            ..PoolGauges::default()
        }]);
        metrics.set_pools(&[PoolGauges {
            template_name: "base".into(),
            preset_name: "small".into(),
            desired: 2,
            running: 2,
            eligible: 1,
            hard_limited: false,
            quota_limited: true,
            paused: true,
        }]);
        let text = metrics.encode().unwrap();
        assert!(
            !text.contains(r#"preset_name="old""#),
            "a pool that is gone drops out"
        );
        let cases = [
            (
                r#"abode_http_requests_total{route="/api/v1/workspaces/:workspace",method="GET",status="200"}"#,
                "2",
            ),
            (
                r#"abode_http_request_duration_seconds_count{route="/api/v1/workspaces/:workspace",method="GET"}"#,
                "2",
            ),
            (
                r#"abode_builds_total{transition="start",status="succeeded",reason="initiator"}"#,
                "1",
            ),
            (
                r#"abode_builds_total{transition="stop",status="awaiting_confirmation",reason="initiator"}"#,
                "1",
            ),
            (
                r#"abode_build_duration_seconds_count{transition="start"}"#,
                "1",
            ),
            (r#"abode_guard_decisions_total{decision="confirm"}"#, "1"),
            (
                r#"abode_prebuilt_workspaces_created_total{template_name="base",preset_name="small"}"#,
                "1",
            ),
            (
                r#"abode_prebuilt_workspaces_failed_total{template_name="base",preset_name="small"}"#,
                "1",
            ),
            (
                r#"abode_prebuilt_workspaces_claimed_total{template_name="base",preset_name="small"}"#,
                "1",
            ),
            (
                r#"abode_prebuilt_workspaces_resource_replacements_total{template_name="base",preset_name="small"}"#,
                "2",
            ),
            (
                r#"abode_prebuilt_workspaces_claim_duration_seconds_count{template_name="base",preset_name="small"}"#,
                "1",
            ),
            (
                r#"abode_prebuilt_workspaces_desired{template_name="base",preset_name="small"}"#,
                "2",
            ),
            (
                r#"abode_prebuilt_workspaces_eligible{template_name="base",preset_name="small"}"#,
                "1",
            ),
            (
                r#"abode_prebuilt_workspaces_paused{template_name="base",preset_name="small"}"#,
                "1",
            ),
            (
                r#"abode_prebuilt_workspaces_quota_limited{template_name="base",preset_name="small"}"#,
                "1",
            ),
            (r#"abode_background_passes_total{task="keeper"}"#, "2"),
            (r#"abode_scheduler_actions_total{action="build"}"#, "2"),
            ("abode_builds_held", "1"),
            ("abode_jobs_pending", "2"),
            ("abode_job_queue_oldest_seconds", "1.5"),
            (r#"abode_provisioners{state="busy"}"#, "1"),
            (r#"abode_provisioners{state="idle"}"#, "2"),
            (r#"abode_agents{status="ready"}"#, "4"),
            (
                r#"abode_notifications_total{channel="webhook",outcome="retry"}"#,
                "1",
            ),
            (
                r#"abode_notifications_total{channel="webhook",outcome="sent"}"#,
                "1",
            ),
            (
                r#"abode_notifications_total{channel="inbox",outcome="sent"}"#,
                "1",
            ),
            ("abode_notifications_pending", "5"),
            (r#"abode_agents{status="disconnected"}"#, "0"),
            ("abode_metrics_last_updated_seconds", "1700000000.0"),
        ];
        for (series, value) in cases {
            assert_eq!(
                sample(&text, series).as_deref(),
                Some(value),
                "{series} in\n{text}"
            );
        }
        drop(busy);
        let text = metrics.encode().unwrap();
        assert_eq!(
            sample(&text, r#"abode_provisioners{state="busy"}"#).as_deref(),
            Some("0")
        );
        assert_eq!(
            sample(&text, r#"abode_provisioners{state="idle"}"#).as_deref(),
            Some("3")
        );
    }
}
