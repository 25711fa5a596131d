//! Builds no provisioner can take: a queued job whose version needs tags
//! that no connected provisioner (a server's embedded worker or an external
//! daemon's slot) offers says so within seconds, in its log and on the
//! build (`Build::waiting`, which `abode show` and the dashboard print),
//! naming the tags and the provisioners that are connected with theirs. It
//! keeps waiting and goes ahead by itself when one that offers them
//! connects (the claim needs nothing from here); the note is then cleared.
//!
//! Every server looks every second; the job's `unserved` column makes one
//! of them write each new note (`Store::note_unserved`). A push of a
//! version whose tags no connected provisioner offers is warned the same
//! way ([`Host::unserved_warning`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use abode_runner::{LogLevel, LogStage};
use abode_store::ProvisionerKind;
use tokio::sync::watch;

use crate::room::Host;

/// How long a job is queued before it may be told unserved: a provisioner
/// that just connected has beaten by then.
const UNSERVED_AFTER: Duration = Duration::from_secs(2);

/// How often a server looks.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Connected provisioners of one host, kind and tag set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Offer {
    pub host: String,
    pub kind: ProvisionerKind,
    /// `key=value`, sorted.
    pub tags: BTreeSet<String>,
    pub count: i64,
}

/// Why a job needing `tags` cannot be taken by any of `offers`; `None`
/// when one of them offers every tag.
pub(crate) fn unserved_note(tags: &[String], offers: &[Offer]) -> Option<String> {
    if offers
        .iter()
        .any(|offer| tags.iter().all(|tag| offer.tags.contains(tag)))
    {
        return None;
    }
    let needs = if tags.is_empty() {
        "none".to_string()
    } else {
        tags.join(", ")
    };
    let connected = if offers.is_empty() {
        "no provisioner is connected (embedded in a server or an external daemon)".to_string()
    } else {
        let each: Vec<String> = offers.iter().map(describe).collect();
        format!("connected: {}", each.join("; "))
    };
    Some(format!(
        "no provisioner matches the tags ({needs}); {connected}; the build waits and starts \
         by itself when one that offers them connects (`abode provisioner list`)"
    ))
}

fn describe(offer: &Offer) -> String {
    let (what, plural) = match offer.kind {
        ProvisionerKind::Embedded => ("embedded", "embedded"),
        ProvisionerKind::External => ("external slot", "external slots"),
    };
    let tags = if offer.tags.is_empty() {
        "no tags".to_string()
    } else {
        offer.tags.iter().cloned().collect::<Vec<_>>().join(", ")
    };
    let what = if offer.count == 1 { what } else { plural };
    format!("{} {what} on host {} ({tags})", offer.count, offer.host)
}

impl Host {
    /// The provisioners connected now (heard from within a job lease).
    async fn offers(&self) -> Result<Vec<Offer>, String> {
        let lease_ms = i64::try_from(self.inner.config.job_lease.as_millis()).unwrap_or(i64::MAX);
        let groups = self
            .inner
            .store
            .live_provisioner_groups(self.now_ms().saturating_sub(lease_ms))
            .await
            .map_err(|error| error.to_string())?;
        groups
            .into_iter()
            .map(|(host, kind, tags, count)| {
                let tags = abode_control::tags::tags_of_json(&tags)?
                    .into_iter()
                    .map(|(key, value)| format!("{key}={value}"))
                    .collect();
                Ok(Offer {
                    host,
                    kind,
                    tags,
                    count,
                })
            })
            .collect()
    }

    /// What `abode templates push` warns of: why no connected provisioner
    /// would take a build of a version needing `tags` (`None`: one would,
    /// or the provisioners cannot be read now).
    pub async fn unserved_warning(&self, tags: &[String]) -> Option<String> {
        match self.offers().await {
            Ok(offers) => unserved_note(tags, &offers),
            Err(error) => {
                tracing::warn!(%error, "cannot read the connected provisioners");
                None
            }
        }
    }

    /// One look: notes (and logs, once) why each job queued for a while
    /// waits, and clears the note of one that some provisioner now serves.
    async fn tell_unserved_jobs(&self) {
        let queued_before = self
            .now_ms()
            .saturating_sub(i64::try_from(UNSERVED_AFTER.as_millis()).unwrap_or(i64::MAX));
        let (candidates, offers) = match (
            self.inner.store.unserved_candidates(queued_before).await,
            self.offers().await,
        ) {
            (Ok(candidates), Ok(offers)) => (candidates, offers),
            (Err(error), _) => {
                tracing::error!(%error, "cannot read the queued jobs' tags");
                return;
            }
            (_, Err(error)) => {
                tracing::error!(%error, "cannot read the connected provisioners");
                return;
            }
        };
        let mut jobs: BTreeMap<String, (Vec<String>, Option<String>)> = BTreeMap::new();
        for (build_id, tag, noted) in candidates {
            let job = jobs.entry(build_id).or_default();
            job.0.extend(tag);
            job.1 = noted;
        }
        for (build_id, (tags, noted)) in jobs {
            let note = unserved_note(&tags, &offers);
            if note == noted {
                continue;
            }
            match self
                .inner
                .store
                .note_unserved(&build_id, note.as_deref())
                .await
            {
                Ok(true) => {}
                Ok(false) => continue,
                Err(error) => {
                    tracing::error!(build = %build_id, %error, "cannot note why a build waits");
                    continue;
                }
            }
            if let Some(note) = note {
                self.build_log()
                    .note(
                        &build_id,
                        &LogStage::SETUP,
                        LogLevel::Warn,
                        &format!("waiting: {note}"),
                    )
                    .await;
                self.build_log().written();
            }
        }
    }
}

/// Looks every second until `shutdown` turns true.
pub(crate) async fn watcher(host: Host, mut shutdown: watch::Receiver<bool>) {
    loop {
        if *shutdown.borrow() {
            return;
        }
        host.tell_unserved_jobs().await;
        tokio::select! {
            _ = tokio::time::sleep(LOOK_EVERY) => {}
            _ = shutdown.changed() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(kind: ProvisionerKind, tags: &[&str], count: i64) -> Offer {
        Offer {
            host: "h1".into(),
            kind,
            tags: tags.iter().map(|tag| tag.to_string()).collect(),
            count,
        }
    }

    #[test]
    fn a_job_is_unserved_when_no_offer_covers_its_tags() {
        let tags = vec!["cloud=none".to_string()];
        let offers = [
            offer(ProvisionerKind::Embedded, &[], 4),
            offer(ProvisionerKind::External, &["cloud=a", "zone=b"], 1),
        ];
        let note = unserved_note(&tags, &offers).unwrap_or_default();
        assert!(
            note.starts_with("no provisioner matches the tags (cloud=none); connected: 4 embedded on host h1 (no tags); 1 external slot on host h1 (cloud=a, zone=b);"),
            "{note}"
        );
        assert_eq!(
            unserved_note(&["cloud=a".into()], &offers),
            None,
            "a superset serves"
        );
        assert_eq!(unserved_note(&[], &offers), None);
        let none = unserved_note(&[], &[]).unwrap_or_default();
        assert!(none.contains("no provisioner is connected"), "{none}");
    }
}
