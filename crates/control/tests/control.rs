//! The control plane's tests over a real store, in one test binary: one
//! link instead of one per file. Each file is a module, as it was a binary.

mod daemon_claims;
mod door;
mod ephemeral_values;
mod presets;
mod provisioner_keys;
mod schedules;
