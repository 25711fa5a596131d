//! How the store names a new row, in a module that names no sibling: the
//! domains' queries and both backends take their ids from here.

/// A fresh random id.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
