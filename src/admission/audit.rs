//! The keys of the audit annotations a verdict carries. The API server
//! writes them into its audit log under the webhook's name
//! (`clusterversions.preflight.dev/override-by`), where an administrator
//! reads who did what; the gate's own log and Events read the same keys.

/// The target a request asked for, as a person names it.
pub const TARGET: &str = "target";
/// Who wrote override or accept claims (the annotations), and which.
pub const CLAIMS_WRITTEN_BY: &str = "claims-written-by";
pub const CLAIMS: &str = "claims";
/// Who wrote the claim a target change used (`preflight.dev/claimed-by`).
pub const CLAIMED_BY: &str = "claimed-by";
/// The claim's writer when another person changed the target with it:
/// under four eyes (`--require-distinct-approver`), its approver.
pub const APPROVED_BY: &str = "approved-by";
/// Who changed the target past the gate's verdict, why, and past which
/// checks (`*`: all of them, a force override).
pub const OVERRIDE_BY: &str = "override-by";
pub const OVERRIDE_REASON: &str = "override-reason";
pub const OVERRIDDEN_CHECKS: &str = "overridden-checks";
/// The pullspec HyperShift's `force-upgrade-to` names, when a write sets it.
pub const FORCE_UPGRADE_TO: &str = "force-upgrade-to";
/// Who changed what the cluster trusts (`spec.upstream`, `signatureStores`,
/// `overrides`, `capabilities`), and which of them.
pub const TRUST_CHANGED_BY: &str = "trust-changed-by";
pub const TRUST_CHANGED: &str = "trust-changed";
