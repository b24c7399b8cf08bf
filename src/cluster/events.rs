//! Kubernetes Events on the ClusterVersion for blocks and overrides,
//! published from a background task so the webhook never waits on them,
//! and the record of a stored change, published once across replicas
//! ([`Ledger`]).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1 as events;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;
use tracing::{Instrument, warn};

use super::witness::{Claim, Ledger, Once};
use crate::admission::EventNote;
use crate::metrics::{EffectKind, Metrics};
use crate::model::annotations::REQUESTER;

/// Who publishes the gate's Events.
const CONTROLLER: &str = "preflight-gate";

/// Where the Events of cluster-scoped objects go.
const NAMESPACE: &str = "default";

/// How long publishing one Event may take.
const PUBLISH_WITHIN: Duration = Duration::from_secs(10);

/// Queues Events; a full queue drops them and counts the drop.
#[derive(Clone)]
pub struct EventRecorder {
    queue: mpsc::Sender<(EventNote, ObjectReference)>,
    client: kube::Client,
    instance: String,
    metrics: Metrics,
}

impl EventRecorder {
    /// Starts the publishing task.
    pub fn spawn(client: kube::Client, instance: Option<String>, metrics: Metrics) -> Self {
        let (queue, mut rx) = mpsc::channel::<(EventNote, ObjectReference)>(256);
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: CONTROLLER.into(),
                instance: instance.clone(),
            },
        );
        let failures = metrics.effects.clone();
        tokio::spawn(
            async move {
                while let Some((note, reference)) = rx.recv().await {
                    let text = note_text(&note);
                    let event = Event {
                        type_: if note.warning {
                            EventType::Warning
                        } else {
                            EventType::Normal
                        },
                        reason: note.reason.to_owned(),
                        action: action(&text),
                        note: Some(text),
                        // One Event per target and per note: the recorder
                        // folds repeats of the same key into a series and
                        // keeps the first note, so the target (here) and
                        // the note (in the action) must be part of the key,
                        // or "bob accepted …" would be counted as a repeat
                        // of "alice accepted …" and read as hers.
                        secondary: related(&note),
                    };
                    let publish = recorder.publish(&event, &reference);
                    match tokio::time::timeout(PUBLISH_WITHIN, publish).await {
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
        Self {
            queue,
            client,
            instance: instance.unwrap_or_else(|| CONTROLLER.to_owned()),
            metrics,
        }
    }

    /// Queues an Event about a ClusterVersion; never waits.
    pub(crate) fn publish(&self, note: EventNote, name: &str, uid: &str) {
        if self
            .queue
            .try_send((note, cluster_version(name, uid)))
            .is_err()
        {
            self.metrics.effects.failed(EffectKind::Event);
            warn!("Event queue full; Event dropped");
        }
    }

    /// The Event `once` asks for, under its name, with its requester.
    fn named_event(&self, once: &Once<'_>) -> events::Event {
        let note = once.note;
        let text = note_text(note);
        events::Event {
            metadata: ObjectMeta {
                name: Some(once.name.clone()),
                namespace: Some(NAMESPACE.into()),
                annotations: Some(BTreeMap::from([(
                    REQUESTER.to_owned(),
                    once.requester.to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(jiff::Timestamp::now())),
            action: Some(action(&text)),
            note: Some(text),
            reason: Some(note.reason.to_owned()),
            regarding: Some(cluster_version(once.regarding.0, once.regarding.1)),
            related: related(note),
            reporting_controller: Some(CONTROLLER.into()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(if note.warning { "Warning" } else { "Normal" }.into()),
            ..events::Event::default()
        }
    }

    async fn create_or_read(&self, once: &Once<'_>) -> kube::Result<Claim> {
        let api: Api<events::Event> = Api::namespaced(self.client.clone(), NAMESPACE);
        match api
            .create(&PostParams::default(), &self.named_event(once))
            .await
        {
            Ok(_) => Ok(Claim::First),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let theirs = api
                    .get(&once.name)
                    .await?
                    .metadata
                    .annotations
                    .and_then(|mut a| a.remove(REQUESTER))
                    .unwrap_or_default();
                Ok(if theirs == once.requester {
                    Claim::Same
                } else {
                    Claim::Other(theirs)
                })
            }
            Err(e) => Err(e),
        }
    }
}

impl Ledger for EventRecorder {
    fn publish_once<'a>(&'a self, once: Once<'a>) -> BoxFuture<'a, Result<Claim, String>> {
        Box::pin(async move {
            self.metrics.effects.asked_for(EffectKind::Event);
            let outcome =
                match tokio::time::timeout(PUBLISH_WITHIN, self.create_or_read(&once)).await {
                    Ok(Ok(claim)) => return Ok(claim),
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => "timed out".to_owned(),
                };
            self.metrics.effects.failed(EffectKind::Event);
            Err(outcome)
        })
    }
}

/// The ClusterVersion an Event is about.
fn cluster_version(name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("config.openshift.io/v1".into()),
        kind: Some("ClusterVersion".into()),
        name: Some(name.to_owned()),
        uid: (!uid.is_empty()).then(|| uid.to_owned()),
        ..Default::default()
    }
}

/// The note quotes the requester's own words (an override reason): cleaned
/// of control characters, and within the API's 1 KiB.
fn note_text(note: &EventNote) -> String {
    truncate(crate::model::text::clean(&note.message, 900), 1000)
}

/// The target's UpdatePreflight, when the note is about one.
fn related(note: &EventNote) -> Option<ObjectReference> {
    note.related.as_ref().map(|name| ObjectReference {
        api_version: Some("preflight.dev/v1alpha1".into()),
        kind: Some("UpdatePreflight".into()),
        name: Some(name.clone()),
        ..Default::default()
    })
}

/// The Event's action: `Admission`, and a short digest of its note, so
/// that only the very same words are folded into one series.
fn action(note: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, note.as_bytes());
    format!(
        "Admission-{}",
        crate::model::text::hex(&digest.as_ref()[..4])
    )
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
