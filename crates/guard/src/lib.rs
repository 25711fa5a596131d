//! Abode's plan guard: the heart of Abode's promise that a workspace never loses a
//! persistent resource because Terraform decided to delete or replace it.
//!
//! (being written)
