//! Whether the person a checked ID token (and the provider's userinfo)
//! names may come in, and as whom: the email must be verified (unless the
//! operator said the provider's word is enough), in an allowed domain, and
//! the person in an allowed group. Pure: claims and the configuration in,
//! a person or a refusal out.

use serde_json::{Map, Value};

use crate::config::OidcConfig;

/// A person the provider vouches for and the configuration lets in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// The account's link: the issuer and its subject (never the email,
    /// which a person can change at the provider).
    pub issuer: String,
    pub subject: String,
    pub email: String,
    /// A username made from the configured claim, in Abode's name rules;
    /// the identity service makes it unique.
    pub username: String,
    /// The Abode groups the claim names (mapped), when group sync is on.
    pub groups: Option<Vec<String>>,
}

/// Why a person the provider vouched for is not let in; each says what to
/// do on the refusal page.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the identity provider gave no email address for this account; Abode needs one (ask your administrator to release the `email` claim)")]
    NoEmail,
    #[error("the identity provider has not verified the email address {0}; verify it there, then sign in again")]
    EmailNotVerified(String),
    #[error("email addresses at {0} may not sign in to this Abode server")]
    DomainNotAllowed(String),
    #[error("you are not in a group allowed to sign in to this Abode server; ask your administrator to add you to one")]
    NotInAllowedGroups,
    #[error("the identity provider's `{0}` claim is not a list of group names")]
    BadGroupsClaim(String),
}

/// The person `claims` names, if `config` lets them in. `claims` are the
/// ID token's merged with userinfo's (the token's `iss` and `sub` win).
pub fn admit(
    config: &OidcConfig,
    issuer: &str,
    subject: &str,
    claims: &Map<String, Value>,
) -> Result<Admitted, Refusal> {
    let email = claims
        .get("email")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|email| !email.is_empty())
        .ok_or(Refusal::NoEmail)?
        .to_string();
    if !config.ignore_email_verified && !verified(claims.get("email_verified")) {
        return Err(Refusal::EmailNotVerified(email));
    }
    if !config.email_domains.is_empty() {
        let domain = email
            .rsplit_once('@')
            .map(|(_, domain)| domain.to_ascii_lowercase())
            .unwrap_or_default();
        if !config.email_domains.contains(&domain) {
            return Err(Refusal::DomainNotAllowed(if domain.is_empty() {
                "(no domain)".into()
            } else {
                domain
            }));
        }
    }
    let groups = match &config.groups {
        None => None,
        Some(sync) => {
            let named = group_names(claims.get(&sync.field))
                .ok_or_else(|| Refusal::BadGroupsClaim(sync.field.clone()))?;
            if !config.allowed_groups.is_empty()
                && !named
                    .iter()
                    .any(|group| config.allowed_groups.iter().any(|allowed| allowed == group))
            {
                return Err(Refusal::NotInAllowedGroups);
            }
            // With a mapping, only the groups it names sync: a provider
            // group someone could create under an Abode group's name (one
            // that holds rights on a template) grants nothing.
            let mut mapped: Vec<String> = if sync.mapping.is_empty() {
                named.clone()
            } else {
                named
                    .iter()
                    .filter_map(|group| sync.mapping.get(group).cloned())
                    .collect()
            };
            mapped.sort();
            mapped.dedup();
            Some(mapped)
        }
    };
    let wanted = claims
        .get(&config.username_field)
        .and_then(Value::as_str)
        .filter(|name| !name.trim().is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| email.split('@').next().unwrap_or_default().to_string());
    Ok(Admitted {
        issuer: issuer.to_string(),
        subject: subject.to_string(),
        email,
        username: sanitize_username(&wanted),
        groups,
    })
}

/// `true`, or the string `"true"` some providers send.
fn verified(value: Option<&Value>) -> bool {
    match value {
        Some(Value::Bool(verified)) => *verified,
        Some(Value::String(text)) => text.eq_ignore_ascii_case("true"),
        _ => false,
    }
}

/// The group names of a claim: a list of strings, or one string; absent is
/// no group. `None`: something else.
fn group_names(value: Option<&Value>) -> Option<Vec<String>> {
    match value {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::String(one)) => Some(vec![one.clone()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_string))
            .collect(),
        Some(_) => None,
    }
}

/// A name in Abode's rules (1-64 of `[a-z0-9-]`, not starting with `-`)
/// made from anything: lowercase, other characters become `-`, runs of
/// `-` become one; nothing left is `user`.
pub fn sanitize_username(wanted: &str) -> String {
    let mut name = String::new();
    for c in wanted.chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if c == '-' && (name.is_empty() || name.ends_with('-')) {
            continue;
        }
        name.push(c);
    }
    name.truncate(64);
    let name = name.trim_end_matches('-').to_string();
    if name.is_empty() {
        "user".to_string()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::config::GroupSync;
    use serde_json::json;

    fn config() -> OidcConfig {
        let mut config = OidcConfig::for_tests("https://id.example.com", "abode", "s");
        config.email_domains = vec!["example.com".into()];
        config.allowed_groups = vec!["dev".into(), "ops".into()];
        config.groups = Some(GroupSync {
            field: "groups".into(),
            mapping: [("ops".to_string(), "operators".to_string())].into(),
            auto_create: true,
        });
        config
    }

    #[test]
    fn claims_admit_or_refuse() {
        type Case = (
            &'static str,
            Value,
            Result<(&'static str, Vec<&'static str>), Refusal>,
        );
        let cases: Vec<Case> = vec![
            (
                "a verified member",
                json!({"email": "Ann@example.com", "email_verified": true, "preferred_username": "Ann.Lee", "groups": ["dev", "x"]}),
                Ok(("ann-lee", vec![])),
            ),
            (
                "mapped group, string verified",
                json!({"email": "bo@example.com", "email_verified": "true", "groups": "ops"}),
                Ok(("bo", vec!["operators"])),
            ),
            (
                "unverified",
                json!({"email": "cy@example.com", "email_verified": false, "groups": ["dev"]}),
                Err(Refusal::EmailNotVerified("cy@example.com".into())),
            ),
            (
                "verification not said",
                json!({"email": "cy@example.com", "groups": ["dev"]}),
                Err(Refusal::EmailNotVerified("cy@example.com".into())),
            ),
            (
                "no email",
                json!({"email_verified": true, "groups": ["dev"]}),
                Err(Refusal::NoEmail),
            ),
            (
                "other domain",
                json!({"email": "eve@evil.example.org", "email_verified": true, "groups": ["dev"]}),
                Err(Refusal::DomainNotAllowed("evil.example.org".into())),
            ),
            (
                "a lookalike domain",
                json!({"email": "eve@notexample.com", "email_verified": true, "groups": ["dev"]}),
                Err(Refusal::DomainNotAllowed("notexample.com".into())),
            ),
            (
                "no allowed group",
                json!({"email": "fay@example.com", "email_verified": true, "groups": ["sales"]}),
                Err(Refusal::NotInAllowedGroups),
            ),
            (
                "no groups claim",
                json!({"email": "fay@example.com", "email_verified": true}),
                Err(Refusal::NotInAllowedGroups),
            ),
            (
                "groups not names",
                json!({"email": "fay@example.com", "email_verified": true, "groups": [1]}),
                Err(Refusal::BadGroupsClaim("groups".into())),
            ),
        ];
        let config = config();
        for (name, claims, expected) in cases {
            let Value::Object(claims) = claims else {
                panic!("{name}")
            };
            let got = admit(&config, "https://id.example.com", "sub-1", &claims);
            match (got, expected) {
                (Ok(admitted), Ok((username, groups))) => {
                    assert_eq!(admitted.username, username, "{name}");
                    assert_eq!(
                        admitted.groups,
                        Some(groups.iter().map(|g| g.to_string()).collect()),
                        "{name}"
                    );
                    assert_eq!(admitted.subject, "sub-1", "{name}");
                }
                (Err(refusal), Err(expected)) => assert_eq!(refusal, expected, "{name}"),
                (got, expected) => panic!("{name}: got {got:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn ignoring_verification_and_no_lists_let_anyone_in() {
        let mut config = OidcConfig::for_tests("https://id.example.com", "abode", "s");
        config.ignore_email_verified = true;
        let claims = json!({"email": "x@anywhere.org"});
        let admitted = admit(&config, "i", "s", claims.as_object().unwrap()).unwrap();
        assert_eq!(admitted.username, "x");
        assert_eq!(admitted.groups, None);
    }

    #[test]
    fn usernames_follow_abode_rules() {
        for (wanted, expected) in [
            ("alice", "alice"),
            ("Alice Smith", "alice-smith"),
            ("--x__y--", "x-y"),
            ("émile", "mile"),
            ("", "user"),
            ("***", "user"),
            (&"a".repeat(80), &"a".repeat(64)),
        ] {
            assert_eq!(sanitize_username(wanted), expected, "{wanted}");
        }
    }
}
