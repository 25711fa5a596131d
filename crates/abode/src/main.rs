//! The `abode` binary: thin glue between the command line and Abode's library crates.

fn main() {}
