//! The resource types of Abode's template annotations, in a module of their
//! own: the plan's reader keeps an `abode_protect`'s body while it reads, the
//! rules resolve it afterwards, and the decision and the memory leave the
//! annotations' own changes aside. None of them names another for the names.

/// The resource type of template annotations.
pub const PROTECT_TYPE: &str = "abode_protect";

/// Whether a resource type is one of Abode's pure annotations. They hold no data,
/// and a protected resource's replacement replaces its annotations too, so their
/// own changes are never protected changes. Abode's infrastructure types
/// (`abode_volume`, `abode_process`) are ordinary resources: a home volume is
/// exactly what a template protects.
pub(crate) fn is_annotation_type(resource_type: &str) -> bool {
    matches!(resource_type, PROTECT_TYPE | "abode_metadata")
}
