//! Which resource types hold data that outlives a build, and which of their
//! attributes decide their identity (changing them replaces the resource, and
//! the replacement starts empty). The list is documented in docs/lint.md and
//! extended with `--persistent-type TYPE[=ATTR,...]`.

use std::collections::BTreeMap;

use crate::error::LintError;

/// Built-in persistent types and their identity attributes, as their
/// providers document them ("forces replacement"). A path with a dot goes
/// through nested blocks (`metadata.name`). `count` and `for_each` are always
/// part of a resource's identity: they decide its address.
const BUILT_IN: &[(&str, &[&str])] = &[
    ("abode_volume", &["name"]),
    ("docker_volume", &["name", "driver", "driver_opts"]),
    (
        "aws_ebs_volume",
        &[
            "availability_zone",
            "encrypted",
            "kms_key_id",
            "snapshot_id",
            "outpost_arn",
        ],
    ),
    (
        "aws_efs_file_system",
        &[
            "creation_token",
            "encrypted",
            "kms_key_id",
            "performance_mode",
        ],
    ),
    (
        "google_compute_disk",
        &["name", "zone", "project", "type", "image", "snapshot"],
    ),
    (
        "google_compute_region_disk",
        &[
            "name",
            "region",
            "project",
            "type",
            "snapshot",
            "replica_zones",
        ],
    ),
    (
        "azurerm_managed_disk",
        &[
            "name",
            "resource_group_name",
            "location",
            "create_option",
            "zone",
        ],
    ),
    (
        "kubernetes_persistent_volume_claim",
        &[
            "metadata.name",
            "metadata.namespace",
            "spec.storage_class_name",
            "spec.access_modes",
        ],
    ),
    (
        "kubernetes_persistent_volume_claim_v1",
        &[
            "metadata.name",
            "metadata.namespace",
            "spec.storage_class_name",
            "spec.access_modes",
        ],
    ),
    ("kubernetes_persistent_volume", &["metadata.name"]),
    ("kubernetes_persistent_volume_v1", &["metadata.name"]),
    (
        "digitalocean_volume",
        &["name", "region", "snapshot_id", "filesystem_type"],
    ),
    ("hcloud_volume", &["location"]),
    ("lxd_volume", &["name", "pool"]),
    ("incus_storage_volume", &["name", "pool"]),
];

/// The identity attributes a type added without a list gets.
const DEFAULT_IDENTITY: &str = "name";

/// The persistent types one lint run knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersistentTypes {
    types: BTreeMap<String, Vec<String>>,
}

impl Default for PersistentTypes {
    fn default() -> Self {
        PersistentTypes {
            types: BUILT_IN
                .iter()
                .map(|(kind, attributes)| {
                    (
                        (*kind).to_string(),
                        attributes.iter().map(|a| (*a).to_string()).collect(),
                    )
                })
                .collect(),
        }
    }
}

impl PersistentTypes {
    /// Adds (or redefines) a type from `TYPE` or `TYPE=ATTR,ATTR.PATH,...`.
    /// A type alone gets `name` as its identity.
    pub fn add(&mut self, spec: &str) -> Result<(), LintError> {
        let bad = |why: &str| LintError::PersistentType {
            spec: spec.chars().take(80).collect(),
            why: why.to_string(),
        };
        let (kind, attributes) = match spec.split_once('=') {
            Some((kind, list)) => (
                kind.trim(),
                list.split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(str::to_string)
                    .collect::<Vec<_>>(),
            ),
            None => (spec.trim(), vec![DEFAULT_IDENTITY.to_string()]),
        };
        if !is_name(kind) {
            return Err(bad("a resource type is letters, digits and `_`"));
        }
        if attributes.is_empty() {
            return Err(bad("give at least one attribute after `=`"));
        }
        if let Some(attribute) = attributes.iter().find(|a| !a.split('.').all(is_name)) {
            return Err(bad(&format!(
                "attribute `{attribute}` is not a dotted path of names"
            )));
        }
        self.types.insert(kind.to_string(), attributes);
        Ok(())
    }

    /// The identity attributes of a persistent type, `None` for other types.
    pub fn identity(&self, kind: &str) -> Option<&[String]> {
        self.types.get(kind).map(Vec::as_slice)
    }

    /// Every known type with its identity attributes, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.types.iter().map(|(k, v)| (k.as_str(), v.as_slice()))
    }
}

fn is_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 128
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}
