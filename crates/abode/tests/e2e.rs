//! Every end-to-end test of the `abode` binary, in one test binary: one
//! link of the test harness instead of one per file (about fifty), which
//! was a minute of CI's build. Each file below is a module of its own, as it
//! was a binary of its own; nextest still runs every test in a process of
//! its own, so nothing is shared between tests that was not before.
//! `house.rs` (the shape of the code) stays a binary apart: it reads the
//! source, not the binary.

mod browser;
mod util;

mod deploy;
mod e2e_accounts;
mod e2e_agent;
mod e2e_apart;
mod e2e_apps;
mod e2e_audit_export;
mod e2e_backup;
mod e2e_bad_input;
mod e2e_cancel;
mod e2e_connection_log;
mod e2e_crash;
mod e2e_daemons;
mod e2e_daemons_chaos;
mod e2e_dotfiles;
mod e2e_env_stat;
mod e2e_external_auth;
mod e2e_faults;
mod e2e_fencing;
mod e2e_groups;
mod e2e_guarded;
mod e2e_hostile_text;
mod e2e_lifecycle;
mod e2e_lint;
mod e2e_metadata;
mod e2e_metrics;
mod e2e_notifications;
mod e2e_oidc;
mod e2e_orphan;
mod e2e_placement;
mod e2e_postgres;
mod e2e_prebuilds;
mod e2e_presets;
mod e2e_preview;
mod e2e_provider_socket;
mod e2e_provisioner_keys;
mod e2e_provisioners;
mod e2e_proxy;
mod e2e_quotas;
mod e2e_recovery;
mod e2e_rename;
mod e2e_retain;
mod e2e_roles;
mod e2e_sandbox;
mod e2e_schedule_settings;
mod e2e_scheduler;
mod e2e_scripts;
mod e2e_security;
mod e2e_servers;
mod e2e_sessions;
mod e2e_sharing;
mod e2e_shutdown;
mod e2e_snapshot;
mod e2e_ssh;
mod e2e_template_lifecycle;
mod e2e_terminal;
mod e2e_timings;
mod e2e_tls;
mod e2e_unsaved;
mod e2e_upgrade;
mod e2e_web;
mod plan_check;
mod provider_lifecycle;
