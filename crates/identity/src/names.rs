//! Names of users, templates and workspaces, checked in one place.

use crate::IdentityError;

/// Names of users, templates and workspaces: 1-64 of `[a-z0-9-]`, starting with
/// a letter or digit (they appear in paths, URLs and directory names).
pub fn validate_name(what: &str, name: &str) -> Result<(), IdentityError> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-');
    if valid {
        Ok(())
    } else {
        Err(IdentityError::BadRequest(format!(
            "invalid {what} \"{name}\": use 1-64 lowercase letters, digits and '-', starting with a letter or digit"
        )))
    }
}
