//! The machine room's tests over a real store, in one test binary. Each
//! file is a module.

mod daemon_claims;
mod ephemeral_values;
