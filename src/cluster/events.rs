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
                        note: Some(truncate(
                            crate::model::text::clean(&note.message, 900),
                            1000,
                        )),
                        action: "Admission".into(),
                        // One Event per target: the recorder folds repeats
                        // of the same key into a series and keeps the first
                        // note, so the target must be part of the key.
                        secondary: Some(ObjectReference {
                            api_version: Some("preflight.dev/v1alpha1".into()),
                            kind: Some("UpdatePreflight".into()),
                            name: Some(note.related.clone()),
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
