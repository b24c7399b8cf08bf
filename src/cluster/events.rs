//! Kubernetes Events on the ClusterVersion for blocks and overrides,
//! published from a background task so the webhook never waits on them.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;
use tracing::{Instrument, warn};

use crate::admission::EventNote;
use crate::metrics::{EffectKind, Metrics};

/// Queues Events; a full queue drops them and counts the drop.
#[derive(Clone)]
pub struct EventRecorder {
    queue: mpsc::Sender<(EventNote, ObjectReference)>,
    metrics: Metrics,
}

impl EventRecorder {
    /// Starts the publishing task.
    pub fn spawn(client: kube::Client, instance: Option<String>, metrics: Metrics) -> Self {
        let (queue, mut rx) = mpsc::channel::<(EventNote, ObjectReference)>(256);
        let recorder = Recorder::new(
            client,
            Reporter {
                controller: "preflight-gate".into(),
                instance,
            },
        );
        let failures = metrics.effects.clone();
        tokio::spawn(
            async move {
                while let Some((note, reference)) = rx.recv().await {
                    let text = truncate(crate::model::text::clean(&note.message, 900), 1000);
                    let event = Event {
                        type_: if note.warning {
                            EventType::Warning
                        } else {
                            EventType::Normal
                        },
                        reason: note.reason.to_owned(),
                        // The note quotes the requester's own words (an override
                        // reason): cleaned of control characters, and within
                        // the API's 1 KiB.
                        action: action(&text),
                        note: Some(text),
                        // One Event per target and per note: the recorder
                        // folds repeats of the same key into a series and
                        // keeps the first note, so the target (here) and
                        // the note (in the action) must be part of the key,
                        // or "bob accepted …" would be counted as a repeat
                        // of "alice accepted …" and read as hers.
                        secondary: note.related.as_ref().map(|name| ObjectReference {
                            api_version: Some("preflight.dev/v1alpha1".into()),
                            kind: Some("UpdatePreflight".into()),
                            name: Some(name.clone()),
                            ..Default::default()
                        }),
                    };
                    let publish = recorder.publish(&event, &reference);
                    match tokio::time::timeout(Duration::from_secs(10), publish).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => {
                            failures.failed(EffectKind::Event);
                            warn!(error = %e, reason = note.reason, "cannot publish Event");
                        }
                        Err(_) => {
                            failures.failed(EffectKind::Event);
                            warn!(reason = note.reason, "publishing an Event timed out");
                        }
                    }
                }
            }
            .instrument(tracing::info_span!("events")),
        );
        Self { queue, metrics }
    }

    /// Queues an Event about a ClusterVersion; never waits.
    pub(crate) fn publish(&self, note: EventNote, name: &str, uid: &str) {
        let reference = ObjectReference {
            api_version: Some("config.openshift.io/v1".into()),
            kind: Some("ClusterVersion".into()),
            name: Some(name.to_owned()),
            uid: (!uid.is_empty()).then(|| uid.to_owned()),
            ..Default::default()
        };
        if self.queue.try_send((note, reference)).is_err() {
            self.metrics.effects.failed(EffectKind::Event);
            warn!("Event queue full; Event dropped");
        }
    }
}

/// The Event's action: `Admission`, and a short digest of its note, so
/// that only the very same words are folded into one series.
fn action(note: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, note.as_bytes());
    let hex: String = digest.as_ref()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("Admission-{hex}")
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_words_share_an_action_and_so_a_series() {
        let alice = action("alice accepted failing preflight checks A for 4.15.3");
        let bob = action("bob accepted failing preflight checks A for 4.15.3");
        assert_ne!(alice, bob);
        assert_eq!(
            alice,
            action("alice accepted failing preflight checks A for 4.15.3")
        );
        assert!(alice.starts_with("Admission-") && alice.len() == "Admission-".len() + 8);
    }
}
