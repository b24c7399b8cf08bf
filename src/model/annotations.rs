//! Every `preflight.dev/` annotation key the gate reads or writes, in one
//! place. The keys are a wire contract: administrators write them with
//! `oc annotate`, the denial's commands spell them, release manifests carry
//! them, and other replicas and older gates read them back. Kept together,
//! the whole contract reads in one screen, and no module can spell a key
//! its own way. (Labels stay beside the selectors that use them.)

// Claims on the ClusterVersion: an administrator's, each write of one
// recorded with its writer in `CLAIMED_BY`.

/// The prefix of every annotation the gate reads as a claim.
pub const PREFIX: &str = "preflight.dev/";
/// Every claim at once, as a message names them.
pub const PREFIX_ANY: &str = "preflight.dev/*";
/// Forces the gate for the target it names, whatever the results say.
pub const OVERRIDE: &str = "preflight.dev/override";
/// Why the target is forced: required, and recorded in the audit and the
/// Event.
pub const OVERRIDE_REASON: &str = "preflight.dev/override-reason";
/// When the override stops counting: an RFC 3339 time, required.
pub const OVERRIDE_UNTIL: &str = "preflight.dev/override-until";
/// Check names (and names OpenShift gives risks) accepted for one target,
/// comma-separated.
pub const ACCEPT: &str = "preflight.dev/accept";
/// The target an accept claim is for, as an override names its own.
pub const ACCEPT_FOR: &str = "preflight.dev/accept-for";
/// When the accept stops counting: an RFC 3339 time, required.
pub const ACCEPT_UNTIL: &str = "preflight.dev/accept-until";
/// Why the checks in [`ACCEPT`] are accepted: required, as an override's
/// reason is, and recorded in the audit and the Event.
pub const ACCEPT_REASON: &str = "preflight.dev/accept-reason";
/// What the checks in [`ACCEPT`] found when it was written, as a JSON
/// object of check name to findings: the accept counts for a result only
/// while it finds nothing more. The denial's command carries it.
pub const ACCEPT_FINDINGS: &str = "preflight.dev/accept-findings";
/// Who wrote the claims beside it. Every write that adds or changes a
/// `preflight.dev/` annotation must set it to the writer's own name, so it
/// always names whoever last wrote a claim.
pub const CLAIMED_BY: &str = "preflight.dev/claimed-by";
/// Under the four-eyes rule, the ClusterVersion's `metadata.generation` its
/// approver saw when writing the claims beside it. The API server bumps the
/// generation on every change of the spec, so a claim counts for one change
/// of the target at most: the first one made from the spec it approved.
pub const CLAIMED_GENERATION: &str = "preflight.dev/claimed-generation";
/// The end of the maintenance window an update must fit in: an RFC 3339
/// time. A claim, so writing it needs the `override` (or `window`) verb and
/// [`CLAIMED_BY`].
pub const WINDOW_END: &str = "preflight.dev/window-end";

// On objects the gate reads or writes itself.

/// On an `UpdatePreflight`: stamped to ask for a new run.
pub const REQUESTED_AT: &str = "preflight.dev/requested-at";
/// On a record's Event: the requester the replica that published it was
/// told of.
pub const REQUESTER: &str = "preflight.dev/requester";
/// On a check's Job: the name of its `UpdatePreflight` (names may be
/// longer than a label value).
pub const UPDATE_PREFLIGHT: &str = "preflight.dev/update-preflight";

// On a Job manifest a release declares as a check.

/// The declared check's result name.
pub const CHECK_NAME: &str = "preflight.dev/check-name";
/// The declared check's severity.
pub const SEVERITY: &str = "preflight.dev/severity";
/// The declared check's failure policy.
pub const FAILURE_POLICY: &str = "preflight.dev/failure-policy";
/// The declared check's pod gets an API token only when annotated so.
pub const NEEDS_API: &str = "preflight.dev/needs-api";
