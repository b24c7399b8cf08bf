//! How each result stands for an update (the one blocking rule), given the
//! [`Exemptions`]: the names accepted for it and the checks whose errors
//! fail open. The
//! status a run writes, the `check` report, the metrics and the webhook's
//! verdict all read [`Exemptions::standing`], so they cannot disagree. A name
//! accepts a result when it is the check's, or when the names OpenShift
//! gives what the result is about are all accepted ([`super::risks`]).
//! An accept that recorded what it saw ([`BoundAccept`]) accepts a result
//! only while the result finds nothing more.

use std::collections::{BTreeMap, BTreeSet};

use super::results::{CheckResult, FailurePolicy, Outcome, Severity, Summary};
use super::risks;
use super::window::MAINTENANCE_WINDOW;

/// The built-in check for admin gates without their ack.
pub const ADMIN_ACKS_MISSING: &str = "AdminAcksMissing";

/// Whether any name may accept `result`. A missing admin ack may not: the
/// CVO holds a minor update until the ack is in `openshift-config/admin-acks`,
/// whatever `acceptRisks` says, so accepting it at the gate would only let
/// through an update the CVO then refuses. Neither the check's name nor
/// any OpenShift name it carries (`AdminAck-<gate>`, `ConditionalUpdateRisk`)
/// accepts it; its finding says how to give the ack.
/// Nor may any name accept a maintenance window the update does not fit
/// ([`MAINTENANCE_WINDOW`]), nor a target the cluster cannot resolve to a
/// release image ([`risks::UNRESOLVABLE_TARGET`]), which the CVO refuses
/// itself.
pub fn acceptable(result: &CheckResult) -> bool {
    result.name != ADMIN_ACKS_MISSING
        && result.name != MAINTENANCE_WINDOW
        && !result
            .risks
            .iter()
            .any(|r| risks::is_admin_ack(r) || r == risks::UNRESOLVABLE_TARGET)
}

/// What, besides a result itself, keeps a failure from blocking: the
/// checks whose errors fail open and the names accepted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exemptions {
    /// Checks whose errors do not block (`--fail-open-checks`), besides
    /// those whose own `failurePolicy` is `FailOpen`.
    pub fail_open: BTreeSet<String>,
    /// Names accepted for this update (`acceptRisks`, `check --accept`):
    /// checks' names and the names OpenShift gives risks.
    pub accepted: BTreeSet<String>,
    /// Names accepted by a claim bound to the findings it was written
    /// against (`preflight.dev/accept`).
    pub bound: BoundAccept,
}

/// Accepted names bound to what their writer saw: a result they accept
/// counts as accepted only while each of its findings is one the claim
/// recorded for its check, so an accept written when one node failed asks
/// again when a second one does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BoundAccept {
    /// Checks' names and the names OpenShift gives risks, as in
    /// [`Exemptions::accepted`].
    pub names: BTreeSet<String>,
    /// For each check the claim was written against, its findings then
    /// ([`CheckResult::findings`]).
    pub findings: BTreeMap<String, BTreeSet<String>>,
}

impl BoundAccept {
    /// What `result` finds beyond what the claim recorded for its check;
    /// `None` when the claim recorded nothing for it.
    pub fn unseen<'r>(&self, result: &'r CheckResult) -> Option<Vec<&'r str>> {
        let seen = self.findings.get(&result.name)?;
        Some(
            result
                .findings()
                .into_iter()
                .filter(|f| !seen.contains(*f))
                .collect(),
        )
    }

    /// Whether the claim was written against `result` as it is now.
    fn saw(&self, result: &CheckResult) -> bool {
        self.unseen(result).is_some_and(|unseen| unseen.is_empty())
    }
}

/// How one result counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    Passed,
    Skipped,
    /// A failure (or error) that only warns: a Warning check's, or an error
    /// that fails open.
    Warns,
    /// A blocking failure that is accepted.
    Accepted,
    /// A blocking failure: the update waits for it.
    Blocks,
}

/// Results sorted by how they count, in their order.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Assessment<'a> {
    pub blocking: Vec<&'a CheckResult>,
    pub accepted: Vec<&'a CheckResult>,
    pub warnings: Vec<&'a CheckResult>,
}

impl Exemptions {
    /// The policy with only these fail-open checks and nothing accepted: how
    /// a run's status counts its results.
    pub fn fail_open(names: impl IntoIterator<Item = String>) -> Self {
        Self {
            fail_open: names.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Whether an error of `result` fails open.
    pub(crate) fn fails_open(&self, result: &CheckResult) -> bool {
        result.failure_policy == Some(FailurePolicy::FailOpen)
            || self.fail_open.contains(&result.name)
    }

    /// How `result` counts.
    pub(crate) fn standing(&self, result: &CheckResult) -> Standing {
        let fails = match result.outcome {
            Outcome::Pass => return Standing::Passed,
            Outcome::Skipped => return Standing::Skipped,
            Outcome::Fail => true,
            Outcome::Error => !self.fails_open(result),
        };
        if !fails || result.severity == Severity::Warning {
            Standing::Warns
        } else if self.accepts(result) {
            Standing::Accepted
        } else {
            Standing::Blocks
        }
    }

    /// Whether the accepted names accept `result`: its check's name, or
    /// every OpenShift name it carries (or oc's name for the whole concern);
    /// the bound claim's names only while it saw what `result` finds.
    fn accepts(&self, result: &CheckResult) -> bool {
        acceptable(result)
            && (names_accept(&self.accepted, result)
                || (names_accept(&self.bound.names, result) && self.bound.saw(result)))
    }

    /// The blocking results the bound claim's names would accept but for
    /// what they find beyond what it recorded, with those findings (`None`
    /// when it recorded nothing for the check).
    pub(crate) fn outgrown<'r>(
        &self,
        results: &'r [CheckResult],
    ) -> Vec<(&'r CheckResult, Option<Vec<&'r str>>)> {
        results
            .iter()
            .filter(|r| self.standing(r) == Standing::Blocks)
            .filter(|r| acceptable(r) && names_accept(&self.bound.names, r))
            .map(|r| (r, self.bound.unseen(r)))
            .collect()
    }

    /// The accepted names that name nothing here: no check of `results`,
    /// no name one of them carries, and no name OpenShift is known to use.
    pub fn names_nothing(&self, results: &[CheckResult]) -> Vec<String> {
        self.accepted
            .union(&self.bound.names)
            .filter(|name| !known(name, results))
            .cloned()
            .collect()
    }

    /// `results` sorted by standing.
    pub(crate) fn assess<'a>(&self, results: &'a [CheckResult]) -> Assessment<'a> {
        let mut a = Assessment::default();
        for r in results {
            match self.standing(r) {
                Standing::Passed | Standing::Skipped => {}
                Standing::Warns => a.warnings.push(r),
                Standing::Accepted => a.accepted.push(r),
                Standing::Blocks => a.blocking.push(r),
            }
        }
        a
    }

    /// Counts over `results`: `failing` is what blocks; an accepted or
    /// fail-open failure counts as a warning; every error counts as errored.
    pub(crate) fn summarize(&self, results: &[CheckResult]) -> Summary {
        let standings: Vec<Standing> = results.iter().map(|r| self.standing(r)).collect();
        summary(results, &standings)
    }

    /// `results` as a run records them: each result of a fail-open check
    /// says so itself, so that whoever reads the status later (the webhook,
    /// the metrics, `oc get`) counts it the same way.
    pub fn stamp(&self, results: &mut [CheckResult]) {
        for r in results {
            if r.failure_policy.is_none() && self.fail_open.contains(&r.name) {
                r.failure_policy = Some(FailurePolicy::FailOpen);
            }
        }
    }
}

/// Whether `names` accept `result`: its check's name, or every OpenShift
/// name it carries.
fn names_accept(names: &BTreeSet<String>, result: &CheckResult) -> bool {
    names.contains(&result.name) || risks::all_accepted(&result.risks, names)
}

/// Whether `name` is a check of `results`, a name one of them carries, or
/// a name OpenShift is known to use.
pub fn known(name: &str, results: &[CheckResult]) -> bool {
    risks::well_known(name)
        || results
            .iter()
            .any(|r| r.name == name || r.risks.iter().any(|risk| risk == name))
}

/// Kinds of honoured override, as a metric label: what let a blocked update
/// through. Its metric counts every kind from zero ([`strum::EnumIter`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::EnumIter, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum OverrideKind {
    /// The `preflight.dev/override` annotation forced the target through.
    Force,
    /// `spec.desiredUpdate.force: true`, with `--honor-desired-update-force`.
    DesiredUpdateForce,
    /// Every failing check was accepted (`preflight.dev/accept`, `acceptRisks`).
    AcceptRisks,
}

impl OverrideKind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The annotation that carries the override's claim, which four eyes
    /// hold to `preflight.dev/claimed-by`; `None` where the spec carries
    /// it and nothing records who wrote it, so four eyes refuse it.
    pub fn claimed_in(self) -> Option<&'static str> {
        match self {
            Self::Force => Some(super::annotations::OVERRIDE),
            Self::AcceptRisks => Some(super::annotations::ACCEPT),
            Self::DesiredUpdateForce => None,
        }
    }
}

/// The counts of `results`, each counted by its standing in `standings`.
pub(crate) fn summary(results: &[CheckResult], standings: &[Standing]) -> Summary {
    let mut s = Summary::default();
    for (r, standing) in results.iter().zip(standings) {
        match (*standing, r.outcome) {
            (Standing::Passed, _) => s.passed += 1,
            (Standing::Skipped, _) => s.skipped += 1,
            (_, Outcome::Error) => s.errored += 1,
            (Standing::Blocks, _) => {}
            (Standing::Warns | Standing::Accepted, _) => s.warnings += 1,
        }
        if *standing == Standing::Blocks {
            s.failing += 1;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn result(name: &str, outcome: Outcome, severity: Severity) -> CheckResult {
        CheckResult::new(name, severity, outcome, "")
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[rstest]
    #[case::pass(Outcome::Pass, Severity::Blocking, &[], &[], Standing::Passed)]
    #[case::skipped(Outcome::Skipped, Severity::Blocking, &[], &[], Standing::Skipped)]
    #[case::fail(Outcome::Fail, Severity::Blocking, &[], &[], Standing::Blocks)]
    #[case::warning(Outcome::Fail, Severity::Warning, &[], &[], Standing::Warns)]
    #[case::accepted(Outcome::Fail, Severity::Blocking, &["A"], &[], Standing::Accepted)]
    #[case::accepted_warning(Outcome::Fail, Severity::Warning, &["A"], &[], Standing::Warns)]
    #[case::error(Outcome::Error, Severity::Blocking, &[], &[], Standing::Blocks)]
    #[case::error_fails_open(Outcome::Error, Severity::Blocking, &[], &["A"], Standing::Warns)]
    #[case::fail_open_is_for_errors(Outcome::Fail, Severity::Blocking, &[], &["A"], Standing::Blocks)]
    #[case::error_accepted(Outcome::Error, Severity::Blocking, &["A"], &[], Standing::Accepted)]
    fn standing(
        #[case] outcome: Outcome,
        #[case] severity: Severity,
        #[case] accepted: &[&str],
        #[case] fail_open: &[&str],
        #[case] expected: Standing,
    ) {
        let exemptions = Exemptions {
            fail_open: names(fail_open),
            accepted: names(accepted),
            ..Exemptions::default()
        };
        assert_eq!(
            exemptions.standing(&result("A", outcome, severity)),
            expected
        );
    }

    fn carrying(risks: &[&str]) -> CheckResult {
        let mut r = result("Check", Outcome::Fail, Severity::Blocking);
        r.risks = risks.iter().map(|s| s.to_string()).collect();
        r
    }

    #[rstest]
    #[case::by_the_checks_name(&["PodDisruptionBudgetAtLimit"], &["Check"], Standing::Accepted)]
    #[case::by_the_one_name_it_carries(&["PodDisruptionBudgetAtLimit"], &["PodDisruptionBudgetAtLimit"], Standing::Accepted)]
    #[case::by_every_name_it_carries(&["KubeNodeNotReady", "etcdNoLeader"], &["etcdNoLeader", "KubeNodeNotReady"], Standing::Accepted)]
    #[case::not_by_some_of_them(&["KubeNodeNotReady", "etcdNoLeader"], &["etcdNoLeader"], Standing::Blocks)]
    #[case::by_ocs_name_for_the_whole(&["ConditionalUpdateRisk", "RiskA"], &["ConditionalUpdateRisk"], Standing::Accepted)]
    #[case::nothing_carried_nothing_accepted(&[], &["PodDisruptionBudgetAtLimit"], Standing::Blocks)]
    #[case::another_name(&["Failing"], &["ClusterOperatorDown"], Standing::Blocks)]
    fn a_blocking_failure_is_accepted_by_its_checks_name_or_every_name_it_carries(
        #[case] risks: &[&str],
        #[case] accepted: &[&str],
        #[case] expected: Standing,
    ) {
        let exemptions = Exemptions {
            accepted: names(accepted),
            ..Exemptions::default()
        };
        assert_eq!(exemptions.standing(&carrying(risks)), expected);
    }

    #[rstest]
    #[case::by_the_checks_name("AdminAcksMissing", &["AdminAck-ack-4.12-kube-1.26-api-removals-in-4.13"], &["AdminAcksMissing"])]
    #[case::by_the_cvos_name("AdminAcksMissing", &["AdminAck-ack-4.12-kube-1.26-api-removals-in-4.13"], &["AdminAck-ack-4.12-kube-1.26-api-removals-in-4.13"])]
    #[case::by_ocs_name_for_the_whole("AdminAcksMissing", &["ConditionalUpdateRisk", "AdminAck-ack-4.12-kube-1.26-api-removals-in-4.13"], &["ConditionalUpdateRisk"])]
    #[case::the_cvos_condition_alone("AdminAcksMissing", &["ConditionalUpdateRisk"], &["ConditionalUpdateRisk", "AdminAcksMissing"])]
    #[case::another_check_carrying_an_ack("SomeJob", &["AdminAck-ack-4.15-x"], &["SomeJob", "AdminAck-ack-4.15-x"])]
    fn an_admin_ack_is_never_accepted(
        #[case] check: &str,
        #[case] risks: &[&str],
        #[case] accepted: &[&str],
    ) {
        let mut r = carrying(risks);
        r.name = check.to_owned();
        let exemptions = Exemptions {
            accepted: names(accepted),
            ..Exemptions::default()
        };
        assert!(!acceptable(&r));
        assert_eq!(exemptions.standing(&r), Standing::Blocks);
        // The same names accept any other check's failure.
        let mut other = r.clone();
        other.name = "Check".to_owned();
        other.risks.retain(|n| !risks::is_admin_ack(n));
        let exemptions = Exemptions {
            accepted: names(&[accepted, &["Check"]].concat()),
            ..exemptions
        };
        assert_eq!(exemptions.standing(&other), Standing::Accepted);
    }

    /// Trust, third pass, L3.
    #[test]
    fn a_bound_accept_counts_only_while_the_result_finds_nothing_new() {
        let mut r = carrying(&["KubeNodeNotReady"]);
        r.subjects = names(&["worker-1 NotReady"]).into_iter().collect();
        let bound = |findings: &[&str]| Exemptions {
            bound: BoundAccept {
                names: names(&["Check"]),
                findings: [("Check".to_owned(), names(findings))].into(),
            },
            ..Exemptions::default()
        };
        let saw_it = bound(&["KubeNodeNotReady", "worker-1 NotReady"]);
        assert_eq!(saw_it.standing(&r), Standing::Accepted);
        assert!(saw_it.outgrown(std::slice::from_ref(&r)).is_empty());

        r.subjects.push("worker-3 NotReady".to_owned());
        assert_eq!(saw_it.standing(&r), Standing::Blocks);
        let outgrown = saw_it.outgrown(std::slice::from_ref(&r));
        assert_eq!(outgrown[0].1, Some(vec!["worker-3 NotReady"]));

        // Recorded for another check only: not written against this one.
        let exemptions_elsewhere = Exemptions {
            bound: BoundAccept {
                names: names(&["Check"]),
                findings: [("Other".to_owned(), BTreeSet::new())].into(),
            },
            ..Exemptions::default()
        };
        assert_eq!(exemptions_elsewhere.standing(&r), Standing::Blocks);
        assert_eq!(
            exemptions_elsewhere.outgrown(std::slice::from_ref(&r))[0].1,
            None
        );

        // The same name unbound (acceptRisks, --accept) accepts it whatever it finds.
        let exemptions_unbound = Exemptions {
            accepted: names(&["Check"]),
            ..Exemptions::default()
        };
        assert_eq!(exemptions_unbound.standing(&r), Standing::Accepted);
    }

    #[test]
    fn a_maintenance_window_is_never_accepted() {
        let r = result(MAINTENANCE_WINDOW, Outcome::Fail, Severity::Blocking);
        let exemptions = Exemptions {
            fail_open: BTreeSet::new(),
            accepted: names(&[MAINTENANCE_WINDOW]),
            ..Exemptions::default()
        };
        assert!(!acceptable(&r));
        assert_eq!(exemptions.standing(&r), Standing::Blocks);
    }

    #[test]
    fn a_carried_name_accepts_a_failure_but_never_passes_a_warning_or_a_pass() {
        let exemptions = Exemptions {
            fail_open: BTreeSet::new(),
            accepted: names(&["Failing"]),
            ..Exemptions::default()
        };
        let mut warning = carrying(&["Failing"]);
        warning.severity = Severity::Warning;
        assert_eq!(exemptions.standing(&warning), Standing::Warns);
        let mut passed = carrying(&["Failing"]);
        passed.outcome = Outcome::Pass;
        assert_eq!(exemptions.standing(&passed), Standing::Passed);
    }

    #[test]
    fn names_carried_checks_and_openshifts_own_are_known() {
        let results = [carrying(&["etcdNoLeader"])];
        let exemptions = Exemptions {
            fail_open: BTreeSet::new(),
            accepted: names(&[
                "Check",
                "etcdNoLeader",
                "PodDisruptionBudgetAtLimit",
                "ClusterOperatorUpgradeable-dns",
                "NoSuchName",
            ]),
            ..Exemptions::default()
        };
        assert_eq!(exemptions.names_nothing(&results), ["NoSuchName"]);
    }

    #[test]
    fn a_results_own_fail_open_policy_counts_like_the_flag() {
        let mut r = result("A", Outcome::Error, Severity::Blocking);
        r.failure_policy = Some(FailurePolicy::FailOpen);
        assert_eq!(Exemptions::default().standing(&r), Standing::Warns);
    }

    #[test]
    fn the_summary_counts_what_blocks_and_every_error() {
        let results = [
            result("Passes", Outcome::Pass, Severity::Blocking),
            result("Fails", Outcome::Fail, Severity::Blocking),
            result("Errs", Outcome::Error, Severity::Blocking),
            result("ErrsOpen", Outcome::Error, Severity::Blocking),
            result("Warns", Outcome::Fail, Severity::Warning),
            result("Accepted", Outcome::Fail, Severity::Blocking),
            result("Skips", Outcome::Skipped, Severity::Blocking),
        ];
        let exemptions = Exemptions {
            fail_open: names(&["ErrsOpen"]),
            accepted: names(&["Accepted"]),
            ..Exemptions::default()
        };
        let s = exemptions.summarize(&results);
        assert_eq!(
            (s.passed, s.failing, s.warnings, s.errored, s.skipped),
            (1, 2, 2, 2, 1)
        );
        let blocking: Vec<&str> = exemptions
            .assess(&results)
            .blocking
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(blocking, ["Fails", "Errs"]);
    }

    #[test]
    fn a_stamped_result_keeps_failing_open_for_every_later_reader() {
        let mut results = [
            result("Open", Outcome::Error, Severity::Blocking),
            result("Closed", Outcome::Error, Severity::Blocking),
        ];
        Exemptions::fail_open(["Open".to_owned()]).stamp(&mut results);
        let later = Exemptions::default().assess(&results);
        assert_eq!(later.blocking.len(), 1);
        assert_eq!(later.blocking[0].name, "Closed");
        assert_eq!(later.warnings[0].name, "Open");
    }
}
