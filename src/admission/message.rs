//! Messages for a person at a terminal. `oc` prints a denial as
//! `admission webhook "..." denied the request: <message>`, so the first line
//! is short and the details follow.

use std::fmt::Write;
use std::time::Duration;

use crate::model::cluster_version::Target;
use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;

use crate::model::results::{PlanSummary, check_name, duration_words, shown_check_name};
use crate::model::text::at;
pub use crate::model::text::clean;
use crate::model::text::{is_format, shell_json, shell_list, shell_word};
use crate::model::window::{WINDOW_END, WindowFit};

use crate::model::annotations::{
    ACCEPT, ACCEPT_FINDINGS, ACCEPT_FOR, ACCEPT_REASON, ACCEPT_UNTIL, CLAIMED_BY,
    CLAIMED_GENERATION, OVERRIDE, OVERRIDE_REASON, OVERRIDE_UNTIL, PREFIX_ANY,
};
use crate::model::hosted::FORCE_UPGRADE_TO;
use crate::model::{CheckResult, Outcome, UpdatePreflight};

/// How many failures a denial lists before "and N more".
pub(crate) const MAX_LISTED: usize = 5;

/// The longest line, in characters, that text from the cluster or a check
/// may take in an answer.
pub(crate) const MAX_LINE: usize = 240;

/// The longest denial, in bytes: `oc` prints it whole, at a terminal.
pub(crate) const MAX_DENIAL: usize = 4096;

/// The longest warning, in characters: one check's line with its prefix.
pub(crate) const MAX_WARNING: usize = 640;

/// A whole answer, bounded: each line stripped of control characters and
/// format characters (bidi overrides, zero-width ones), and past
/// [`MAX_DENIAL`] bytes the remaining lines cut, saying how many.
pub(crate) fn bounded(message: &str) -> String {
    let lines: Vec<String> = message
        .lines()
        .map(|l| {
            l.chars()
                .filter(|c| !is_format(*c))
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect()
        })
        .collect();
    let mut out = String::with_capacity(message.len().min(MAX_DENIAL));
    for (i, line) in lines.iter().enumerate() {
        // Room for this line, its break, and the note that would follow.
        if out.len() + line.len() + 1 > MAX_DENIAL - 80 {
            let _ = write!(
                out,
                "\n… {} more lines cut; the full report has everything",
                lines.len() - i
            );
            break;
        }
        if i > 0 {
            out.push('\n');
        }
        out.push_str(line);
    }
    out
}

/// A warning for accepted names that name no check of the result, no name
/// its results carry, and none OpenShift is known to use.
pub(crate) fn unknown_accepts(names: &[String]) -> String {
    let names: Vec<String> = names.iter().map(|n| clean(n, 80)).collect();
    let one = names.len() == 1;
    format!(
        "preflight-gate: the accepted name{} {} name{} no preflight check or risk of this release and accept{} nothing at the gate (it accepts check names and the OpenShift risk names the results carry; a risk name may still count for the cluster-version operator)",
        if one { "" } else { "s" },
        crate::model::text::list(&names, 10),
        if one { "s" } else { "" },
        if one { "s" } else { "" },
    )
}

/// Why `preflight.dev/accept` does not accept `check`: it finds
/// `unseen`, which the claim did not record, or (`None`) the claim
/// recorded nothing for it.
pub(crate) fn accept_outgrown(check: &CheckResult, unseen: Option<&[&str]>) -> String {
    let name = shown_check_name(&check.name);
    let Some(unseen) = unseen else {
        return format!(
            "Accept not counted: {ACCEPT_FINDINGS} records nothing for {name}, so the accept was not written against it; accept again with the command below."
        );
    };
    let unseen: Vec<String> = unseen.iter().map(|f| clean(f, 80)).collect();
    format!(
        "Accept not counted: {name} now also finds {}, which {ACCEPT} was not written against; accept again with the command below if that is understood too.",
        crate::model::text::list(&unseen, MAX_LISTED)
    )
}

pub(crate) fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or("")
}

/// Puts a note line before a message: why an override was ignored comes
/// first, since it is what the person who wrote it is looking for.
pub(crate) fn lead_with(message: &mut String, note: &str) {
    if message.is_empty() {
        message.push_str(note);
    } else {
        *message = format!("{note}\n{message}");
    }
}

/// Appends a note line to a message.
pub(crate) fn add_note(message: &mut String, note: &str) {
    if !message.is_empty() {
        message.push('\n');
    }
    message.push_str(note);
}

/// One check as a line: its name, message and link, each cleaned and
/// bounded, since all three may come from a check's own output; a name
/// that is not a check name is shown escaped, and says so.
fn check_line(check: &CheckResult) -> String {
    let mut line = format!("- {}", shown_check_name(&check.name));
    if !check.risks.is_empty() {
        let risks: Vec<String> = check.risks.iter().map(|r| clean(r, 80)).collect();
        let _ = write!(line, " [{}]", crate::model::text::list(&risks, MAX_LISTED));
    }
    if check.outcome == Outcome::Error {
        line.push_str(" (check errored)");
    }
    if !check.message.is_empty() {
        let _ = write!(line, ": {}", clean(&check.message, MAX_LINE));
    }
    if let Some(url) = check.remediation_url.as_deref().filter(|u| !u.is_empty()) {
        let _ = write!(line, " ({})", clean(url, 200));
    }
    line
}

fn report_hint(result: &UpdatePreflight) -> String {
    match result.metadata.name.as_deref() {
        Some(name) => format!(
            "Full report: oc get updatepreflight {} -o yaml",
            shell_word(name)
        ),
        None => "Full report: oc get updatepreflights".to_owned(),
    }
}

/// The target as the commands a denial suggests name it: its version, else
/// its image (what `preflight.dev/override` and `accept-for` match), as one
/// shell word.
fn target_word(target: &Target) -> String {
    shell_word(target.version.as_deref().unwrap_or(&target.image))
}

/// What a suggested claim says besides its target: until when (every claim
/// needs a time limit) and, under the four-eyes rule, the generation of the
/// spec it approves.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClaimTerms {
    pub until: Timestamp,
    pub generation: Option<i64>,
}

impl ClaimTerms {
    /// The annotations that end every suggested claim: its time limit is
    /// given by the caller; these say who wrote it and, under four eyes,
    /// for which spec.
    fn attribution(&self) -> String {
        let by = format!("{CLAIMED_BY}=\"$(oc whoami)\"");
        match self.generation {
            Some(generation) => format!("{by} {CLAIMED_GENERATION}={generation}"),
            None => by,
        }
    }
}

/// How to accept or override, as commands to copy, with the claim's
/// `terms`. An errored check is
/// offered by its own name like a failed one: its error is often the
/// gate's own machinery (an extraction pod that cannot pull, a querier
/// that does not answer), which must never leave an override as the only
/// way on; it is also run again within minutes. Every value is one shell word
/// ([`shell_word`]): names and targets come from releases, checks and the
/// update graph, and a person pastes these lines into a shell.
fn override_hint(
    target: &Target,
    failing: &[&CheckResult],
    terms: ClaimTerms,
    accept_risks_field: bool,
) -> String {
    // An admin ack is given in openshift-config/admin-acks, never accepted:
    // its finding says how, and no hint offers it.
    let (errored, failed): (Vec<&CheckResult>, Vec<&CheckResult>) = failing
        .iter()
        .copied()
        .filter(|c| crate::model::standing::acceptable(c))
        .partition(|c| c.outcome == Outcome::Error);
    let to = target_word(target);
    let until = shell_word(&terms.until.to_string());
    let attribution = terms.attribution();
    let mut hint = String::new();
    // The narrowest names: OpenShift's for a finding that carries them (an
    // alert, a conditional-update risk), else the check's own; accepting
    // `KubeContainerWaiting` leaves the next critical alert blocking, where
    // accepting `CriticalAlertsFiring` would not.
    let mut names: Vec<&str> = Vec::new();
    // A check whose name is not one (the gate refuses such names where
    // they enter, so never one of its own results) is never offered.
    let mut unnamed: Vec<String> = Vec::new();
    // What each check offered finds now: the accept counts only while it
    // finds nothing more.
    let mut findings: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for check in failed.iter().chain(&errored) {
        // An error found nothing: only the check's own name accepts it.
        let narrow = if check.outcome == Outcome::Error {
            Vec::new()
        } else {
            crate::model::risks::to_accept(&check.risks)
        };
        let chosen = if narrow.is_empty() {
            if check_name(&check.name).is_err() {
                unnamed.push(shown_check_name(&check.name));
                continue;
            }
            vec![check.name.as_str()]
        } else {
            narrow
        };
        for name in chosen {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        findings.insert(&check.name, check.findings());
    }
    if !names.is_empty() {
        let names = shell_list(&names);
        let findings = shell_json(&findings);
        let _ = writeln!(
            hint,
            "To accept them: oc annotate --overwrite clusterversion version {ACCEPT}={names} {ACCEPT_FOR}={to} {ACCEPT_REASON}='<why>' {ACCEPT_UNTIL}={until} {ACCEPT_FINDINGS}={findings} {attribution}"
        );
        // OpenShift's own field takes OpenShift's names (and the gate's).
        // Only where the cluster's ClusterVersion has the field, and with
        // the switch oc keeps its accept command behind.
        if accept_risks_field && errored.is_empty() && failed.iter().all(|c| !c.risks.is_empty()) {
            let _ = writeln!(
                hint,
                "Or: OC_ENABLE_CMD_UPGRADE_ACCEPT_RISKS=true oc adm upgrade accept {names} (writes spec.desiredUpdate.acceptRisks; oc offers the command only with that switch)"
            );
        }
    }
    if !unnamed.is_empty() {
        let _ = writeln!(
            hint,
            "{} cannot be accepted: a name that is not a check name is never offered; override the gate for this target instead",
            crate::model::text::list(&unnamed, MAX_LISTED),
        );
    }
    if !errored.is_empty() {
        let names: Vec<String> = errored.iter().map(|c| shown_check_name(&c.name)).collect();
        let _ = writeln!(
            hint,
            "{} errored: the gate runs {} again within {} minutes; to go ahead before then, accept {} by name as above (a check whose errors should only warn is named in the gate's --fail-open-checks: docs/checks.md)",
            crate::model::text::list(&names, MAX_LISTED),
            if names.len() == 1 { "it" } else { "them" },
            errored_rerun_minutes(),
            if names.len() == 1 { "it" } else { "them" },
        );
    }
    let _ = write!(
        hint,
        "To override the gate for this target: oc annotate --overwrite clusterversion version {OVERRIDE}={to} {OVERRIDE_REASON}='<why>' {OVERRIDE_UNTIL}={until} {attribution}\n\
         (both need the \"override\" verb on updatepreflights.preflight.dev; then run oc adm upgrade again)"
    );
    hint
}

/// How soon an errored run is run again, in minutes, as a denial says it.
fn errored_rerun_minutes() -> u64 {
    crate::model::status::ERRORED_RERUN.as_secs() / 60
}

/// The denial of a target whose blocking checks fail.
pub(crate) fn failed(
    target: &Target,
    result: &UpdatePreflight,
    failing: &[&CheckResult],
    accepted: &[&CheckResult],
    terms: ClaimTerms,
    accept_risks_field: bool,
) -> String {
    let n = failing.len();
    let mut m = format!(
        "preflight for {} failed: {n} blocking check{} failed",
        target.display(),
        if n == 1 { "" } else { "s" }
    );
    for check in failing.iter().take(MAX_LISTED) {
        m.push('\n');
        m.push_str(&check_line(check));
    }
    if n > MAX_LISTED {
        let _ = write!(m, "\nand {} more", n - MAX_LISTED);
    }
    // A check listed as failing is never also said to be accepted (an
    // accept refused lists what it would have accepted as failing).
    let names: Vec<String> = accepted
        .iter()
        .filter(|c| !failing.iter().any(|f| f.name == c.name))
        .map(|c| shown_check_name(&c.name))
        .collect();
    if !names.is_empty() {
        let _ = write!(m, "\nAccepted as risks: {}", names.join(", "));
    }
    if let Some(plan) = result.status.as_ref().and_then(|s| s.plan.as_ref()) {
        m.push('\n');
        m.push_str(&plan_line(plan, None));
    }
    m.push('\n');
    m.push_str(&report_hint(result));
    m.push('\n');
    // The command overwrites the accept, so it carries what is accepted
    // already beside what fails, each with what it finds now.
    let mut offered: Vec<&CheckResult> = failing.to_vec();
    offered.extend(
        accepted
            .iter()
            .filter(|c| !failing.iter().any(|f| f.name == c.name)),
    );
    m.push_str(&override_hint(target, &offered, terms, accept_risks_field));
    m
}

/// The denial of a target whose run errored with no check to blame: what
/// errored, that it is run again soon, and how to go ahead meanwhile (no
/// check to accept, so no accept line).
pub(crate) fn run_error(target: &Target, result: &UpdatePreflight, terms: ClaimTerms) -> String {
    let detail = result
        .status
        .as_ref()
        .and_then(|s| {
            s.conditions
                .iter()
                .map(|c| c.message.as_str())
                .find(|m| !m.is_empty())
        })
        .map_or_else(
            || "no check reported a result".to_owned(),
            |m| clean(m, MAX_LINE),
        );
    format!(
        "preflight for {} errored: {detail}\nThe gate runs it again within {} minutes; retry then.\n{}\n{}",
        target.display(),
        errored_rerun_minutes(),
        report_hint(result),
        override_hint(target, &[], terms, false)
    )
}

/// Why there is no verdict yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pending {
    /// A run is under way.
    Running,
    /// Results are missing or stale, and the gate checks the target by
    /// itself (the update graph offers it, or it is the stored target).
    Scheduled(String),
    /// Results are missing or stale, and this gate cannot run checks.
    CannotRun(String),
    /// Results are missing or stale, and the update graph does not offer
    /// the target: only someone allowed to create UpdatePreflights asks.
    NotOffered(String),
    /// Results are missing or stale, and a hosted cluster's update graph
    /// does not offer the target: nothing asks for its run but the graph.
    OutsideGraph(String),
    /// The gate lost its watch of results.
    Untrusted,
    /// The result is the gate's own but its signature does not verify (a
    /// lost or rotated key): the controller runs it again by itself.
    Unsigned(String),
}

/// The answer while results are missing, stale, being computed or cannot
/// be trusted.
pub fn pending(target: &Target, why: &Pending, retry: Duration) -> String {
    // A JSON string is a YAML scalar, whatever the image holds; the quoted
    // `'EOF'` keeps the shell from expanding anything in the document.
    let image = serde_json::Value::from(clean(&target.image, MAX_LINE)).to_string();
    let target = target.display();
    let retry = retry.as_secs();
    match why {
        Pending::Running => format!("preflight for {target} is running, retry in ~{retry} s"),
        Pending::Scheduled(why) => format!(
            "preflight for {target} is running, retry in ~{retry} s\nThe gate checks every target the update graph offers by itself ({why}); no review starts a run."
        ),
        Pending::CannotRun(why) => format!(
            "no fresh preflight results for {target}: {why}\nThis gate serves the results it read when it started (a directory, or a snapshot's offered targets) and starts no run; check a target offline with preflight-gate check."
        ),
        Pending::NotOffered(why) => format!(
            "preflight for {target} has not been checked: {why}, and the update graph does not offer it\n\
             The gate checks the targets the update graph offers by itself, and no review starts a run. Ask for one as someone allowed to create UpdatePreflights, then run oc adm upgrade again when it is done (oc get upf):\n\
             oc create -f - <<'EOF'\n\
             apiVersion: preflight.dev/v1alpha1\n\
             kind: UpdatePreflight\n\
             metadata: {{generateName: manual-}}\n\
             spec: {{image: {image}}}\n\
             EOF"
        ),
        Pending::OutsideGraph(why) => format!(
            "preflight for {target} has not been checked: {why}, and the hosted cluster's update graph does not offer it\n\
             The gate checks the releases a hosted cluster's update graph offers, and its current one, by itself; no review starts a run. Set the HostedCluster's spec.channel to one that offers the release, or override."
        ),
        Pending::Unsigned(why) => format!(
            "preflight for {target} is running, retry in ~{retry} s\nIts result {why}; the gate runs it again by itself (it repairs a changed spec of its own result; a lost or rotated signing key leaves every result so).",
            why = clean(why, MAX_LINE),
        ),
        Pending::Untrusted => format!(
            "preflight results for {target} cannot be trusted now, retry in ~{retry} s\nThe gate has lost its watch of UpdatePreflight objects (is the API server reachable?)."
        ),
    }
}

pub(crate) fn unknown_version(version: &str) -> String {
    format!(
        "cannot resolve version {version}: it is in neither status.availableUpdates nor status.conditionalUpdates\n\
         Give the release image instead (oc adm upgrade --to-image <pullspec> --allow-explicit-upgrade), so the preflight knows what to check."
    )
}

pub(crate) fn not_a_digest(image: &str) -> String {
    let repository = image
        .rsplit_once(':')
        .filter(|_| image.rfind('/') < image.rfind(':'))
        .map_or(image, |(repo, _)| repo);
    format!(
        "{} names the release by a tag, which can be moved to another release after it was checked\n\
         Give the release's digest: oc adm upgrade --to-image {}@sha256:<digest> --allow-explicit-upgrade \
         (oc adm release info {} prints it).",
        crate::model::text::clean(image, 240),
        shell_word(repository),
        shell_word(image),
    )
}

pub fn warning(check: &CheckResult) -> String {
    format!("preflight warning: {}", &check_line(check)[2..])
}

pub fn accepted(check: &CheckResult) -> String {
    format!(
        "preflight check accepted as a risk: {}",
        &check_line(check)[2..]
    )
}

/// The first line of a refused write of claims.
pub(crate) fn claim_refused(claims: &str, user: &str) -> String {
    format!("preflight-gate: {user} may not write {claims}")
}

/// Why a write of claims that does not name its writer is refused.
pub(crate) fn claim_unattributed(claimed_by: Option<&str>, user: &str) -> String {
    let found = match claimed_by {
        Some(other) => format!("it says {other:?}"),
        None => "it is not set".to_owned(),
    };
    let word = shell_word(user);
    format!(
        "A write of {PREFIX_ANY} annotations records its writer in {CLAIMED_BY}, and {found}.\n\
         Write it in the same command: oc annotate --overwrite clusterversion version <annotations> {CLAIMED_BY}={word}\n\
         (and it needs the \"override\" verb on updatepreflights.preflight.dev)"
    )
}

/// What the record says of a stored change that decisions of different
/// requesters claimed: where the API server does not authenticate itself
/// to the gate, any of them may be a forged review.
pub(crate) fn record_ambiguous(requesters: &[String], resource_version: &str) -> String {
    format!(
        "Reviews naming different requesters claim the change stored at resourceVersion {resource_version}: {}. \
         The gate cannot tell which made it (this API server does not authenticate itself to the gate; docs/security.md, \"Who can send a review\"), \
         so the Events of this change may name the wrong requester: the API server's audit log names who wrote it.",
        requesters.join(", ")
    )
}

/// Why claims written by the requester do not count under the four-eyes rule.
pub(crate) fn four_eyes_same_writer(claim: &str, writer: Option<&str>, requester: &str) -> String {
    let who = match writer {
        Some(w) if w == requester => format!("was written by {w}, who is changing the target"),
        Some(w) => format!("was written by {w}"),
        None => format!("names no writer in {CLAIMED_BY}"),
    };
    format!(
        "{claim} {who}; --require-distinct-approver needs it written by someone other than {requester}"
    )
}

/// Why a claim another identity wrote does not count under the four-eyes
/// rule: it names another generation of the spec than the one changed.
pub(crate) fn four_eyes_spent(claim: &str, why: &str) -> String {
    format!("{claim} does not count for this change: {why}")
}

/// Why `acceptRisks` does not count under the four-eyes rule.
pub(crate) fn four_eyes_spec_accept(names: &BTreeSet<String>) -> String {
    let names: Vec<String> = names.iter().map(|n| clean(n, 80)).collect();
    format!(
        "acceptRisks {} is written with the target, so --require-distinct-approver does not count it; an approver writes {ACCEPT} instead",
        names.join(",")
    )
}

/// Why `spec.desiredUpdate.force` does not count under the four-eyes rule.
pub(crate) fn four_eyes_desired_update_force() -> String {
    format!(
        "spec.desiredUpdate.force is written with the target, so --require-distinct-approver does not count it; an approver writes {OVERRIDE} instead"
    )
}

/// Why setting `spec.desiredUpdate.force` is refused.
pub(crate) fn force_refused(user: &str) -> String {
    format!(
        "preflight-gate: {user} may not set spec.desiredUpdate.force\n\
         force makes the cluster-version operator skip its own preconditions and the release's signature check, so it needs the \"override\" verb on updatepreflights.preflight.dev."
    )
}

/// The denial of HyperShift's force by a user without the `override` verb.
pub(crate) fn force_upgrade_refused(user: &str) -> String {
    format!(
        "preflight-gate: {user} may not set {FORCE_UPGRADE_TO}\n\
         HyperShift's force updates past ClusterVersionUpgradeable=False, so it needs the \"override\" verb on updatepreflights.preflight.dev, as an override does."
    )
}

/// The denial of HyperShift's force written without a reason.
pub(crate) fn force_upgrade_without_reason() -> String {
    format!(
        "preflight-gate: {FORCE_UPGRADE_TO} is an override, and an override gives its reason: write {OVERRIDE_REASON} in the same command:\n\
         oc annotate --overwrite hostedcluster <name> -n <namespace> {FORCE_UPGRADE_TO}=<pullspec> {OVERRIDE_REASON}='<why>' {CLAIMED_BY}=\"$(oc whoami)\""
    )
}

/// The denial of a NodePool's write whose HostedCluster the gate's watch
/// has not shown.
pub(crate) fn hosted_cluster_unseen(cluster: &str, pool: &str) -> String {
    format!(
        "preflight-gate has not seen HostedCluster {cluster}, which NodePool {pool} belongs to, so it cannot judge the NodePool's update; retry in a minute (is the gate's watch of HostedClusters up?)"
    )
}

/// The denial of an update HyperShift would not roll out.
pub(crate) fn hypershift_refuses(
    target: &Target,
    refusals: &[crate::model::hosted::Refusal],
) -> String {
    let mut text = format!(
        "preflight-gate: HyperShift would not take the NodePool to {}:",
        target.display()
    );
    for refusal in refusals {
        let _ = write!(text, "\n- {}", clean(&refusal.to_string(), MAX_LINE));
    }
    text.push_str("\nHyperShift reports such an update only afterwards, in the NodePool's conditions; no override makes it roll out.");
    text
}

/// What a denial's commands act on: the ClusterVersion named `version`,
/// which the messages name, or a hosted cluster's HostedCluster or
/// NodePool, which [`Address::apply`] names instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    /// `hostedcluster prod -n clusters`, as `oc annotate` takes it.
    object: String,
    /// How `preflight-gate check` names it: `--hosted-cluster clusters/prod`,
    /// and `--nodepool workers` for a NodePool.
    checked_as: String,
}

impl Address {
    pub(crate) fn hosted_cluster(cluster: &crate::model::hosted::HostedCluster) -> Self {
        Self {
            object: Self::object("hostedcluster", &cluster.metadata),
            checked_as: format!(
                "--hosted-cluster {}",
                shell_word(&cluster.hosted_name().to_string())
            ),
        }
    }

    pub(crate) fn nodepool(pool: &crate::model::hosted::NodePool) -> Self {
        Self {
            object: Self::object("nodepool", &pool.metadata),
            checked_as: format!(
                "--hosted-cluster {} --nodepool {}",
                shell_word(&pool.hosted_name().to_string()),
                shell_word(&pool.metadata.name)
            ),
        }
    }

    fn object(kind: &str, metadata: &crate::model::meta::Metadata) -> String {
        format!(
            "{kind} {} -n {}",
            shell_word(&metadata.name),
            shell_word(metadata.namespace.as_deref().unwrap_or_default())
        )
    }

    /// `text`, its commands acting on this object: the ClusterVersion's
    /// `oc annotate` and `oc adm upgrade` become the object's own, and the
    /// full report, which no UpdatePreflight holds for a hosted cluster,
    /// is `preflight-gate check`'s of `target`.
    pub(crate) fn apply(&self, text: &str, target: Option<&str>) -> String {
        let mut text = text
            .replace("clusterversion version", &self.object)
            .replace("run oc adm upgrade again", "write its release again");
        const TO_IMAGE: &str = "oc adm upgrade --to-image ";
        const EXPLICIT: &str = " --allow-explicit-upgrade";
        while let Some(start) = text.find(TO_IMAGE) {
            let from = start + TO_IMAGE.len();
            let Some(length) = text[from..].find(EXPLICIT) else {
                break;
            };
            let image = text[from..from + length].to_owned();
            let patch = format!(
                "oc patch {} --type merge -p '{{\"spec\":{{\"release\":{{\"image\":\"{image}\"}}}}}}'",
                self.object
            );
            text.replace_range(start..from + length + EXPLICIT.len(), &patch);
        }
        if let Some(start) = text.find("Full report: oc get updatepreflight") {
            let end = text[start..].find('\n').map_or(text.len(), |n| start + n);
            let to = target.map_or_else(|| "<release>".to_owned(), shell_word);
            let report = format!(
                "Full report: preflight-gate check --kubeconfig <the management cluster's> {} --to {to}",
                self.checked_as
            );
            text.replace_range(start..end, &report);
        }
        text
    }
}

/// The denial of a write that changes what the cluster trusts, by a user
/// without the `override` verb.
pub(crate) fn trust_change_refused(user: &str, fields: &[&str]) -> String {
    format!(
        "preflight-gate: {user} may not change {}\n\
         These decide which releases the cluster is offered and trusts (the update graph, where release signatures are read, components the cluster-version operator manages, capabilities), so changing them needs the \"override\" verb on updatepreflights.preflight.dev, as an override does.",
        fields.join(", ")
    )
}

/// The denial when the object under the release's name is not the gate's
/// own result.
pub(crate) fn not_vouched(target: &Target, name: &str, why: &str) -> String {
    format!(
        "preflight for {} has no result the gate vouches for: UpdatePreflight {name} {why}\n\
         It is a request, not a result. Delete it (oc delete updatepreflight {word}) and run oc adm upgrade again: the gate then makes its own.",
        target.display(),
        name = clean(name, MAX_LINE),
        word = shell_word(name),
        why = clean(why, MAX_LINE),
    )
}

/// The warning when the target asked for is the one the cluster already has.
pub(crate) fn already_desired(target: &Target) -> String {
    format!(
        "preflight-gate: {} is the release the cluster runs or is already updating to; there is nothing to check",
        target.display()
    )
}

/// The denial of an image whose version the request and the graph disagree on.
pub(crate) fn version_mismatch(image: &str, claimed: &str, known: &str) -> String {
    format!(
        "spec.desiredUpdate says version {claimed}, but the update graph says {image} is {known}\n\
         Give the version or the image, not both, so that the release checked is the one named."
    )
}

/// The longest plan line, in characters: it quotes a blocker, which names
/// a node and a PodDisruptionBudget.
pub(crate) const MAX_PLAN_LINE: usize = 400;

/// The pool whose rollout the control plane's figure already holds.
const MASTER_POOL: &str = "master";

/// The update plan (`status.plan`) in one line: the expected duration,
/// the batches of each pool that adds to it, and the first batch that can
/// never drain. With a window, where its P90 ends against the window's.
pub fn plan_line(plan: &PlanSummary, fit: Option<&WindowFit>) -> String {
    let mut line = format!(
        "expected duration: about {} (P90 {})",
        duration_words(plan.p50_seconds),
        duration_words(plan.p90_seconds)
    );
    // The master pool's rollout is part of the control plane's figure.
    let pools: Vec<String> = plan
        .pools
        .iter()
        .filter(|p| p.name != MASTER_POOL)
        .map(|p| {
            let name = clean(&p.name, 60);
            match (p.updates, p.batches) {
                (false, _) => format!("{name} paused"),
                (true, 1) => format!("1 {name} batch"),
                (true, n) => format!("{n} {name} batches"),
            }
        })
        .collect();
    if !pools.is_empty() {
        let _ = write!(line, ", {}", crate::model::text::list(&pools, 3));
    }
    if let Some(first) = plan.blockers.first() {
        let more = plan.blockers.len().saturating_sub(1) + plan.more_blockers as usize;
        let _ = write!(line, "; blocked: {}", clean(first, MAX_LINE));
        if more > 0 {
            let _ = write!(line, " (and {more} more)");
        }
    }
    if let Some(fit) = fit {
        let _ = write!(
            line,
            "; its P90 ends {}, {} ({WINDOW_END} {})",
            at(fit.p90_end),
            if fit.fits() {
                "within the maintenance window"
            } else {
                "after the maintenance window's end"
            },
            at(fit.end)
        );
    }
    clean(&line, MAX_PLAN_LINE)
}

const PLAN_WARNING: &str = "preflight-gate: expected duration: ";

/// The plan line as a warning of an update that goes ahead.
pub(crate) fn plan_warning(plan: &PlanSummary, fit: Option<&WindowFit>) -> String {
    format!("preflight-gate: {}", plan_line(plan, fit))
}

/// Whether `warning` is the plan's line.
pub(crate) fn is_plan_warning(warning: &str) -> bool {
    warning.starts_with(PLAN_WARNING)
}

/// How to move or remove the window, as commands to copy.
fn window_hint() -> String {
    format!(
        "To move the window: oc annotate --overwrite clusterversion version {WINDOW_END}=<RFC 3339 time> {CLAIMED_BY}=\"$(oc whoami)\"; to remove it: oc annotate clusterversion version {WINDOW_END}-"
    )
}

/// The denial of an update that may not finish within the maintenance
/// window: the window, the P90 and when it would end, the plan, and the
/// ways on.
pub(crate) fn outside_window(
    target: &Target,
    fit: &WindowFit,
    plan: &PlanSummary,
    terms: ClaimTerms,
) -> String {
    format!(
        "preflight for {}: the update may not finish within the maintenance window: {}\n{}\n{}\n{}",
        target.display(),
        fit.words(WINDOW_END),
        plan_line(plan, None),
        window_hint(),
        override_hint(target, &[], terms, false),
    )
}

/// The same, as a note on a denial for other reasons.
pub(crate) fn outside_window_note(fit: &WindowFit) -> String {
    format!(
        "Nor may it finish within the maintenance window: {}.",
        fit.words(WINDOW_END)
    )
}

/// The denial while `preflight.dev/window-end` cannot be read, has passed
/// or is too far ahead.
pub(crate) fn window_unreadable(target: &Target, why: &str) -> String {
    format!(
        "preflight for {}: the maintenance window is not one the gate can hold the update to: {why}\n{}",
        target.display(),
        window_hint()
    )
}

/// The same, as a note on a denial for other reasons.
pub(crate) fn window_unreadable_note(why: &str) -> String {
    format!("The maintenance window is not one the gate can hold the update to either: {why}.")
}

/// The denial when fresh results carry no plan to fit the window with
/// (written by a gate from before plans).
pub(crate) fn window_without_plan(
    target: &Target,
    end: Timestamp,
    run: bool,
    retry: Duration,
) -> String {
    let next = if run {
        format!(
            "The gate runs it again by itself; retry in ~{} s, once it has written one.",
            retry.as_secs()
        )
    } else {
        "The next run writes one.".to_owned()
    };
    format!(
        "preflight for {}: whether the update fits the maintenance window ({WINDOW_END} {}) is not known: its results carry no update plan\n{next}\n{}",
        target.display(),
        at(end),
        window_hint()
    )
}

/// The same, as a note on a denial for other reasons.
pub(crate) fn window_without_plan_note(end: Timestamp) -> String {
    format!(
        "Whether it fits the maintenance window ({WINDOW_END} {}) is not known either: its results carry no update plan.",
        at(end)
    )
}

/// The warning of an update allowed without results (`--on-pending=allow`):
/// the window could not be held to.
pub(crate) fn window_unjudged(target: &Target, end: Timestamp) -> String {
    format!(
        "preflight-gate: whether the update to {} fits the maintenance window ({WINDOW_END} {}) is not known: there are no results to plan it by",
        target.display(),
        at(end)
    )
}
