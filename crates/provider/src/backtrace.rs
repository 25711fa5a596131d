//! The backtrace setting the provider turns off for itself and keeps from the
//! processes it starts, in a module of its own: [`crate::serve`] silences it,
//! `abode_process` (`process.rs`) asks whether it did, and neither names the
//! other for it.

use std::sync::atomic::{AtomicBool, Ordering};

pub(crate) const LIB_BACKTRACE: &str = "RUST_LIB_BACKTRACE";

/// Set when [`silence`] added RUST_LIB_BACKTRACE, so processes the provider
/// starts do not inherit it.
static SILENCED: AtomicBool = AtomicBool::new(false);

/// Turns library backtraces off unless the environment says otherwise:
/// tf-provider appends a backtrace to every diagnostic when backtraces are on
/// (RUST_BACKTRACE in a developer's shell), and template authors need the
/// message.
pub(crate) fn silence() {
    if std::env::var_os(LIB_BACKTRACE).is_none() {
        std::env::set_var(LIB_BACKTRACE, "0");
        SILENCED.store(true, Ordering::Relaxed);
    }
}

/// Whether [`silence`] set RUST_LIB_BACKTRACE (the environment did not).
pub(crate) fn silenced() -> bool {
    SILENCED.load(Ordering::Relaxed)
}
