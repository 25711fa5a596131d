//! What an API token may be used for (issue 49): its scope, typed and read
//! once from the column's text. A scope only narrows what the token's owner
//! may do; which actions each kind covers is the policy's (`abode-authz`).
//!
//! The stored text is `all`, or grants separated by `;`, each a kind and,
//! for the kinds limited to named objects, `=` and the objects separated by
//! `,`: `read;template:push=web,api;workspace:connect=ID`. Templates are
//! named (a push may create the template); workspaces are kept by id, so a
//! workspace deleted and made again under the same name is not covered.

use std::fmt;
use std::str::FromStr;

/// One kind of scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScopeKind {
    /// Everything the owner may do (sessions, and tokens made without a
    /// scope).
    All,
    /// Every read the owner may make, except the Terraform state.
    Read,
    /// Pushing and activating versions of the named templates.
    TemplatePush,
    /// Connecting to the named workspaces (SSH, port forwards, terminal).
    WorkspaceConnect,
    /// Starting, stopping, updating the named workspaces and canceling their
    /// builds.
    WorkspaceBuild,
}

/// A scope name none of [`ScopeKind`] names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scope `{0}`: use all, read, template:push, workspace:connect or workspace:build")]
pub struct UnknownScope(pub String);

crate::named!(ScopeKind, UnknownScope, {
    All => "all",
    Read => "read",
    TemplatePush => "template:push",
    WorkspaceConnect => "workspace:connect",
    WorkspaceBuild => "workspace:build",
});

impl ScopeKind {
    /// What the kind is limited to, if it is limited to named objects.
    pub fn limited_to(self) -> Option<ScopeObjects> {
        match self {
            ScopeKind::All | ScopeKind::Read => None,
            ScopeKind::TemplatePush => Some(ScopeObjects::Templates),
            ScopeKind::WorkspaceConnect | ScopeKind::WorkspaceBuild => {
                Some(ScopeObjects::Workspaces)
            }
        }
    }
}

/// What a limited kind names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeObjects {
    /// Template names.
    Templates,
    /// Workspace ids.
    Workspaces,
}

/// One grant of a scope: a kind, and the objects it is limited to (empty
/// for `all` and `read`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScopeGrant {
    pub kind: ScopeKind,
    pub objects: Vec<String>,
}

/// A token's scope: one or more grants, each kind at most once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenScope {
    grants: Vec<ScopeGrant>,
}

/// Why a scope cannot be made or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    #[error(transparent)]
    Unknown(#[from] UnknownScope),
    #[error("a token needs at least one scope")]
    Empty,
    #[error("scope {0} is given twice")]
    Twice(ScopeKind),
    #[error("scope all already covers every other scope: give all alone")]
    AllWithOthers,
    #[error("scope {kind} needs {what} it is limited to ({flag})")]
    Unlimited {
        kind: ScopeKind,
        what: &'static str,
        flag: &'static str,
    },
    #[error("scope {0} is not limited to named objects")]
    Limited(ScopeKind),
    #[error("`{0}` cannot be named in a scope")]
    BadObject(String),
}

impl TokenScope {
    /// What sessions and tokens made without a scope hold.
    pub fn all() -> TokenScope {
        TokenScope {
            grants: vec![ScopeGrant {
                kind: ScopeKind::All,
                objects: Vec::new(),
            }],
        }
    }

    /// A scope of these grants, checked: at least one, each kind once,
    /// `all` alone, limited kinds with at least one object and unlimited
    /// ones with none. Objects are kept sorted and once each.
    pub fn new(grants: Vec<ScopeGrant>) -> Result<TokenScope, ScopeError> {
        if grants.is_empty() {
            return Err(ScopeError::Empty);
        }
        let mut checked: Vec<ScopeGrant> = Vec::with_capacity(grants.len());
        for mut grant in grants {
            if checked.iter().any(|seen| seen.kind == grant.kind) {
                return Err(ScopeError::Twice(grant.kind));
            }
            match grant.kind.limited_to() {
                None if !grant.objects.is_empty() => {
                    return Err(ScopeError::Limited(grant.kind));
                }
                Some(objects) if grant.objects.is_empty() => {
                    let (what, flag) = match objects {
                        ScopeObjects::Templates => ("the templates", "--template T"),
                        ScopeObjects::Workspaces => ("the workspaces", "--workspace WS"),
                    };
                    return Err(ScopeError::Unlimited {
                        kind: grant.kind,
                        what,
                        flag,
                    });
                }
                _ => {}
            }
            if let Some(bad) = grant.objects.iter().find(|object| !nameable(object)) {
                return Err(ScopeError::BadObject(bad.chars().take(64).collect()));
            }
            grant.objects.sort();
            grant.objects.dedup();
            checked.push(grant);
        }
        if checked.len() > 1 && checked.iter().any(|grant| grant.kind == ScopeKind::All) {
            return Err(ScopeError::AllWithOthers);
        }
        checked.sort_by_key(|grant| grant.kind);
        Ok(TokenScope { grants: checked })
    }

    pub fn grants(&self) -> &[ScopeGrant] {
        &self.grants
    }

    /// The grant of `kind`, if the scope holds it.
    pub fn grant(&self, kind: ScopeKind) -> Option<&ScopeGrant> {
        self.grants.iter().find(|grant| grant.kind == kind)
    }

    pub fn is_all(&self) -> bool {
        self.grant(ScopeKind::All).is_some()
    }
}

/// Names and ids a scope can hold without making its text ambiguous.
fn nameable(object: &str) -> bool {
    !object.is_empty()
        && object.len() <= 128
        && object
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl fmt::Display for TokenScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, grant) in self.grants.iter().enumerate() {
            if i > 0 {
                f.write_str(";")?;
            }
            f.write_str(grant.kind.as_str())?;
            if !grant.objects.is_empty() {
                write!(f, "={}", grant.objects.join(","))?;
            }
        }
        Ok(())
    }
}

impl FromStr for TokenScope {
    type Err = ScopeError;

    fn from_str(text: &str) -> Result<TokenScope, ScopeError> {
        let grants = text
            .split(';')
            .map(|part| {
                let (kind, objects) = match part.split_once('=') {
                    Some((kind, objects)) => {
                        (kind, objects.split(',').map(str::to_string).collect())
                    }
                    None => (part, Vec::new()),
                };
                Ok(ScopeGrant {
                    kind: kind.parse()?,
                    objects,
                })
            })
            .collect::<Result<Vec<_>, ScopeError>>()?;
        TokenScope::new(grants)
    }
}

crate::stored_by_name!(TokenScope);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_text_reads_back_as_written() {
        for text in [
            "all",
            "read",
            "template:push=api,web",
            "read;template:push=web;workspace:connect=0b5c;workspace:build=0b5c,77aa",
        ] {
            let scope: TokenScope = text.parse().unwrap();
            let again: TokenScope = scope.to_string().parse().unwrap();
            assert_eq!(scope, again, "{text}");
        }
        assert_eq!(TokenScope::all().to_string(), "all");
    }

    #[test]
    fn a_scope_that_means_nothing_or_too_much_is_refused() {
        for (text, says) in [
            ("", "unknown scope ``"),
            ("write", "unknown scope `write`"),
            ("all;read", "give all alone"),
            ("read;read", "scope read is given twice"),
            ("template:push", "--template T"),
            ("workspace:build", "--workspace WS"),
            ("read=x", "not limited"),
            ("template:push=a b", "cannot be named"),
            ("template:push=a,", "cannot be named"),
            ("template:push=x;y", "unknown scope `y`"),
        ] {
            let refused = text.parse::<TokenScope>().unwrap_err().to_string();
            assert!(refused.contains(says), "{text}: {refused}");
        }
    }
}
