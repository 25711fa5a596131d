//! The uids workspaces run as (`--workspace-uids FIRST-LAST`).
//!
//! With one user for every workspace, each workspace's processes could
//! signal, trace and read the others'. So each workspace gets a uid of its
//! own from a range the operator sets aside, kept with the workspace in the
//! store and never given to another; its processes run as it and its
//! volumes belong to it. The range must hold no uid this machine already
//! knows (a user, a group, root, Terraform's user): a workspace must never
//! be someone.

use std::str::FromStr;

/// The fewest uids a range may hold.
pub const MIN_UIDS: u32 = 100;

/// The range a server gives workspace uids from when root and not told.
pub const DEFAULT_RANGE: UidRange = UidRange {
    first: 200_000,
    last: 299_999,
};

/// A range of uids set aside for workspaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UidRange {
    pub first: u32,
    pub last: u32,
}

/// Why a range cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UidRangeError {
    #[error("--workspace-uids {0:?}: expected FIRST-LAST, e.g. 200000-299999")]
    Syntax(String),
    #[error("--workspace-uids {first}-{last}: holds {count} uids, fewer than {MIN_UIDS}: give a wider range")]
    TooSmall { first: u32, last: u32, count: u64 },
    #[error("--workspace-uids {first}-{last}: holds uid {uid}, which is {who} on this machine: choose a range no user or group has")]
    Overlaps {
        first: u32,
        last: u32,
        uid: u32,
        who: String,
    },
    #[error("--workspace-uids {first}-{last}: {count} workspaces already have uids outside it (e.g. {example}): a range may grow, never leave a given uid out")]
    LeavesOut {
        first: u32,
        last: u32,
        count: usize,
        example: u32,
    },
}

impl FromStr for UidRange {
    type Err = UidRangeError;

    fn from_str(text: &str) -> Result<UidRange, UidRangeError> {
        let bad = || UidRangeError::Syntax(text.chars().take(40).collect());
        let (first, last) = text.trim().split_once('-').ok_or_else(bad)?;
        let parse = |part: &str| {
            let part = part.trim();
            if part.is_empty() || !part.chars().all(|c| c.is_ascii_digit()) {
                return Err(bad());
            }
            part.parse::<u32>().map_err(|_| bad())
        };
        let (first, last) = (parse(first)?, parse(last)?);
        // The highest uid is (uid_t)-1, "no uid" to the kernel.
        if first == 0 || last < first || last == u32::MAX {
            return Err(bad());
        }
        let count = u64::from(last) - u64::from(first) + 1;
        if count < u64::from(MIN_UIDS) {
            return Err(UidRangeError::TooSmall { first, last, count });
        }
        Ok(UidRange { first, last })
    }
}

impl std::fmt::Display for UidRange {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}-{}", self.first, self.last)
    }
}

impl UidRange {
    pub fn contains(&self, uid: u32) -> bool {
        (self.first..=self.last).contains(&uid)
    }

    /// Refuses a range holding a uid or gid this machine's user and group
    /// databases (`passwd`, `group` text) name, or one of `reserved` (each
    /// with who it is).
    pub fn check_against(
        &self,
        passwd: &str,
        group: &str,
        reserved: &[(u32, String)],
    ) -> Result<(), UidRangeError> {
        let overlap = |uid: u32, who: String| UidRangeError::Overlaps {
            first: self.first,
            last: self.last,
            uid,
            who,
        };
        for (uid, who) in reserved {
            if self.contains(*uid) {
                return Err(overlap(*uid, who.clone()));
            }
        }
        for (database, kind) in [(passwd, "user"), (group, "group")] {
            for line in database.lines() {
                let mut fields = line.split(':');
                let name = fields.next().unwrap_or_default();
                let number = fields
                    .nth(1)
                    .and_then(|field| field.trim().parse::<u32>().ok());
                if let Some(number) = number.filter(|number| self.contains(*number)) {
                    return Err(overlap(number, format!("the {kind} {name}")));
                }
            }
        }
        Ok(())
    }

    /// Refuses a range that leaves out a uid already `given` to a workspace.
    pub fn check_keeps(&self, given: &[u32]) -> Result<(), UidRangeError> {
        let outside: Vec<u32> = given
            .iter()
            .copied()
            .filter(|uid| !self.contains(*uid))
            .collect();
        match outside.first() {
            None => Ok(()),
            Some(example) => Err(UidRangeError::LeavesOut {
                first: self.first,
                last: self.last,
                count: outside.len(),
                example: *example,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn ranges_read_as_first_dash_last_and_hold_enough_uids() {
        type Case<'a> = (&'a str, Result<(u32, u32), &'a str>);
        let cases: &[Case] = &[
            ("200000-299999", Ok((200_000, 299_999))),
            (" 5000-5099 ", Ok((5000, 5099))),
            ("5000-5098", Err("fewer than 100")),
            ("300-200", Err("expected FIRST-LAST")),
            ("0-1000", Err("expected FIRST-LAST")),
            ("-5-100", Err("expected FIRST-LAST")),
            ("+5-1000", Err("expected FIRST-LAST")),
            ("200000", Err("expected FIRST-LAST")),
            ("a-b", Err("expected FIRST-LAST")),
            ("1-4294967295", Err("expected FIRST-LAST")),
            ("1-99999999999", Err("expected FIRST-LAST")),
            ("", Err("expected FIRST-LAST")),
        ];
        for (text, expected) in cases {
            match (text.parse::<UidRange>(), expected) {
                (Ok(range), Ok((first, last))) => {
                    assert_eq!((range.first, range.last), (*first, *last), "{text}")
                }
                (Err(error), Err(needle)) => {
                    assert!(error.to_string().contains(needle), "{text}: {error}")
                }
                (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_range_holding_a_user_a_group_or_a_reserved_uid_is_refused() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534::/:/usr/sbin/nologin\nann:x:200050:100::/home/ann:/bin/sh\n";
        let group = "root:x:0:\nbuilders:x:210000:\n";
        let range: UidRange = "200000-200099".parse().unwrap();
        let error = range.check_against(passwd, group, &[]).unwrap_err();
        assert!(error.to_string().contains("the user ann"), "{error}");
        let range: UidRange = "209950-210049".parse().unwrap();
        let error = range.check_against(passwd, group, &[]).unwrap_err();
        assert!(error.to_string().contains("the group builders"), "{error}");
        let range: UidRange = "65500-65599".parse().unwrap();
        let reserved = [(65534, "Terraform's user nobody".to_string())];
        let error = range.check_against("", "", &reserved).unwrap_err();
        assert!(error.to_string().contains("Terraform's user"), "{error}");
        let range: UidRange = "300000-399999".parse().unwrap();
        assert!(range.check_against(passwd, group, &reserved).is_ok());
    }

    #[test]
    fn a_range_may_grow_but_never_leave_a_given_uid_out() {
        let range: UidRange = "200000-200199".parse().unwrap();
        assert!(range.check_keeps(&[200_000, 200_150]).is_ok());
        let error = range.check_keeps(&[200_000, 200_300, 200_301]).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("2 workspaces already have uids outside it"),
            "{error}"
        );
    }
}
