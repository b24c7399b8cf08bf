//! Command-line interface. Every flag can also be set by an environment
//! variable `PREFLIGHT_GATE_<FLAG>`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::admission::OnPending;

#[derive(Debug, Parser)]
#[command(
    name = "preflight-gate",
    version,
    about = "Keeps an OpenShift cluster from starting an update whose preflight checks fail"
)]
pub struct Cli {
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "PREFLIGHT_GATE_LOG_FORMAT")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the validating admission webhook.
    Serve(Box<ServeArgs>),
    /// Write a development CA and serving certificate, and print the caBundle.
    Certs(CertsArgs),
    /// Run the preflight checks for an update and print the report. Exit
    /// codes: 0 all pass (or no change: the target is what the cluster runs or is updating to), 3 blocking failures, 4 warnings only, 1 or 2 errors.
    Check(Box<CheckArgs>),
    /// Ask the cluster's gate for a preflight run of a target and print the result.
    Run(RunArgs),
    /// Judge every cluster of a fleet as `check` judges one, in parallel, and
    /// print one report: which clusters are cleared for the target, which are
    /// blocked and by what, which could not be judged, and the causes they
    /// share. Exit codes: 0 all cleared, 3 some blocked, 1 none blocked but
    /// some could not be judged, 2 bad arguments.
    Fleet(Box<FleetArgs>),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    #[command(flatten)]
    pub controller: ControllerArgs,
}

/// Who may read `/metrics` (`--metrics-auth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MetricsAuth {
    Auto,
    Kubernetes,
    None,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Server")]
pub struct ServerArgs {
    /// Address of the TLS webhook. By default 0.0.0.0:8443 with --tls-cert,
    /// and 127.0.0.1:8443 with the development certificates, which name
    /// only this machine.
    #[arg(long, env = "PREFLIGHT_GATE_WEBHOOK_ADDR")]
    pub webhook_addr: Option<SocketAddr>,
    /// Address of the admin server (/metrics, /healthz, /readyz): plain HTTP,
    /// or HTTPS with --admin-tls. By default 0.0.0.0:9090 with --tls-cert,
    /// and 127.0.0.1:9090 with the development certificates.
    #[arg(long, env = "PREFLIGHT_GATE_ADMIN_ADDR")]
    pub admin_addr: Option<SocketAddr>,
    /// Serve the admin port over HTTPS with the webhook's certificate, as
    /// OpenShift's monitoring expects of cluster components.
    #[arg(long, env = "PREFLIGHT_GATE_ADMIN_TLS")]
    pub admin_tls: bool,
    /// Who may read /metrics: kubernetes (a bearer token the API server
    /// authenticates, TokenReview, whose user may get the non-resource URL
    /// /metrics, SubjectAccessReview, as kube-rbac-proxy decides), none
    /// (anyone who reaches the port), or auto: kubernetes with a cluster,
    /// none without. /healthz and /readyz stay open for the kubelet.
    #[arg(long, value_enum, default_value_t = MetricsAuth::Auto, env = "PREFLIGHT_GATE_METRICS_AUTH")]
    pub metrics_auth: MetricsAuth,
    /// Reviews decided at once, once their bodies have arrived; more wait their turn, within the API server's timeout.
    #[arg(long, default_value_t = 256, env = "PREFLIGHT_GATE_MAX_CONCURRENCY")]
    pub max_concurrency: usize,
    /// Run requests (UpdatePreflights created, stamped or changed) one requester may make in 10 minutes, counted by each replica; more are refused (429) until the oldest leaves the window. The gate's own account, system:masters and dry runs are not counted; 0 takes any number.
    #[arg(long, default_value_t = 10, env = "PREFLIGHT_GATE_MAX_RUN_REQUESTS")]
    pub max_run_requests: usize,
    /// Webhook connections open at once, counted once their TLS handshake is done (as many handshakes may run beside them); past it the connection idle longest is closed for the new one, and a new one is refused only while every open one is busy. One peer address may hold a quarter of them.
    #[arg(long, default_value_t = 1024, env = "PREFLIGHT_GATE_MAX_CONNECTIONS")]
    pub max_connections: usize,
    /// Webhook connections of one peer address busy with a review at once (at most its quarter of --max-connections); a request past it is answered 503 and, on HTTP/1, its connection closed. The ClusterVersion is one object, so an API server has a few reviews in flight at most; at 16, keeping all 1,024 slots busy takes 64 addresses, not 4.
    #[arg(long, default_value_t = 16, env = "PREFLIGHT_GATE_MAX_BUSY_PER_PEER")]
    pub max_busy_per_peer: usize,
    /// Connection slots only the API server's own addresses may take, the endpoints of the kubernetes Service (an EndpointSlice in default, watched); other peers share the rest, and never close the API server's connections to make room. Nothing is reserved without a cluster, or while those endpoints cannot be read; the log says so. At most half of --max-connections; 0 turns it off. 64 is two dozen for each replica of a three-replica control plane, which opens one connection per review in flight and keeps up to 25 idle.
    #[arg(
        long,
        default_value_t = 64,
        env = "PREFLIGHT_GATE_RESERVED_CONNECTIONS"
    )]
    pub reserved_connections: usize,
    /// The least rate, in bytes a second, at which a review's body must arrive: averaged since its head, once 2 s have passed. A body that falls behind is answered 408 and, on HTTP/1, its connection closed, so a trickling body holds no slot. The API server sends a review at once; 0 turns it off.
    #[arg(long, default_value_t = 512, env = "PREFLIGHT_GATE_MIN_BODY_RATE")]
    pub min_body_rate: u64,
    /// Time allowed for a TLS handshake.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_HANDSHAKE_TIMEOUT")]
    pub handshake_timeout: Duration,
    /// Time allowed to read a request's headers once they begin; and, when the gate is half full or draining, for a connection's first request to begin after its handshake.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_HEADER_READ_TIMEOUT")]
    pub header_read_timeout: Duration,
    /// How long a connection may sit with nothing arriving before it is closed; longer than the API server's 90-second keep-alive, so that it is always the API server that closes an idle connection, never the gate under a review it is sending.
    #[arg(long, default_value = "120s", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_IDLE_TIMEOUT")]
    pub idle_timeout: Duration,
    /// After SIGTERM, how long to stay up but unready so endpoints update; each HTTP/1 answer meanwhile closes its connection.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_SHUTDOWN_DELAY")]
    pub shutdown_delay: Duration,
    /// After that, how long in-flight reviews get to finish.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_SHUTDOWN_GRACE")]
    pub shutdown_grace: Duration,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "TLS")]
pub struct TlsArgs {
    /// Serving certificate (PEM, leaf first, chain allowed). Without it,
    /// certs/tls.crt is used, and made with a development CA if missing.
    #[arg(long, requires = "tls_key", env = "PREFLIGHT_GATE_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// Serving key (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC).
    #[arg(long, requires = "tls_cert", env = "PREFLIGHT_GATE_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// CA bundle to verify client certificates against; clients must present one.
    #[arg(long, env = "PREFLIGHT_GATE_CLIENT_CA")]
    pub client_ca: Option<PathBuf>,
    /// How often to poll the certificate files, besides watching them.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_TLS_RELOAD_INTERVAL")]
    pub tls_reload_interval: Duration,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Cluster and results")]
pub struct ClusterArgs {
    /// Directory of UpdatePreflight YAML/JSON to serve results from, as they are.
    #[arg(long, env = "PREFLIGHT_GATE_RESULTS_DIR", conflicts_with = "snapshot")]
    pub results_dir: Option<PathBuf>,
    /// Snapshot of a cluster (oc get -o yaml output or a must-gather, as a
    /// directory or a .tar, .tar.gz or .tar.xz archive) to run the checks
    /// on, without a cluster. With neither this, --results-dir nor
    /// a cluster, the sample snapshot compiled in from examples/snapshot/ is used.
    #[arg(long, env = "PREFLIGHT_GATE_SNAPSHOT")]
    pub snapshot: Option<PathBuf>,
    /// Kubeconfig for override authorization and Events. Without it,
    /// KUBECONFIG or the in-cluster service account is used if present;
    /// with neither, the gate runs without a cluster and refuses overrides.
    #[arg(long, env = "PREFLIGHT_GATE_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Name of this instance in Events and the Lease (the pod name in a cluster).
    #[arg(long, env = "PREFLIGHT_GATE_INSTANCE")]
    pub instance: Option<String>,
    /// The node this replica runs on (the pod's spec.nodeName). While it is
    /// cordoned the replica reports itself unready, so that a drain evicts
    /// it past the gate's PodDisruptionBudget (unhealthyPodEvictionPolicy:
    /// AlwaysAllow) even where no other node can take it.
    #[arg(long, env = "PREFLIGHT_GATE_NODE_NAME")]
    pub node_name: Option<String>,
    /// With a cluster, results turn stale once the watch feeding them has
    /// been down this long.
    #[arg(long, default_value = "2m", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_STALE_AFTER")]
    pub stale_after: Duration,
    /// On a HyperShift management cluster, also hold hosted clusters' results: every replica watches the HostedClusters and NodePools, reads each hosted cluster through the admin kubeconfig Secret its HostedCluster names, and runs its checks for the releases its update graph offers and its own, in memory (nothing is written). Needs a cluster, and a grant to read those Secrets.
    #[arg(
        long,
        env = "PREFLIGHT_GATE_HOSTED_CONTROL_PLANES",
        conflicts_with_all = ["results_dir", "snapshot"]
    )]
    pub hosted_control_planes: bool,
    /// On a cluster managed from an Open Cluster Management hub, publish whether each offered update would be let through now as ClusterClaims (`update-<version>.preflight.dev`: Cleared, Blocked, Pending or Error; and the summary `updates.preflight.dev`), which the hub's Placements select on with claimSelector. The leader publishes, every 15s; needs a cluster, the controller, and a grant on clusterclaims (deploy/components/cluster-claims).
    #[arg(
        long,
        env = "PREFLIGHT_GATE_CLUSTER_CLAIMS",
        conflicts_with_all = ["results_dir", "snapshot"]
    )]
    pub cluster_claims: bool,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Controller (with a cluster)")]
pub struct ControllerArgs {
    /// Run the preflight controller (leader-elected: one replica runs suites).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "PREFLIGHT_GATE_CONTROLLER")]
    pub controller: bool,
    /// Namespace of the controller's Lease.
    #[arg(
        long,
        default_value = "preflight-gate",
        env = "PREFLIGHT_GATE_NAMESPACE"
    )]
    pub namespace: String,
    /// Name of the controller's Lease.
    #[arg(
        long,
        default_value = "preflight-gate-controller",
        env = "PREFLIGHT_GATE_LEASE_NAME"
    )]
    pub lease_name: String,
    /// How long the Lease holds without renewal; a new leader takes over after it.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_LEASE_DURATION")]
    pub lease_duration: Duration,
    /// How often the targets the update graph offers are checked again; 0s checks each only once (no review starts a run, so every offered or stored target still gets its first).
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_REFRESH_INTERVAL")]
    pub refresh_interval: Duration,
    #[command(flatten)]
    pub limits: LimitsArgs,
    /// Runs at once.
    #[arg(long, default_value_t = 2, env = "PREFLIGHT_GATE_RUN_CONCURRENCY")]
    pub run_concurrency: u16,
    /// How long an auto-created UpdatePreflight whose target is no longer offered is kept.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_GC_GRACE")]
    pub gc_grace: Duration,
    /// Built-in checks to run (comma-separated); all when not given.
    #[arg(long, value_delimiter = ',', env = "PREFLIGHT_GATE_CHECKS")]
    pub checks: Vec<String>,
    /// Run PreflightChecks as Jobs beside the built-in checks.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "PREFLIGHT_GATE_EXTERNAL_CHECKS")]
    pub external_checks: bool,
    /// Namespace the check Jobs run in (never an operator's); by default the gate's own (--namespace, the pod's namespace in a cluster), wherever it is installed.
    #[arg(long, env = "PREFLIGHT_GATE_JOBS_NAMESPACE")]
    pub jobs_namespace: Option<String>,
    /// ServiceAccount of the check Jobs, bound to the read-only preflight-check ClusterRole.
    #[arg(
        long,
        default_value = "preflight-check",
        env = "PREFLIGHT_GATE_CHECK_SERVICE_ACCOUNT"
    )]
    pub check_service_account: String,
    /// How long a check's pod may go unscheduled (or its Job without a pod) before the check errors.
    #[arg(long, default_value = "2m", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_CHECK_SCHEDULE_TIMEOUT")]
    pub check_schedule_timeout: Duration,
    /// Also run the checks the target release declares (an extraction pod per release, from the release image).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "PREFLIGHT_GATE_RELEASE_CHECKS")]
    pub release_checks: bool,
    /// Releases whose pods may run without a verified signature (comma-separated), each named by its digest (repository@sha256:…): none by default. Any other release runs only when its signature verifies against the cluster's release keys, as the cluster-version operator verifies it; what the update graph offers is not enough, and neither is a repository, whose digests whoever can push to it decides.
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = trusted_release,
        env = "PREFLIGHT_GATE_TRUSTED_RELEASES"
    )]
    pub trusted_releases: Vec<String>,
    /// Checks a target release declares that may get the check account's API token (comma-separated check names). A release asks with preflight.dev/needs-api, but only the administrator grants it: a declared check that asks and is not named here is not run, and its result says so.
    #[arg(
        long,
        value_delimiter = ',',
        env = "PREFLIGHT_GATE_RELEASE_CHECKS_API_ACCESS"
    )]
    pub release_checks_api_access: Vec<String>,
    #[command(flatten)]
    pub alerts: AlertArgs,
    /// List kubernetes.io/tls Secrets in every namespace for the certificate checks; needs the grant of deploy/components/tls-secrets, which can read every Secret. Off: those checks are skipped and say why.
    #[arg(long, env = "PREFLIGHT_GATE_READ_TLS_SECRETS")]
    pub read_tls_secrets: bool,
}

/// The suite's time limits, for the controller and `check` alike.
#[derive(Debug, Args)]
pub struct LimitsArgs {
    /// Time allowed for a whole run (all its checks).
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_RUN_TIMEOUT")]
    pub run_timeout: Duration,
    /// Time allowed for one check.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_CHECK_TIMEOUT")]
    pub check_timeout: Duration,
}

impl LimitsArgs {
    pub fn limits(&self) -> crate::suite::Limits {
        crate::suite::Limits {
            per_check: self.check_timeout,
            budget: self.run_timeout,
        }
    }
}

impl ControllerArgs {
    /// The controller's settings; its runs' status counts results by
    /// `exemptions`, as the webhook reads them.
    pub fn settings(
        &self,
        exemptions: crate::model::standing::Exemptions,
    ) -> crate::preflight::controller::Settings {
        crate::preflight::controller::Settings {
            newest_runs: Default::default(),
            exemptions,
            refresh_interval: self.refresh_interval,
            run_timeout: self.limits.run_timeout,
            check_timeout: self.limits.check_timeout,
            concurrency: self.run_concurrency,
            gc_grace: self.gc_grace,
            checks: self.checks.clone(),
            jobs: self
                .external_checks
                .then(|| crate::preflight::jobs::JobSettings {
                    namespace: self
                        .jobs_namespace
                        .clone()
                        .unwrap_or_else(|| self.namespace.clone()),
                    service_account: self.check_service_account.clone(),
                    schedule_timeout: self.check_schedule_timeout,
                    release_checks: self.release_checks,
                    trusted_releases: self.trusted_releases.clone(),
                    release_api_access: self.release_checks_api_access.clone(),
                    ..Default::default()
                }),
            reads: crate::cluster::live::Reads {
                tls_secrets: self.read_tls_secrets,
            },
            alerts: self.alerts.source(),
            alert_namespaces: self.alerts.namespaces(),
            namespace: self.namespace.clone(),
        }
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The target: a version offered to the cluster, or a release image pullspec.
    #[arg(long)]
    pub to: String,
    /// Wait for the result and print it.
    #[arg(long)]
    pub wait: bool,
    /// How long to wait.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Kubeconfig (default: KUBECONFIG, ~/.kube/config or in-cluster).
    #[arg(long, env = "PREFLIGHT_GATE_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Policy")]
pub struct PolicyArgs {
    /// What to do while results are missing, stale or running.
    #[arg(long, value_enum, default_value_t = OnPending::Deny, env = "PREFLIGHT_GATE_ON_PENDING")]
    pub on_pending: OnPending,
    /// Let spec.desiredUpdate.force act as an override (still needs the override verb).
    #[arg(long, env = "PREFLIGHT_GATE_HONOR_DESIRED_UPDATE_FORCE")]
    pub honor_desired_update_force: bool,
    /// Completed results older than this are stale and rerun.
    #[arg(long, default_value = "6h", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_MAX_RESULT_AGE")]
    pub max_result_age: Duration,
    /// Checks whose errors only warn, never block (comma-separated).
    #[arg(long, value_delimiter = ',', env = "PREFLIGHT_GATE_FAIL_OPEN_CHECKS")]
    pub fail_open_checks: Vec<String>,
    /// Retry hint given while a run is pending.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_RETRY_AFTER")]
    pub retry_after: Duration,
    /// The longest time ahead an override's or accept's `until` may be:
    /// preflight.dev/override-until and preflight.dev/accept-until are
    /// required, and refused past it.
    #[arg(long, default_value = "24h", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_MAX_OVERRIDE_DURATION")]
    pub max_override_duration: Duration,
    /// The longest time ahead a maintenance window's end
    /// (preflight.dev/window-end) may be. A window is planned days ahead
    /// and set under a verb of its own (window), not the override verb.
    #[arg(long, default_value = "14d", value_parser = humantime::parse_duration, env = "PREFLIGHT_GATE_MAX_WINDOW_AHEAD")]
    pub max_window_ahead: Duration,
    /// The four-eyes rule: honour an override or accept claim only when
    /// preflight.dev/claimed-by names someone other than the requester, and
    /// only for one change of the target (preflight.dev/claimed-generation).
    #[arg(long, env = "PREFLIGHT_GATE_REQUIRE_DISTINCT_APPROVER")]
    pub require_distinct_approver: bool,
}

#[derive(Debug, Args)]
pub struct CertsArgs {
    /// Directory to write ca.crt, ca.key, tls.crt and tls.key into.
    #[arg(long, default_value = "certs", env = "PREFLIGHT_GATE_CERTS_OUT")]
    pub out: PathBuf,
    /// DNS names or IP addresses of the serving certificate (localhost,
    /// 127.0.0.1 and ::1 are always included).
    #[arg(long = "dns", env = "PREFLIGHT_GATE_CERTS_DNS", value_delimiter = ',')]
    pub names: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Target release: a version (looked up in the ClusterVersion's
    /// availableUpdates and conditionalUpdates) or a release image pullspec.
    #[arg(long, env = "PREFLIGHT_GATE_TO")]
    pub to: String,
    /// Snapshot: a directory of `oc get -o yaml` output or a must-gather
    /// (alerts in alerts.json or a must-gather's monitoring/ files), a
    /// must-gather archive (.tar, .tar.gz, .tar.xz) or one YAML or JSON
    /// file. Without it and --kubeconfig, the sample snapshot compiled in
    /// from examples/snapshot/ is used.
    #[arg(long, conflicts_with = "kubeconfig", env = "PREFLIGHT_GATE_SNAPSHOT")]
    pub snapshot: Option<PathBuf>,
    /// The time to judge the data at (RFC 3339), e.g. to see which
    /// certificates will have expired by a planned date. Without it, a
    /// snapshot is judged at the time it was taken (a must-gather's
    /// timestamp file, else the newest timestamp among its objects) and a
    /// live cluster by the clock.
    #[arg(long, env = "PREFLIGHT_GATE_NOW")]
    pub now: Option<jiff::Timestamp>,
    /// Kubeconfig of a live cluster to read (read-only).
    #[arg(long, env = "PREFLIGHT_GATE_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// A hosted cluster (HyperShift) to judge the update of, as
    /// NAMESPACE/NAME of its HostedCluster: --snapshot is then the
    /// management cluster's (its HostedClusters, NodePools and the
    /// hypershift/supported-versions ConfigMap), --hosted-snapshot the
    /// hosted cluster's own; or --kubeconfig the management cluster's, the
    /// hosted cluster read through the admin kubeconfig its HostedCluster
    /// names (never one that runs a command, calls an auth provider or
    /// reads a local file).
    #[arg(
        long,
        value_name = "NAMESPACE/NAME",
        env = "PREFLIGHT_GATE_HOSTED_CLUSTER"
    )]
    pub hosted_cluster: Option<String>,
    /// Snapshot of the hosted cluster, as --snapshot reads one (a
    /// directory, a must-gather or its archive, one file).
    #[arg(
        long,
        requires = "hosted_cluster",
        env = "PREFLIGHT_GATE_HOSTED_SNAPSHOT"
    )]
    pub hosted_snapshot: Option<PathBuf>,
    /// Judge updating this NodePool of the hosted cluster to --to, rather
    /// than its control plane.
    #[arg(long, requires = "hosted_cluster", env = "PREFLIGHT_GATE_NODEPOOL")]
    pub nodepool: Option<String>,
    /// Report format.
    #[arg(short, long, value_enum, default_value_t = crate::report::Format::Table, env = "PREFLIGHT_GATE_OUTPUT")]
    pub output: crate::report::Format,
    /// Names whose failures to accept as warnings (comma-separated): checks'
    /// names, or the OpenShift names their findings carry (oc adm upgrade
    /// recommend's issue names, the CVO's risk names).
    #[arg(long, value_delimiter = ',', env = "PREFLIGHT_GATE_ACCEPT")]
    pub accept: Vec<String>,
    /// Take --accept names that name no check or risk (otherwise exit 2).
    #[arg(long, env = "PREFLIGHT_GATE_ALLOW_UNKNOWN_ACCEPT")]
    pub allow_unknown_accept: bool,
    /// Print only the update plan (its batches, what holds them and how
    /// long the update takes; docs/plan.md), without running the checks.
    /// Exit 3 when a batch can never drain, 4 when something holds the
    /// update up, else 0.
    #[arg(long, env = "PREFLIGHT_GATE_PLAN_ONLY")]
    pub plan_only: bool,
    /// The end of the maintenance window the update must fit in (RFC 3339):
    /// an update whose plan ends past it at its P90 (now, or --now, plus
    /// the P90) is blocked (MaintenanceWindow fails; exit 3). As the
    /// webhook's preflight.dev/window-end annotation.
    #[arg(long, value_name = "RFC3339", env = "PREFLIGHT_GATE_WINDOW_END")]
    pub window_end: Option<String>,
    #[command(flatten)]
    pub limits: LimitsArgs,
    /// Checks whose errors only warn (comma-separated), as the gate's
    /// --fail-open-checks.
    #[arg(long, value_delimiter = ',', env = "PREFLIGHT_GATE_FAIL_OPEN_CHECKS")]
    pub fail_open_checks: Vec<String>,
    /// The namespace the gate is installed in: its own PodDisruptionBudget
    /// never holds the update.
    #[arg(
        long,
        default_value = "preflight-gate",
        env = "PREFLIGHT_GATE_NAMESPACE"
    )]
    pub namespace: String,
    #[command(flatten)]
    pub alerts: AlertArgs,
}

#[derive(Debug, Args)]
pub struct FleetArgs {
    /// Target release: a version (looked up in each ClusterVersion's
    /// availableUpdates and conditionalUpdates) or a release image pullspec.
    #[arg(long, env = "PREFLIGHT_GATE_TO")]
    pub to: String,
    /// The clusters: each a snapshot (a directory, a must-gather archive or
    /// one YAML or JSON file, as `check --snapshot` reads it) or a
    /// kubeconfig (a file of kind Config, read with its current context).
    #[arg(value_name = "SNAPSHOT_OR_KUBECONFIG", required = true)]
    pub clusters: Vec<PathBuf>,
    /// Report format: a table, JSON (docs/fleet.md), or one self-contained
    /// HTML page.
    #[arg(short, long, value_enum, default_value_t = crate::report::fleet::Format::Table, env = "PREFLIGHT_GATE_OUTPUT")]
    pub output: crate::report::fleet::Format,
    /// Clusters judged at once; by default the number of CPUs.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..), env = "PREFLIGHT_GATE_JOBS")]
    pub jobs: Option<u16>,
    /// The time to judge every cluster at (RFC 3339), as `check --now`.
    #[arg(long, env = "PREFLIGHT_GATE_NOW")]
    pub now: Option<jiff::Timestamp>,
    /// Names whose failures to accept as warnings in every cluster
    /// (comma-separated), as `check --accept`; a name no result of a
    /// cluster carries changes nothing there.
    #[arg(long, value_delimiter = ',', env = "PREFLIGHT_GATE_ACCEPT")]
    pub accept: Vec<String>,
    /// The end of the maintenance window every update must fit in (RFC
    /// 3339), as `check --window-end`: a cluster whose plan ends past it at
    /// its P90 is blocked by MaintenanceWindow.
    #[arg(long, value_name = "RFC3339", env = "PREFLIGHT_GATE_WINDOW_END")]
    pub window_end: Option<String>,
    #[command(flatten)]
    pub limits: LimitsArgs,
    /// Checks whose errors only warn (comma-separated), as the gate's
    /// --fail-open-checks.
    #[arg(long, value_delimiter = ',', env = "PREFLIGHT_GATE_FAIL_OPEN_CHECKS")]
    pub fail_open_checks: Vec<String>,
    /// The namespace the gate is installed in: its own PodDisruptionBudget
    /// never holds the update.
    #[arg(
        long,
        default_value = "preflight-gate",
        env = "PREFLIGHT_GATE_NAMESPACE"
    )]
    pub namespace: String,
}

/// Where alerts are read from, for `check` and the controller alike.
#[derive(Debug, Args)]
#[command(next_help_heading = "Alerts")]
// The flags' help quotes URLs as a terminal prints them.
#[allow(rustdoc::bare_urls)]
pub struct AlertArgs {
    /// Prometheus or Thanos querier to read alerts from (its base URL), e.g.
    /// https://thanos-querier.openshift-monitoring.svc:9091 in an OpenShift
    /// cluster; for `check`, it replaces any alerts.json of the snapshot.
    /// An unreachable querier makes the alert checks Errors.
    #[arg(long, env = "PREFLIGHT_GATE_PROMETHEUS_URL")]
    pub prometheus_url: Option<String>,
    /// File holding a bearer token for the querier (in a pod, the
    /// ServiceAccount's token file).
    #[arg(
        long,
        requires = "prometheus_url",
        env = "PREFLIGHT_GATE_PROMETHEUS_TOKEN_FILE"
    )]
    pub prometheus_token_file: Option<PathBuf>,
    /// CA bundle (PEM) for the querier's serving certificate, besides the
    /// system's roots (in an OpenShift pod, the service CA's
    /// service-ca.crt beside the token).
    #[arg(
        long,
        requires = "prometheus_url",
        env = "PREFLIGHT_GATE_PROMETHEUS_CA"
    )]
    pub prometheus_ca: Option<PathBuf>,
    /// Namespaces whose alerts count besides the platform's
    /// (comma-separated names, or globs with `*`). An alert counts when it
    /// has no namespace, or one of openshift-*, kube-*, default or these;
    /// any other namespace's (a tenant's rule) is left out and counted, so
    /// that no tenant can block the cluster's update.
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = alert_namespace,
        env = "PREFLIGHT_GATE_ALERT_NAMESPACES"
    )]
    pub alert_namespaces: Vec<String>,
}

/// One of `--trusted-releases`: a release named by its digest, never a
/// repository or a tag.
fn trusted_release(value: &str) -> Result<String, String> {
    let value = value.trim();
    if crate::model::release::ReleaseKey::from_image(value).is_digest() {
        Ok(value.to_owned())
    } else {
        Err(format!(
            "{value:?} is not a release named by its digest (repository@sha256:<digest>): a repository or a tag trusts whatever is pushed under it"
        ))
    }
}

/// One of `--alert-namespaces`: a namespace or a glob of one.
fn alert_namespace(value: &str) -> Result<String, String> {
    crate::view::alerts::AlertNamespaces::new(&[value.to_owned()])?;
    Ok(value.trim().to_owned())
}

impl AlertArgs {
    /// The namespaces whose alerts count.
    pub fn namespaces(&self) -> crate::view::alerts::AlertNamespaces {
        // Each was checked as it was parsed.
        crate::view::alerts::AlertNamespaces::new(&self.alert_namespaces).unwrap_or_default()
    }

    /// The alert source, when one is given.
    pub fn source(&self) -> Option<crate::cluster::prometheus::Prometheus> {
        self.prometheus_url
            .as_ref()
            .map(|url| crate::cluster::prometheus::Prometheus {
                url: url.clone(),
                token_file: self.prometheus_token_file.clone(),
                ca_file: self.prometheus_ca.clone(),
            })
    }
}

impl PolicyArgs {
    /// How results count, for the runs' status.
    pub fn exemptions(&self) -> crate::model::standing::Exemptions {
        crate::model::standing::Exemptions::fail_open(self.fail_open_checks.iter().cloned())
    }

    pub fn policy(&self) -> crate::admission::Policy {
        crate::admission::Policy {
            on_pending: self.on_pending,
            honor_desired_update_force: self.honor_desired_update_force,
            max_result_age: self.max_result_age,
            fail_open_checks: self.fail_open_checks.iter().cloned().collect(),
            retry_after: self.retry_after,
            require_distinct_approver: self.require_distinct_approver,
            max_override_duration: self.max_override_duration,
            max_window_ahead: self.max_window_ahead,
            // Read from the cluster by `serve`.
            accept_risks_field: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobs_namespace(args: &[&str]) -> String {
        let cli = Cli::try_parse_from(["preflight-gate", "serve"].iter().chain(args)).unwrap();
        let Command::Serve(serve) = cli.command else {
            unreachable!()
        };
        let settings = serve.controller.settings(Default::default());
        settings.jobs.unwrap().namespace
    }

    /// Installed elsewhere (OLM's suggested namespace, a namespace of the
    /// administrator's choosing), the Jobs run beside the gate, where its
    /// Role lets it make them.
    #[test]
    fn check_jobs_run_in_the_gates_own_namespace_unless_told_otherwise() {
        assert_eq!(jobs_namespace(&[]), "preflight-gate");
        assert_eq!(
            jobs_namespace(&["--namespace", "openshift-preflight-gate"]),
            "openshift-preflight-gate"
        );
        assert_eq!(
            jobs_namespace(&["--namespace", "a", "--jobs-namespace", "b"]),
            "b"
        );
    }

    /// Only a digest is trusted without a signature, and nothing by
    /// default: a repository is refused at start, with why.
    #[test]
    fn trusted_releases_are_digests_and_none_by_default() {
        let trusted = |args: &[&str]| {
            Cli::try_parse_from(["preflight-gate", "serve"].iter().chain(args)).map(|cli| {
                let Command::Serve(serve) = cli.command else {
                    unreachable!()
                };
                serve.controller.trusted_releases
            })
        };
        assert_eq!(trusted(&[]).unwrap(), Vec::<String>::new());
        let digest = "quay.io/openshift-release-dev/ocp-release@sha256:aa";
        assert_eq!(trusted(&["--trusted-releases", digest]).unwrap(), [digest]);
        for refused in [
            "quay.io/openshift-release-dev/ocp-release",
            "quay.io/openshift-release-dev/ocp-release:4.16.3",
        ] {
            let error =
                trusted(&["--trusted-releases", &format!("{digest},{refused}")]).unwrap_err();
            assert_eq!(error.exit_code(), 2);
            assert!(
                error
                    .to_string()
                    .contains("is not a release named by its digest"),
                "{error}"
            );
        }
    }

    #[test]
    fn alert_namespaces_are_names_or_globs() {
        let cli = Cli::try_parse_from([
            "preflight-gate",
            "check",
            "--to",
            "4.15.3",
            "--alert-namespaces",
            "storage-*,shop",
        ])
        .unwrap();
        let Command::Check(check) = cli.command else {
            unreachable!()
        };
        assert_eq!(
            check.alerts.namespaces().describe(),
            "openshift-*, kube-*, default, storage-*, shop"
        );
        let refused =
            Cli::try_parse_from(["preflight-gate", "serve", "--alert-namespaces", "Shop"])
                .unwrap_err();
        assert!(
            refused.to_string().contains("is not a namespace"),
            "{refused}"
        );
    }
}
