//! The control plane's tests over a real store, in one test binary: one
//! link instead of one per file. Each file is a module, as it was a binary.

mod door;
mod presets;
mod provisioner_keys;
mod schedules;
