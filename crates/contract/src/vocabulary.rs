//! The words every layer says about builds and people, each defined once:
//! a build's status and reason, a job's kind, what a build is to the
//! prebuilt workspaces, which template version a build plans, and a
//! person's roles. (A build's transition is the environment contract's
//! own: [`crate::Transition`].)
//!
//! Each value has one name, its `as_str`: the text a database column keeps
//! (the store reads it back through the `sqlx` feature, and a name no value
//! has fails the read, naming it) and the text the wire says. The store,
//! the wire (`abode-sdk`), the scheduler's rules, the runner and the control
//! plane use these types; conversions are only to and from those names.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// A typed value with a stored name, written once: `ALL` (in the order
/// given), `as_str`, `Display`, and `FromStr`, whose error `$unknown` (a
/// tuple struct of the text, declared beside the type with its own message)
/// carries the unknown name cut at 64 characters; with the `sqlx` feature,
/// read from a database column by that name.
macro_rules! named {
    ($type:ident, $unknown:ident, { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $type {
            pub const ALL: [$type; [$($name),+].len()] = [$($type::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($type::$variant => $name,)+
                }
            }
        }

        impl fmt::Display for $type {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $type {
            type Err = $unknown;

            fn from_str(value: &str) -> Result<Self, Self::Err> {
                $type::ALL
                    .into_iter()
                    .find(|known| known.as_str() == value)
                    .ok_or_else(|| $unknown(value.chars().take(64).collect()))
            }
        }

        #[cfg(feature = "sqlx")]
        $crate::stored_as_text!($type);
    };
}

/// Where a build is in its life. Final: succeeded, failed, canceled; a
/// build awaiting confirmation is at rest but not final (a person decides).
///
/// On the wire it is its name (`"awaiting_confirmation"`), as in its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildStatus {
    Pending,
    Running,
    /// Planned, held by the guard until someone confirms (or cancels) the
    /// saved plan.
    AwaitingConfirmation,
    Succeeded,
    Failed,
    Canceled,
}

impl BuildStatus {
    /// Succeeded, failed or canceled: nothing more happens to the build.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            BuildStatus::Succeeded | BuildStatus::Failed | BuildStatus::Canceled
        )
    }

    /// Final, or held until a person acts: nothing more happens on its own
    /// (what a waiting client or a log's follower stops at).
    pub fn is_at_rest(self) -> bool {
        self.is_final() || self == BuildStatus::AwaitingConfirmation
    }
}

/// A build status none of [`BuildStatus`] names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown build status `{0}`")]
pub struct UnknownBuildStatus(pub String);

named!(BuildStatus, UnknownBuildStatus, {
    Pending => "pending",
    Running => "running",
    AwaitingConfirmation => "awaiting_confirmation",
    Succeeded => "succeeded",
    Failed => "failed",
    Canceled => "canceled",
});

/// Why a build was requested: by the person who asked (`initiator`) or by a
/// part of the system acting on its own rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuildReason {
    /// A person asked for it (create, start, stop, update, delete).
    Initiator,
    Autostart,
    Autostop,
    /// A failed workspace stopped after its template's failure TTL.
    FailureTtl,
    Dormancy,
    Autodelete,
    /// A prebuilt workspace made for a preset's pool.
    Prebuild,
    /// A prebuilt workspace handed to the person who claimed it.
    PrebuildClaim,
    /// A person's destroy of a retained resource (`abode retained destroy`).
    RetainedDestroy,
    /// The destroy of a retained resource whose record expired, queued by
    /// the scheduler.
    RetainedExpired,
    /// A prebuilt workspace nobody claimed in time.
    PrebuildExpired,
    /// A person's rename: the workspace's current transition planned under
    /// its new name (`abode rename`).
    Rename,
    /// A person's restart: a stop, then a start once it succeeded
    /// (`abode restart`).
    Restart,
}

impl BuildReason {
    /// Whether the lifecycle scheduler asked for it (a build nobody
    /// watched): autostart, autostop, failure TTL, dormancy, autodelete,
    /// and the destroy of an expired retained resource.
    pub fn is_scheduler(self) -> bool {
        matches!(
            self,
            BuildReason::Autostart
                | BuildReason::Autostop
                | BuildReason::FailureTtl
                | BuildReason::Dormancy
                | BuildReason::Autodelete
                | BuildReason::RetainedExpired
        )
    }

    /// What a build of this reason is to the prebuilt workspaces: the one
    /// place the fact is worked out (see [`PrebuildPart`]).
    pub fn prebuild_part(self) -> Option<PrebuildPart> {
        match self {
            BuildReason::Prebuild => Some(PrebuildPart::Pool),
            BuildReason::PrebuildClaim => Some(PrebuildPart::Claim),
            // The delete of an unclaimed prebuilt workspace runs as any
            // delete: nothing follows it for the pool.
            BuildReason::PrebuildExpired
            | BuildReason::Initiator
            | BuildReason::Autostart
            | BuildReason::Autostop
            | BuildReason::FailureTtl
            | BuildReason::Dormancy
            | BuildReason::Autodelete
            | BuildReason::RetainedDestroy
            | BuildReason::RetainedExpired
            | BuildReason::Rename
            | BuildReason::Restart => None,
        }
    }
}

/// A build reason none of [`BuildReason`] names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown build reason `{0}`")]
pub struct UnknownBuildReason(pub String);

named!(BuildReason, UnknownBuildReason, {
    Initiator => "initiator",
    Autostart => "autostart",
    Autostop => "autostop",
    FailureTtl => "failure_ttl",
    Dormancy => "dormancy",
    Autodelete => "autodelete",
    Prebuild => "prebuild",
    PrebuildClaim => "prebuild_claim",
    PrebuildExpired => "prebuild_expired",
    RetainedDestroy => "retained_destroy",
    RetainedExpired => "retained_expired",
    Rename => "rename",
    Restart => "restart",
});

/// What a build is to the prebuilt workspaces, worked out once from its
/// reason ([`BuildReason::prebuild_part`]) and carried with the build's job:
/// into its environment (`ABODE_IS_PREBUILD`, `ABODE_IS_PREBUILD_CLAIM`),
/// the guard's judgement (a claim replaces freely) and what follows its end
/// (the pool's counts, the report of what a claim replaced).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrebuildPart {
    /// A pool's own build: made, replaced or deleted by the `prebuilds`
    /// actor.
    Pool,
    /// The build that hands a prebuilt workspace to the person who claimed
    /// it: a `start` that may replace what nobody's data is in.
    Claim,
}

/// What a queued job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobKind {
    /// A whole build: plan, guard, apply.
    Build,
    /// The apply of the confirmed, saved plan of a held build.
    ApplySavedPlan,
}

/// A job kind none of [`JobKind`] names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job kind `{0}`")]
pub struct UnknownJobKind(pub String);

named!(JobKind, UnknownJobKind, {
    Build => "build",
    ApplySavedPlan => "apply_saved_plan",
});

/// Which template version a build plans: what `abode start` (the current
/// one), `abode update` (the active one) and `--version N` (that one) ask
/// for, under one name from the CLI to the store. On the wire a build
/// request says it as `update: true` or `template_version: N` (see
/// [`VersionChoice::from_wire`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionChoice {
    /// The version the workspace is on: what its last successful build applied.
    Current,
    /// The template's active version (a new workspace, an update).
    Active,
    /// That version of the workspace's template.
    Number(i64),
}

impl VersionChoice {
    /// A build request's `template_version` and `update`: a number wins,
    /// then `update`, else the current version.
    pub fn from_wire(template_version: Option<i64>, update: bool) -> VersionChoice {
        match (template_version, update) {
            (Some(number), _) => VersionChoice::Number(number),
            (None, true) => VersionChoice::Active,
            (None, false) => VersionChoice::Current,
        }
    }

    /// The other way: `(template_version, update)` as a request says them.
    pub fn to_wire(self) -> (Option<i64>, bool) {
        match self {
            VersionChoice::Current => (None, false),
            VersionChoice::Active => (None, true),
            VersionChoice::Number(number) => (Some(number), false),
        }
    }
}

/// One role a user can hold. The order is the order of display (and of
/// [`Role::ALL`]): the widest first. What a role allows is
/// `abode-authz`'s table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// Everything, on anyone's objects.
    Owner,
    /// Templates, and reading every workspace.
    TemplateAdmin,
    /// Users, not templates.
    UserAdmin,
    /// Reads the audit log and every workspace's status and builds; changes
    /// nothing.
    Auditor,
    /// Their own workspaces.
    Member,
}

/// A role name none of [`Role`] spells (from a request or from the database).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role `{}` (one of: owner, template-admin, user-admin, auditor, member)", .0.escape_debug())]
pub struct UnknownRole(pub String);

named!(Role, UnknownRole, {
    Owner => "owner",
    TemplateAdmin => "template-admin",
    UserAdmin => "user-admin",
    Auditor => "auditor",
    Member => "member",
});

/// The roles of one user: a set, shown widest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Roles(BTreeSet<Role>);

impl Roles {
    pub fn new() -> Roles {
        Roles::default()
    }

    /// Parses each name; the first unknown one is the error.
    pub fn parse_each<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Roles, UnknownRole> {
        names.into_iter().map(str::parse).collect()
    }

    pub fn contains(&self, role: Role) -> bool {
        self.0.contains(&role)
    }

    pub fn insert(&mut self, role: Role) -> bool {
        self.0.insert(role)
    }

    pub fn remove(&mut self, role: Role) -> bool {
        self.0.remove(&role)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Widest first.
    pub fn iter(&self) -> impl Iterator<Item = Role> + '_ {
        self.0.iter().copied()
    }

    /// These roles with `add` added and `remove` taken away (a role in both
    /// ends up held: adding wins, so a request cannot remove what it names to
    /// add).
    pub fn changed(&self, add: &Roles, remove: &Roles) -> Roles {
        let mut roles = self.clone();
        for role in remove.iter() {
            roles.remove(role);
        }
        for role in add.iter() {
            roles.insert(role);
        }
        roles
    }

    /// The name `users.role` keeps for this set: the first schema's CHECK
    /// allows only `owner`, `template-admin` and `member`.
    pub fn legacy_role(&self) -> &'static str {
        if self.contains(Role::Owner) {
            Role::Owner.as_str()
        } else if self.contains(Role::TemplateAdmin) {
            Role::TemplateAdmin.as_str()
        } else {
            Role::Member.as_str()
        }
    }
}

impl FromIterator<Role> for Roles {
    fn from_iter<I: IntoIterator<Item = Role>>(roles: I) -> Self {
        Roles(roles.into_iter().collect())
    }
}

impl<const N: usize> From<[Role; N]> for Roles {
    fn from(roles: [Role; N]) -> Self {
        roles.into_iter().collect()
    }
}

/// `owner, member`; `(none)` for the empty set.
impl fmt::Display for Roles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("(none)");
        }
        for (index, role) in self.iter().enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            f.write_str(role.as_str())?;
        }
        Ok(())
    }
}

/// A comma-separated list (`owner,member`; spaces around names are allowed),
/// as `--role` and the API's lists spell it.
impl FromStr for Roles {
    type Err = UnknownRole;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Roles::parse_each(value.split(',').map(str::trim))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_value_reads_back_from_its_name() {
        for status in BuildStatus::ALL {
            assert_eq!(status.as_str().parse(), Ok(status));
            let json = serde_json::to_string(&status).unwrap_or_default();
            assert_eq!(json, format!("\"{status}\""));
        }
        for reason in BuildReason::ALL {
            assert_eq!(reason.as_str().parse(), Ok(reason));
        }
        for kind in JobKind::ALL {
            assert_eq!(kind.as_str().parse(), Ok(kind));
        }
        for role in Role::ALL {
            assert_eq!(role.as_str().parse(), Ok(role));
        }
        assert_eq!(
            "held".parse::<BuildStatus>(),
            Err(UnknownBuildStatus("held".into()))
        );
        let long = "x".repeat(100);
        assert_eq!(long.parse::<JobKind>(), Err(UnknownJobKind("x".repeat(64))));
    }

    #[test]
    fn only_a_claim_build_is_a_claim() {
        let claims: Vec<BuildReason> = BuildReason::ALL
            .into_iter()
            .filter(|reason| reason.prebuild_part() == Some(PrebuildPart::Claim))
            .collect();
        assert_eq!(claims, [BuildReason::PrebuildClaim]);
        assert_eq!(
            BuildReason::Prebuild.prebuild_part(),
            Some(PrebuildPart::Pool)
        );
        assert_eq!(BuildReason::PrebuildExpired.prebuild_part(), None);
    }

    #[test]
    fn a_version_choice_is_said_on_the_wire_and_read_back() {
        for choice in [
            VersionChoice::Current,
            VersionChoice::Active,
            VersionChoice::Number(3),
        ] {
            let (number, update) = choice.to_wire();
            assert_eq!(VersionChoice::from_wire(number, update), choice);
        }
        assert_eq!(
            VersionChoice::from_wire(Some(2), true),
            VersionChoice::Number(2)
        );
    }
}
