//! Command-line flags for the example gateway, with kube-apiserver's names and
//! spf13/pflag's syntax and wording, on `clap` (derive), plus the `--service-endpoints`
//! file loader.
//!
//! [`GatewayFlags`] declares the flags (to add one: a field there, a field in
//! [`GatewayOptions`], one line in [`GatewayOptions::parse`]). Accepted syntax, as in pflag:
//! `--name=value` and `--name value`; `--flag` and `--flag=true|false` for booleans (a bool
//! never takes the next argument); shorthands such as `-v 2`, `-v=2` and `-v2`; `_`
//! written for `-` in names; `--` ends the flags; the last use of a flag wins. List flags
//! accept comma lists and repeats: the first use replaces the default and later uses
//! append. Durations are Go's (`1m30s`). `--help` and `-h` give [`FlagError::Help`].
//!
//! clap parses; [`FlagError`] words its failures as pflag does (`unknown flag: --foo`,
//! `invalid argument "5x" for "--secure-port" flag: ...`), and [`usage`] lays the flags
//! out as pflag's usage does, from the same declarations.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser};
use kube_aggregator::aggregator::OutlierDetection;
use kube_aggregator::audit::{WebhookConfig, WebhookMode};
use kube_aggregator_kube::LeaseTiming;

/// A flag parsing failure. Its `Display` is one line that names the flag and the problem,
/// in pflag's wording where pflag has one (`unknown flag: --foo`,
/// `invalid argument "5x" for "--secure-port" flag: ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FlagError {
    /// `--help` or `-h` was given. Print the usage and exit 0.
    Help,
    /// The command line is invalid. Print the message and exit 2.
    Invalid(String),
}

impl FlagError {
    /// The exit status a command-line program should use: 0 for help, 2 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            FlagError::Help => 0,
            FlagError::Invalid(_) => 2,
        }
    }
}

impl fmt::Display for FlagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlagError::Help => f.write_str("flag: help requested"),
            FlagError::Invalid(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for FlagError {}

// ---- Value parsers: Go's parsing and its error wording --------------------------------

/// Go's strconv wording for an integer that failed to parse.
fn int_error(s: &str) -> String {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    let kind = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        "value out of range"
    } else {
        "invalid syntax"
    };
    format!("strconv.ParseInt: parsing {s:?}: {kind}")
}

fn int<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.parse().map_err(|_| int_error(s))
}

/// A float as Go's `strconv.ParseFloat` reads it, with its wording for a bad one.
fn float(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .map_err(|_| format!("strconv.ParseFloat: parsing {s:?}: invalid syntax"))
}

/// The spellings Go's `strconv.ParseBool` accepts.
fn go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("strconv.ParseBool: parsing {s:?}: invalid syntax")),
    }
}

fn ip(s: &str) -> Result<IpAddr, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("failed to parse IP: {s:?}"))
}

/// A required file or directory: empty is rejected.
fn path(s: &str) -> Result<PathBuf, String> {
    if s.is_empty() {
        return Err("must not be empty".to_owned());
    }
    Ok(PathBuf::from(s))
}

/// An optional file or directory: empty means unset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionalPath(pub Option<PathBuf>);

fn optional_path(s: &str) -> Result<OptionalPath, String> {
    Ok(OptionalPath((!s.is_empty()).then(|| PathBuf::from(s))))
}

/// One occurrence of a list flag: pflag's CSV reading, where an empty value is an empty
/// list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Csv(pub Vec<String>);

fn csv(s: &str) -> Result<Csv, String> {
    Ok(Csv(if s.is_empty() {
        Vec::new()
    } else {
        s.split(',').map(str::to_owned).collect()
    }))
}

fn flatten(occurrences: &[Csv]) -> Vec<String> {
    occurrences
        .iter()
        .flat_map(|c| c.0.iter().cloned())
        .collect()
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s)
}

fn go_duration(s: &str) -> Result<GoDuration, String> {
    let n = parse_signed_duration(s)?;
    i64::try_from(n)
        .map(GoDuration)
        .map_err(|_| format!("time: invalid duration {s:?}"))
}

// ---- The flags ------------------------------------------------------------------------

/// The gateway's flags as clap declares them, in the order usage lists them. Each
/// `value_name` is the type pflag shows (`int`, `string`, `duration`, `ip`, `strings`;
/// `bool` is not shown); the defaults are written as on the command line.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "gateway",
    no_binary_name = true,
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true
)]
#[rustfmt::skip]
pub struct GatewayFlags {
    /// The IP address on which to listen for the --secure-port port.
    #[arg(verbatim_doc_comment, long, value_name = "ip", default_value = "0.0.0.0", value_parser = ip)]
    bind_address: IpAddr,
    /// The port on which to serve HTTPS with authentication and authorization; 0 picks a free port.
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "6443", value_parser = int::<u16>)]
    secure_port: u16,
    /// File containing the PEM serving certificate, followed by any intermediates.
    #[arg(verbatim_doc_comment, long, value_name = "string", value_parser = path)]
    tls_cert_file: Option<PathBuf>,
    /// File containing the PEM private key matching --tls-cert-file.
    #[arg(verbatim_doc_comment, long, value_name = "string", value_parser = path)]
    tls_private_key_file: Option<PathBuf>,
    /// PEM bundle of CAs whose client certificates authenticate users (CN = user, O = groups).
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "", value_parser = optional_path)]
    client_ca_file: OptionalPath,
    /// If set, the file that will be used to secure the secure port of the API server via token authentication.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "", value_parser = optional_path)]
    token_auth_file: OptionalPath,
    /// Enables anonymous requests to the secure port. Requests that are not rejected by another authentication method are treated as anonymous requests (system:anonymous, group system:unauthenticated).
    #[arg(verbatim_doc_comment, long, value_name = "bool", default_value = "true", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_bool)]
    anonymous_auth: bool,
    /// Root certificate bundle to use to verify client certificates on incoming requests before trusting usernames in headers specified by --requestheader-username-headers.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "", value_parser = optional_path)]
    requestheader_client_ca_file: OptionalPath,
    /// List of client certificate common names to allow to provide usernames in headers specified by --requestheader-username-headers. If empty, any client certificate validated by the authorities in --requestheader-client-ca-file is allowed.
    #[arg(verbatim_doc_comment, long, value_name = "strings", default_value = "", value_parser = csv)]
    requestheader_allowed_names: Vec<Csv>,
    /// List of request headers to inspect for usernames. X-Remote-User is common.
    #[arg(verbatim_doc_comment, long, value_name = "strings", default_value = "", value_parser = csv)]
    requestheader_username_headers: Vec<Csv>,
    /// List of request headers to inspect for UIDs. X-Remote-Uid is suggested.
    #[arg(verbatim_doc_comment, long, value_name = "strings", default_value = "", value_parser = csv)]
    requestheader_uid_headers: Vec<Csv>,
    /// List of request headers to inspect for groups. X-Remote-Group is suggested.
    #[arg(verbatim_doc_comment, long, value_name = "strings", default_value = "", value_parser = csv)]
    requestheader_group_headers: Vec<Csv>,
    /// List of request header prefixes to inspect. X-Remote-Extra- is suggested.
    #[arg(verbatim_doc_comment, long, value_name = "strings", default_value = "", value_parser = csv)]
    requestheader_extra_headers_prefix: Vec<Csv>,
    /// File with webhook configuration for token authentication in kubeconfig format.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "", value_parser = optional_path)]
    authentication_token_webhook_config_file: OptionalPath,
    /// The duration to cache responses from the webhook token authenticator.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "2m", value_parser = duration)]
    authentication_token_webhook_cache_ttl: Duration,
    /// PEM client certificate the gateway presents to extension API servers.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "", value_parser = optional_path)]
    proxy_client_cert_file: OptionalPath,
    /// PEM private key for --proxy-client-cert-file.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "", value_parser = optional_path)]
    proxy_client_key_file: OptionalPath,
    /// Directory of APIService manifests (YAML or JSON) to serve, re-read every --apiservice-dir-poll-interval.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "", value_parser = optional_path)]
    apiservice_dir: OptionalPath,
    /// kubeconfig file pointing at the 'core' kubernetes server: APIServices, Services and EndpointSlices are watched there. Without it, a gateway in a pod uses its service account (in-cluster configuration). --apiservice-dir and --service-endpoints take precedence.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "", value_parser = optional_path)]
    kubeconfig: OptionalPath,
    /// Turns on aggregator routing requests to endpoints IP rather than cluster IP.
    #[arg(verbatim_doc_comment, long, value_name = "bool", default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_bool)]
    enable_aggregator_routing: bool,
    /// Directory of tenants served under /clusters/<name>/: each subdirectory <name> holds that tenant's APIService manifests, re-read every --apiservice-dir-poll-interval. Not a kube-apiserver flag.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "", value_parser = optional_path)]
    tenant_dir: OptionalPath,
    /// How a tenant's requests reach its extension API servers: header (the /clusters/<name> prefix removed, the tenant in X-Kubernetes-Cluster) or path-prefix (the path as the client sent it). Not a kube-apiserver flag.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "header")]
    tenant_forwarding: String,
    /// YAML or JSON list mapping each Service (namespace, name, port) to the host:port to dial. Without it, Services are found through DNS as <name>.<namespace>.svc.<cluster-domain>.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "", value_parser = optional_path)]
    service_endpoints: OptionalPath,
    /// The cluster's DNS domain, in which Services are looked up when --service-endpoints is not given. Not a kube-apiserver flag (kubelet's name).
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "cluster.local")]
    cluster_domain: String,
    /// On one CPU, yield to whatever else is runnable before the runtime sleeps: cheaper when a busy process shares the CPU (a backend pinned beside the gateway), 0.6-2.5% dearer per request when the gateway is alone on it. Not a kube-apiserver flag.
    #[arg(verbatim_doc_comment, long, value_name = "bool", default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_bool)]
    yield_before_park: bool,
    /// Failures in a row (a connection or TLS failure, or a 5xx answer) after which an endpoint of a Service with several (--enable-aggregator-routing) is ejected from its requests until a probe passes. Not a kube-apiserver flag (Envoy's consecutive_5xx).
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "5", value_parser = int::<u32>)]
    outlier_consecutive_failures: u32,
    /// How long an endpoint's first ejection lasts; each further one lasts as many times longer, up to --outlier-max-ejection-time. Not a kube-apiserver flag.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "30s", value_parser = duration)]
    outlier_base_ejection_time: Duration,
    /// The longest ejection of an endpoint. Not a kube-apiserver flag.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "5m0s", value_parser = duration)]
    outlier_max_ejection_time: Duration,
    /// At most this percentage of a Service's endpoints is ejected at once (rounded down). Not a kube-apiserver flag.
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "50", value_parser = int::<u8>)]
    outlier_max_ejection_percent: u8,
    /// Start a leader election client and gain leadership before writing APIService status to the cluster (--kubeconfig or in-cluster): of several replicas, only the one holding the Lease writes. With false, every replica writes, as every kube-apiserver does.
    #[arg(verbatim_doc_comment, long, value_name = "bool", default_value = "true", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_bool)]
    leader_elect: bool,
    /// The duration that non-leader candidates will wait after observing a leadership renewal until attempting to acquire leadership of a led but unrenewed leader slot. This is effectively the maximum duration that a leader can be stopped before it is replaced by another candidate. This is only applicable if leader election is enabled.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "15s", value_parser = duration)]
    leader_elect_lease_duration: Duration,
    /// The interval between attempts by the acting master to renew a leadership slot before it stops leading. This must be less than the lease duration. This is only applicable if leader election is enabled.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "10s", value_parser = duration)]
    leader_elect_renew_deadline: Duration,
    /// The duration the clients should wait between attempting acquisition and renewal of a leadership. This is only applicable if leader election is enabled.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "2s", value_parser = duration)]
    leader_elect_retry_period: Duration,
    /// The name of the Lease that is used for locking during leader election.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "kube-aggregator")]
    leader_elect_resource_name: String,
    /// The namespace of the Lease that is used for locking during leader election. Empty: the gateway's own namespace in a pod, kube-system elsewhere.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "")]
    leader_elect_resource_namespace: String,
    /// Ordered list of plug-ins to authorize requests: AlwaysAllow, AlwaysDeny, Webhook.
    #[arg(verbatim_doc_comment, long, value_name = "strings", default_value = "AlwaysAllow", value_parser = csv)]
    authorization_mode: Vec<Csv>,
    /// File with webhook configuration in kubeconfig format, used with --authorization-mode=Webhook.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "", value_parser = optional_path)]
    authorization_webhook_config_file: OptionalPath,
    /// The duration to cache 'authorized' responses from the webhook authorizer.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "5m", value_parser = duration)]
    authorization_webhook_cache_authorized_ttl: Duration,
    /// The duration to cache 'unauthorized' responses from the webhook authorizer.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "30s", value_parser = duration)]
    authorization_webhook_cache_unauthorized_ttl: Duration,
    /// The API version of the authorization.k8s.io SubjectAccessReview to send to and expect from the webhook.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "v1beta1")]
    authorization_webhook_version: String,
    /// File with apiserver tracing configuration (apiserver.config.k8s.io TracingConfiguration: endpoint, samplingRatePerMillion). Needs the otlp feature.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "", value_parser = optional_path)]
    tracing_config_file: OptionalPath,
    /// Path to the file with the audit policy (audit.k8s.io/v1 Policy, YAML or JSON).
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "", value_parser = optional_path)]
    audit_policy_file: OptionalPath,
    /// If set, every audited request is written to this file; '-' means standard out.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "", value_parser = optional_path)]
    audit_log_path: OptionalPath,
    /// The most days old audit log files are kept, by the time in their name. 0 keeps them whatever their age.
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "366", value_parser = int::<i64>)]
    audit_log_maxage: i64,
    /// The most old audit log files kept. 0 keeps them all.
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "100", value_parser = int::<i64>)]
    audit_log_maxbackup: i64,
    /// The size in megabytes the audit log file reaches before it is rotated. 0 never rotates it.
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "100", value_parser = int::<i64>)]
    audit_log_maxsize: i64,
    /// How audit events are written: "json" (one audit.k8s.io/v1 Event per line) or "legacy" (one line of text). Known formats are legacy,json.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "json")]
    audit_log_format: String,
    /// Path to a kubeconfig formatted file that defines the audit webhook configuration.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "", value_parser = optional_path)]
    audit_webhook_config_file: OptionalPath,
    /// Strategy for sending audit events. Blocking indicates sending events should block server responses. Batch causes the backend to buffer and write events asynchronously. Known modes are batch,blocking,blocking-strict.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "batch")]
    audit_webhook_mode: String,
    /// The size of the buffer to store events before batching and writing. Only used in batch mode.
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "10000", value_parser = int::<i64>)]
    audit_webhook_batch_buffer_size: i64,
    /// The maximum size of a batch. Only used in batch mode.
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "400", value_parser = int::<i64>)]
    audit_webhook_batch_max_size: i64,
    /// The amount of time to wait before force writing the batch that hadn't reached the max size. Only used in batch mode.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "30s", value_parser = duration)]
    audit_webhook_batch_max_wait: Duration,
    /// Whether batching throttling is enabled. Only used in batch mode.
    #[arg(verbatim_doc_comment, long, value_name = "bool", default_value = "true", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_bool)]
    audit_webhook_batch_throttle_enable: bool,
    /// Maximum average number of batches per second. Only used in batch mode.
    #[arg(verbatim_doc_comment, long, value_name = "float32", default_value = "10", value_parser = float)]
    audit_webhook_batch_throttle_qps: f64,
    /// Maximum number of requests sent at the same moment if ThrottleQPS was not utilized before. Only used in batch mode.
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "15", value_parser = int::<i64>)]
    audit_webhook_batch_throttle_burst: i64,
    /// The amount of time to wait before retrying the first failed request.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "10s", value_parser = duration)]
    audit_webhook_initial_backoff: Duration,
    /// API group and version used for serializing audit events written to webhook.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "audit.k8s.io/v1")]
    audit_webhook_version: String,
    /// How often every APIService's availability is re-checked.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "30s", value_parser = duration)]
    availability_resync_period: Duration,
    /// Timeout of one availability (discovery) check.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "5s", value_parser = duration)]
    discovery_check_timeout: Duration,
    /// How many availability checks in a row must fail softly (timed out, 5xx, 429) before an available APIService turns Available=False; until then it stays available, its condition saying it is degraded. 1 flips on every failed check, as kube-apiserver. Not a kube-apiserver flag.
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "3", value_parser = int::<u32>)]
    availability_soft_failure_threshold: u32,
    /// How long after a soft failure an APIService is checked again, doubling per failure up to 30s, so a struggling extension server is not probed harder. Not a kube-apiserver flag.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "5s", value_parser = duration)]
    availability_degraded_recheck: Duration,
    /// How often --apiservice-dir is scanned for changes.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "2s", value_parser = duration)]
    apiservice_dir_poll_interval: Duration,
    /// How often the certificate and CA files (--tls-cert-file, --tls-private-key-file, --client-ca-file, --requestheader-client-ca-file, --proxy-client-cert-file, --proxy-client-key-file) are checked for changes; changed files are loaded without a restart.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "1m0s", value_parser = duration)]
    certificate_reload_interval: Duration,
    /// Number for the log level verbosity.
    #[arg(verbatim_doc_comment, short = 'v', long = "v", value_name = "int", default_value = "0", value_parser = int::<u8>)]
    v: u8,
    /// Offer HTTP/2 to clients and extension API servers.
    #[arg(verbatim_doc_comment, long, value_name = "bool", default_value = "true", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_bool)]
    enable_http2: bool,
    /// An optional field indicating the duration a handler must keep a request open before timing it out. This is the default request timeout for requests but may be overridden by the ?timeout= query parameter.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "1m0s", value_parser = go_duration)]
    request_timeout: GoDuration,
    /// An optional field indicating the minimum number of seconds a handler must keep a request open before timing it out. Currently only honored by the watch request handler, which picks a randomized value above this number as the connection timeout, to spread out load.
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "1800", value_parser = int::<i64>)]
    min_request_timeout: i64,
    /// This and --max-mutating-requests-inflight are summed to determine the server's total concurrency limit. This flag is the maximum number of non-mutating requests in flight at a given time. 0 means no limit.
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "400", value_parser = int::<i64>)]
    max_requests_inflight: i64,
    /// The maximum number of mutating requests in flight at a given time. 0 means no limit.
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "200", value_parser = int::<i64>)]
    max_mutating_requests_inflight: i64,
    /// The maximum number of requests in flight for any one APIService (group/version), so one slow extension server cannot take every slot. 0 means no limit. Not a kube-apiserver flag.
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "0", value_parser = int::<i64>)]
    max_requests_inflight_per_apiservice: i64,
    /// The limit that the server gives to clients for the maximum number of streams in an HTTP/2 connection. Zero means to use the default (250).
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "0", value_parser = int::<u32>)]
    http2_max_streams_per_connection: u32,
    /// help for gateway
    #[arg(verbatim_doc_comment, short = 'h', long, hide = true)]
    help: bool,
    /// Arguments that are not flags: the gateway takes none.
    #[arg(verbatim_doc_comment, hide = true)]
    args: Vec<String>,
}

/// Flags that must be given.
const REQUIRED: &[&str] = &["tls-cert-file", "tls-private-key-file"];

/// What [`parse_flags`] read, and which flags the command line set.
#[derive(Debug, Clone)]
pub struct ParsedFlags {
    /// The values, defaults filled in.
    pub flags: GatewayFlags,
    matches: ArgMatches,
}

impl ParsedFlags {
    /// Whether flag `name` (its long name, `authorization-mode`) appeared on the command
    /// line.
    pub fn changed(&self, name: &str) -> bool {
        let id = name.replace('-', "_");
        self.matches.try_get_raw(&id).is_ok_and(|v| v.is_some())
            && self.matches.value_source(&id) == Some(ValueSource::CommandLine)
    }
}

impl GatewayFlags {
    /// `--authorization-mode`, every occurrence's list in order.
    pub fn authorization_mode(&self) -> Vec<String> {
        flatten(&self.authorization_mode)
    }
}

/// Parses `args` (without the program name: pass `std::env::args().skip(1)`).
///
/// # Errors
/// [`FlagError::Help`] for `--help`/`-h`. Otherwise [`FlagError::Invalid`], in pflag's
/// words, for an unknown flag, a missing or invalid value, a positional argument, or a
/// missing required flag.
pub fn parse_flags(args: impl IntoIterator<Item = String>) -> Result<ParsedFlags, FlagError> {
    let args = normalize(args.into_iter().collect());
    let mut command = GatewayFlags::command();
    let matches = command
        .try_get_matches_from_mut(&args)
        .map_err(|e| pflag_error(&command, &e, &args))?;
    let flags =
        GatewayFlags::from_arg_matches(&matches).map_err(|e| pflag_error(&command, &e, &args))?;
    if flags.help {
        return Err(FlagError::Help);
    }
    if !flags.args.is_empty() {
        let quoted: Vec<String> = flags.args.iter().map(|a| format!("{a:?}")).collect();
        return Err(FlagError::Invalid(format!(
            "\"gateway\" does not take any arguments, got [{}]",
            quoted.join(" ")
        )));
    }
    let parsed = ParsedFlags { flags, matches };
    let missing: Vec<&str> = REQUIRED
        .iter()
        .copied()
        .filter(|name| !parsed.changed(name))
        .collect();
    if !missing.is_empty() {
        return Err(FlagError::Invalid(format!(
            "required flag(s) \"{}\" not set",
            missing.join("\", \"")
        )));
    }
    Ok(parsed)
}

/// pflag's normalization: `_` in a long flag's name reads as `-`.
fn normalize(args: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut flags_ended = false;
    for arg in args {
        if flags_ended || arg == "--" {
            flags_ended = true;
            out.push(arg);
            continue;
        }
        match arg
            .strip_prefix("--")
            .filter(|l| !l.starts_with(['-', '=']))
        {
            Some(long) => {
                let (name, value) = long
                    .split_once('=')
                    .map_or((long, None), |(n, v)| (n, Some(v)));
                let name = name.replace('_', "-");
                out.push(match value {
                    Some(v) => format!("--{name}={v}"),
                    None => format!("--{name}"),
                });
            }
            None => out.push(arg),
        }
    }
    out
}

/// The flag an error's context names (`--secure-port <int>`, `-v <int>`): its long name
/// and shorthand.
fn flag_of(command: &clap::Command, rendered: &str) -> Option<(String, Option<char>)> {
    let token = rendered.split([' ', '=', '[']).next()?;
    let arg = if let Some(long) = token.strip_prefix("--") {
        command
            .get_arguments()
            .find(|a| a.get_long() == Some(long))?
    } else {
        let c = token.strip_prefix('-')?.chars().next()?;
        command.get_arguments().find(|a| a.get_short() == Some(c))?
    };
    Some((arg.get_long()?.to_owned(), arg.get_short()))
}

/// The name as pflag prints it in errors: `--name` or `-v, --v`.
fn display_name(long: &str, short: Option<char>) -> String {
    match short {
        Some(c) => format!("-{c}, --{long}"),
        None => format!("--{long}"),
    }
}

/// A clap error in pflag's words.
fn pflag_error(command: &clap::Command, e: &clap::Error, args: &[String]) -> FlagError {
    let context = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) => v.first().cloned(),
        _ => None,
    };
    let arg = context(ContextKind::InvalidArg).unwrap_or_default();
    let message = match e.kind() {
        ErrorKind::UnknownArgument if arg.starts_with("---") || arg.starts_with("--=") => {
            format!("bad flag syntax: {arg}")
        }
        ErrorKind::UnknownArgument if arg.starts_with("--") => {
            let name = arg.split('=').next().unwrap_or(&arg);
            format!("unknown flag: {name}")
        }
        ErrorKind::UnknownArgument if arg.starts_with('-') => {
            // The cluster as typed: the last argument holding the unknown letter.
            let c = arg.chars().nth(1).unwrap_or('-');
            let cluster = args
                .iter()
                .rev()
                .find(|a| !a.starts_with("--") && a.starts_with('-') && a.contains(c))
                .cloned()
                .unwrap_or_else(|| arg.clone());
            format!("unknown shorthand flag: '{c}' in {cluster}")
        }
        ErrorKind::ValueValidation => {
            let value = context(ContextKind::InvalidValue).unwrap_or_default();
            let reason = std::error::Error::source(e).map_or_else(String::new, |s| s.to_string());
            match flag_of(command, &arg) {
                Some((long, short)) => format!(
                    "invalid argument {value:?} for {:?} flag: {reason}",
                    display_name(&long, short)
                ),
                None => format!("invalid argument {value:?}: {reason}"),
            }
        }
        ErrorKind::InvalidValue | ErrorKind::NoEquals => match flag_of(command, &arg) {
            // A value-taking flag at the end, as typed.
            Some((long, short)) => match args.last() {
                Some(last)
                    if !last.starts_with("--") && short.is_some_and(|c| last.contains(c)) =>
                {
                    format!(
                        "flag needs an argument: '{}' in {last}",
                        short.unwrap_or('-')
                    )
                }
                _ => format!("flag needs an argument: --{long}"),
            },
            None => format!("flag needs an argument: {arg}"),
        },
        _ => {
            // Anything else: clap's own first line, without its `error: ` prefix.
            let text = e.render().to_string();
            let line = text.lines().next().unwrap_or_default();
            line.strip_prefix("error: ").unwrap_or(line).to_owned()
        }
    };
    FlagError::Invalid(message)
}

/// The gateway's usage text, for `--help`, in pflag's layout: one line per flag with its
/// type and non-empty default.
pub fn usage() -> String {
    let command = GatewayFlags::command();
    let flags: Vec<&clap::Arg> = command
        .get_arguments()
        .filter(|a| !a.is_hide_set() && a.get_long().is_some())
        .collect();
    let type_of = |a: &clap::Arg| -> String {
        a.get_value_names()
            .and_then(|n| n.first())
            .map_or_else(String::new, |n| n.to_string())
    };
    let lefts: Vec<String> = flags
        .iter()
        .map(|a| {
            let short = a
                .get_short()
                .map_or("    ".to_owned(), |c| format!("-{c}, "));
            let ty = match type_of(a).as_str() {
                "bool" | "" => String::new(),
                t => format!(" {t}"),
            };
            format!("  {short}--{}{ty}", a.get_long().unwrap_or_default())
        })
        .collect();
    let width = lefts.iter().map(String::len).max().unwrap_or(0) + 3;
    let mut out = "Usage:\n  gateway [flags]\n  gateway check [flags]   check every APIService once and the proxy client certificate, print what is wrong and how to fix it, and exit (0: all passed, 1: one failed)\n\nFlags:\n".to_owned();
    for (arg, left) in flags.iter().zip(lefts) {
        let default = arg
            .get_default_values()
            .first()
            .map_or_else(String::new, |d| d.to_string_lossy().into_owned());
        let default = match (default.as_str(), type_of(arg).as_str()) {
            // pflag leaves zero-value defaults out.
            ("", _) | ("false", "bool") | ("0", "int") | ("0s", "duration") => String::new(),
            (d, "string") => format!(" (default {d:?})"),
            (d, "strings") => format!(" (default [{d}])"),
            (d, _) => format!(" (default {d})"),
        };
        let long = arg.get_long().unwrap_or_default();
        let required = if REQUIRED.contains(&long) {
            " (required)"
        } else {
            ""
        };
        let help = arg.get_help().map_or_else(String::new, |h| h.to_string());
        out.push_str(&format!("{left:width$}{help}{default}{required}\n"));
    }
    out
}

/// Parses a Go `time.ParseDuration` string: decimal numbers with optional fraction, each
/// followed by a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), e.g. `30s`, `1h30m`, `1.5h`,
/// `.5s`; a bare `0` is allowed. Fractions below one nanosecond are truncated.
///
/// # Errors
/// Go's messages (`time: invalid duration "x"`, `time: missing unit in duration "1"`,
/// `time: unknown unit "x" in duration "1x"`); values above Go's limit (about 292 years) are
/// invalid. A negative duration is rejected because every duration flag here is a period
/// or a timeout.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let nanos = parse_signed_duration(s)?;
    if nanos < 0 {
        return Err(format!("negative duration {s:?} is not allowed"));
    }
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| format!("time: invalid duration {s:?}"))
}

/// A Go duration that may be negative (`--request-timeout` is validated after parsing, as
/// kube-apiserver does), in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoDuration(pub i64);

impl GoDuration {
    /// The duration, or `None` when negative.
    pub fn non_negative(self) -> Option<Duration> {
        u64::try_from(self.0).ok().map(Duration::from_nanos)
    }
}

/// [`parse_duration`] without the sign check, in nanoseconds.
fn parse_signed_duration(s: &str) -> Result<i128, String> {
    let invalid = || format!("time: invalid duration {s:?}");
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_digits, after) = rest.split_at(int_len);
        let (frac_digits, after) = match after.strip_prefix('.') {
            Some(frac) => frac.split_at(frac.bytes().take_while(u8::is_ascii_digit).count()),
            None => ("", after),
        };
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(invalid());
        }
        let unit_len = after
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let nanos_per_unit: u128 = match unit {
            "" => return Err(format!("time: missing unit in duration {s:?}")),
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(format!("time: unknown unit {unit:?} in duration {s:?}")),
        };
        let whole: u128 = if int_digits.is_empty() {
            0
        } else {
            int_digits.parse().map_err(|_| invalid())?
        };
        // Digits past the 18th are below a nanosecond for every unit, so they can be dropped.
        let frac_digits = &frac_digits[..frac_digits.len().min(18)];
        let frac: u128 = if frac_digits.is_empty() {
            0
        } else {
            frac_digits.parse().map_err(|_| invalid())?
        };
        let scale = 10u128.pow(u32::try_from(frac_digits.len()).map_err(|_| invalid())?);
        total = whole
            .checked_mul(nanos_per_unit)
            .and_then(|n| n.checked_add(frac * nanos_per_unit / scale))
            .and_then(|n| n.checked_add(total))
            .filter(|n| *n <= i64::MAX as u128)
            .ok_or_else(invalid)?;
        rest = after;
    }
    let total = i128::try_from(total).map_err(|_| invalid())?;
    Ok(if negative { -total } else { total })
}

/// The authorization modes the gateway implements, in the spelling of kube-apiserver's
/// `--authorization-mode`.
pub const SUPPORTED_AUTHORIZATION_MODES: &[&str] = &["AlwaysAllow", "AlwaysDeny", "Webhook"];

/// kube-apiserver modes that are valid upstream but not implemented here yet.
const KNOWN_AUTHORIZATION_MODES: &[&str] = &["ABAC", "RBAC", "Node"];

/// The example gateway's options; field docs name the flag and the default.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayOptions {
    /// `--bind-address`, default `0.0.0.0` as in kube-apiserver.
    pub bind_address: IpAddr,
    /// `--secure-port`, default 6443. 0 asks the OS for a free port.
    pub secure_port: u16,
    /// `--tls-cert-file`, required: PEM serving certificate chain.
    pub tls_cert_file: PathBuf,
    /// `--tls-private-key-file`, required: PEM key of the serving certificate.
    pub tls_private_key_file: PathBuf,
    /// `--client-ca-file`: CAs for client-certificate authentication.
    pub client_ca_file: Option<PathBuf>,
    /// `--token-auth-file`: static bearer tokens, CSV `token,user,uid,"group1,group2"`.
    pub token_auth_file: Option<PathBuf>,
    /// `--anonymous-auth`, default true as kube-apiserver.
    pub anonymous_auth: bool,
    /// `--requestheader-client-ca-file`: CAs of front proxies allowed to assert identities.
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// `--requestheader-allowed-names`: front-proxy certificate CNs; empty allows any.
    pub requestheader_allowed_names: Vec<String>,
    /// `--requestheader-username-headers`.
    pub requestheader_username_headers: Vec<String>,
    /// `--requestheader-uid-headers`.
    pub requestheader_uid_headers: Vec<String>,
    /// `--requestheader-group-headers`.
    pub requestheader_group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`.
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// `--authentication-token-webhook-config-file`: kubeconfig of the TokenReview webhook.
    pub authentication_token_webhook_config_file: Option<PathBuf>,
    /// `--authentication-token-webhook-cache-ttl`, default 2m.
    pub authentication_token_webhook_cache_ttl: Duration,
    /// `--proxy-client-cert-file`: the gateway's client certificate towards backends.
    pub proxy_client_cert_file: Option<PathBuf>,
    /// `--proxy-client-key-file`: its key. Given together with the certificate or not at all.
    pub proxy_client_key_file: Option<PathBuf>,
    /// `--apiservice-dir`: APIService manifests to serve.
    pub apiservice_dir: Option<PathBuf>,
    /// `--kubeconfig`: the cluster whose APIServices and Services are watched.
    pub kubeconfig: Option<PathBuf>,
    /// `--enable-aggregator-routing`: route to a ready endpoint, not the ClusterIP.
    pub enable_aggregator_routing: bool,
    /// `--tenant-dir`: one subdirectory of APIService manifests per tenant.
    pub tenant_dir: Option<PathBuf>,
    /// `--tenant-forwarding`, `header` (default) or `path-prefix`.
    pub tenant_forwarding: String,
    /// `--service-endpoints`: file read by [`load_service_endpoints`]; without it, DNS.
    pub service_endpoints: Option<PathBuf>,
    /// `--cluster-domain`, default `cluster.local`: where DNS finds Services.
    pub cluster_domain: String,
    /// `--yield-before-park`: on one CPU, `sched_yield` before the runtime sleeps.
    pub yield_before_park: bool,
    /// `--outlier-consecutive-failures`, `--outlier-base-ejection-time`,
    /// `--outlier-max-ejection-time`, `--outlier-max-ejection-percent`: 5, 30 s, 5 min, 50.
    pub outlier_detection: OutlierDetection,
    /// `--leader-elect`, default true: only the Lease's holder writes APIService status.
    pub leader_elect: bool,
    /// `--leader-elect-lease-duration`, `--leader-elect-renew-deadline`,
    /// `--leader-elect-retry-period`: 15 s, 10 s, 2 s.
    pub leader_elect_timing: LeaseTiming,
    /// `--leader-elect-resource-name`, default `kube-aggregator`.
    pub leader_elect_resource_name: String,
    /// `--leader-elect-resource-namespace`; empty: the pod's namespace, else `kube-system`.
    pub leader_elect_resource_namespace: String,
    /// `--authorization-mode`, default `[AlwaysAllow]`; each one of
    /// [`SUPPORTED_AUTHORIZATION_MODES`], no repeats.
    pub authorization_mode: Vec<String>,
    /// `--authorization-webhook-config-file`: kubeconfig of the SubjectAccessReview webhook.
    pub authorization_webhook_config_file: Option<PathBuf>,
    /// `--authorization-webhook-cache-authorized-ttl`, default 5m.
    pub authorization_webhook_cache_authorized_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl`, default 30s.
    pub authorization_webhook_cache_unauthorized_ttl: Duration,
    /// `--authorization-webhook-version`, `v1beta1` (kube-apiserver's default) or `v1`.
    pub authorization_webhook_version: String,
    /// `--tracing-config-file`: where traces go and how many; without it nothing is traced.
    pub tracing_config_file: Option<PathBuf>,
    /// `--audit-policy-file`: the audit policy; without it nothing is audited.
    pub audit_policy_file: Option<PathBuf>,
    /// `--audit-log-path`: where audit events go, `-` for standard output.
    pub audit_log_path: Option<PathBuf>,
    /// `--audit-log-maxage`, default 366 days; 0 keeps old files whatever their age.
    pub audit_log_maxage: u64,
    /// `--audit-log-maxbackup`, default 100; 0 keeps every old file.
    pub audit_log_maxbackup: usize,
    /// `--audit-log-maxsize`, default 100 (MiB); 0 never rotates.
    pub audit_log_maxsize: u64,
    /// `--audit-log-format`, `json` (default) or `legacy`.
    pub audit_log_format: String,
    /// `--audit-webhook-config-file`: kubeconfig of the audit webhook.
    pub audit_webhook_config_file: Option<PathBuf>,
    /// `--audit-webhook-mode`, `--audit-webhook-batch-*` and
    /// `--audit-webhook-initial-backoff`, with kube-apiserver's defaults; checked (as
    /// kube-apiserver checks them) only with `--audit-webhook-config-file`.
    pub audit_webhook: WebhookConfig,
    /// `--audit-webhook-version`: `audit.k8s.io/v1`, the one version there is.
    pub audit_webhook_version: String,
    /// `--availability-resync-period`, default 30s, greater than zero.
    pub availability_resync_period: Duration,
    /// `--discovery-check-timeout`, default 5s, greater than zero.
    pub discovery_check_timeout: Duration,
    /// `--availability-soft-failure-threshold`, default 3, at least 1: soft failures in a
    /// row before an APIService turns unavailable.
    pub availability_soft_failure_threshold: u32,
    /// `--availability-degraded-recheck`, default 5s, greater than zero.
    pub availability_degraded_recheck: Duration,
    /// `--apiservice-dir-poll-interval`, default 2s, greater than zero.
    pub apiservice_dir_poll_interval: Duration,
    /// `--certificate-reload-interval`, default 1m, greater than zero: how often the
    /// certificate and CA files are checked for changes (kube-apiserver's dynamic
    /// certificate controllers re-check theirs every minute).
    pub certificate_reload_interval: Duration,
    /// `--v` / `-v`, log verbosity, default 0.
    pub v: u8,
    /// `--enable-http2`, default true.
    pub enable_http2: bool,
    /// `--http2-max-streams-per-connection`, default 0 (250).
    pub http2_max_streams_per_connection: u32,
    /// `--request-timeout`, default 1m: the deadline of requests that are not long-running.
    pub request_timeout: Duration,
    /// `--min-request-timeout`, default 1800 s. Upstream's watch handler reads it; the
    /// gateway serves no watches of its own (proxied watches end when the extension
    /// server ends them, as upstream), so it is validated and kept for compatibility.
    pub min_request_timeout: Duration,
    /// `--max-requests-inflight`, default 400; 0 no limit.
    pub max_requests_inflight: usize,
    /// `--max-mutating-requests-inflight`, default 200; 0 no limit.
    pub max_mutating_requests_inflight: usize,
    /// `--max-requests-inflight-per-apiservice`, default 0 (no limit).
    pub max_requests_inflight_per_apiservice: usize,
}

impl GatewayOptions {
    /// Parses the gateway's arguments (without the program name) and validates them.
    ///
    /// # Errors
    /// See [`parse_flags`]. Also fails for an unknown, unsupported or repeated
    /// authorization mode, a proxy client certificate without its key (or the reverse), and a
    /// zero period or timeout.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<GatewayOptions, FlagError> {
        let f = parse_flags(args)?.flags;
        // kube-apiserver's ServerRunOptions.Validate, with its messages.
        let non_negative = |name: &str, v: i64| -> Result<usize, FlagError> {
            usize::try_from(v)
                .map_err(|_| FlagError::Invalid(format!("--{name} can not be negative value")))
        };
        // kube-apiserver's AuditLogOptions.Validate, with its messages.
        let audit_non_negative = |name: &str, v: i64| -> Result<u64, FlagError> {
            u64::try_from(v).map_err(|_| {
                FlagError::Invalid(format!("--audit-log-{name} {v} can't be a negative number"))
            })
        };
        let request_timeout = f.request_timeout.non_negative().ok_or_else(|| {
            FlagError::Invalid("--request-timeout can not be negative value".to_owned())
        })?;
        let audit_webhook = audit_webhook(&f, f.audit_webhook_config_file.0.is_some())?;
        let options = GatewayOptions {
            bind_address: f.bind_address,
            secure_port: f.secure_port,
            tls_cert_file: f.tls_cert_file.unwrap_or_default(),
            tls_private_key_file: f.tls_private_key_file.unwrap_or_default(),
            client_ca_file: f.client_ca_file.0,
            token_auth_file: f.token_auth_file.0,
            anonymous_auth: f.anonymous_auth,
            requestheader_client_ca_file: f.requestheader_client_ca_file.0,
            requestheader_allowed_names: flatten(&f.requestheader_allowed_names),
            requestheader_username_headers: flatten(&f.requestheader_username_headers),
            requestheader_uid_headers: flatten(&f.requestheader_uid_headers),
            requestheader_group_headers: flatten(&f.requestheader_group_headers),
            requestheader_extra_headers_prefix: flatten(&f.requestheader_extra_headers_prefix),
            authentication_token_webhook_config_file: f.authentication_token_webhook_config_file.0,
            authentication_token_webhook_cache_ttl: f.authentication_token_webhook_cache_ttl,
            proxy_client_cert_file: f.proxy_client_cert_file.0,
            proxy_client_key_file: f.proxy_client_key_file.0,
            apiservice_dir: f.apiservice_dir.0,
            kubeconfig: f.kubeconfig.0,
            enable_aggregator_routing: f.enable_aggregator_routing,
            tenant_dir: f.tenant_dir.0,
            tenant_forwarding: f.tenant_forwarding,
            service_endpoints: f.service_endpoints.0,
            cluster_domain: f.cluster_domain,
            yield_before_park: f.yield_before_park,
            outlier_detection: OutlierDetection {
                consecutive_failures: f.outlier_consecutive_failures,
                base_ejection_time: f.outlier_base_ejection_time,
                max_ejection_time: f.outlier_max_ejection_time,
                max_ejection_percent: f.outlier_max_ejection_percent,
            },
            leader_elect: f.leader_elect,
            leader_elect_timing: LeaseTiming {
                lease_duration: f.leader_elect_lease_duration,
                renew_deadline: f.leader_elect_renew_deadline,
                retry_period: f.leader_elect_retry_period,
            },
            leader_elect_resource_name: f.leader_elect_resource_name,
            leader_elect_resource_namespace: f.leader_elect_resource_namespace,
            authorization_mode: flatten(&f.authorization_mode),
            authorization_webhook_config_file: f.authorization_webhook_config_file.0,
            authorization_webhook_cache_authorized_ttl: f
                .authorization_webhook_cache_authorized_ttl,
            authorization_webhook_cache_unauthorized_ttl: f
                .authorization_webhook_cache_unauthorized_ttl,
            authorization_webhook_version: f.authorization_webhook_version,
            tracing_config_file: f.tracing_config_file.0,
            audit_policy_file: f.audit_policy_file.0,
            audit_log_path: f.audit_log_path.0,
            audit_log_maxage: audit_non_negative("maxage", f.audit_log_maxage)?,
            audit_log_maxbackup: audit_non_negative("maxbackup", f.audit_log_maxbackup)? as usize,
            audit_log_maxsize: audit_non_negative("maxsize", f.audit_log_maxsize)?,
            audit_log_format: f.audit_log_format,
            audit_webhook,
            audit_webhook_config_file: f.audit_webhook_config_file.0,
            audit_webhook_version: f.audit_webhook_version,
            availability_resync_period: f.availability_resync_period,
            discovery_check_timeout: f.discovery_check_timeout,
            availability_soft_failure_threshold: f.availability_soft_failure_threshold,
            availability_degraded_recheck: f.availability_degraded_recheck,
            apiservice_dir_poll_interval: f.apiservice_dir_poll_interval,
            certificate_reload_interval: f.certificate_reload_interval,
            v: f.v,
            enable_http2: f.enable_http2,
            http2_max_streams_per_connection: f.http2_max_streams_per_connection,
            request_timeout,
            min_request_timeout: Duration::from_secs(non_negative(
                "min-request-timeout",
                f.min_request_timeout,
            )? as u64),
            max_requests_inflight: non_negative("max-requests-inflight", f.max_requests_inflight)?,
            max_mutating_requests_inflight: non_negative(
                "max-mutating-requests-inflight",
                f.max_mutating_requests_inflight,
            )?,
            max_requests_inflight_per_apiservice: non_negative(
                "max-requests-inflight-per-apiservice",
                f.max_requests_inflight_per_apiservice,
            )?,
        };
        options.validate()?;
        Ok(options)
    }

    /// `--bind-address` and `--secure-port` together.
    pub fn listen_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.secure_port)
    }

    fn validate(&self) -> Result<(), FlagError> {
        let invalid = |m: String| Err(FlagError::Invalid(m));
        if self.authorization_mode.is_empty() {
            return invalid("at least one authorization-mode must be passed".to_owned());
        }
        for (i, mode) in self.authorization_mode.iter().enumerate() {
            if self.authorization_mode[..i].contains(mode) {
                return invalid(format!(
                    "authorization-mode {mode:?} has mode specified more than once"
                ));
            }
            if KNOWN_AUTHORIZATION_MODES.contains(&mode.as_str()) {
                return invalid(format!(
                    "authorization-mode {mode:?} is not supported by this gateway (supported: {})",
                    SUPPORTED_AUTHORIZATION_MODES.join(", ")
                ));
            }
            if !SUPPORTED_AUTHORIZATION_MODES.contains(&mode.as_str()) {
                return invalid(format!("authorization-mode {mode:?} is not a valid mode"));
            }
        }
        // As kube-apiserver: the webhook mode needs its configuration file.
        if self.authorization_mode.iter().any(|m| m == "Webhook")
            && self.authorization_webhook_config_file.is_none()
        {
            return invalid(
                "authorization-mode Webhook's authorization config file not passed (--authorization-webhook-config-file)"
                    .to_owned(),
            );
        }
        if !matches!(
            self.authorization_webhook_version.as_str(),
            "v1" | "v1beta1"
        ) {
            return invalid(format!(
                "--authorization-webhook-version: unsupported version {:?} (v1 or v1beta1)",
                self.authorization_webhook_version
            ));
        }
        if !matches!(self.tenant_forwarding.as_str(), "header" | "path-prefix") {
            return invalid(format!(
                "--tenant-forwarding: unsupported value {:?} (header or path-prefix)",
                self.tenant_forwarding
            ));
        }
        if self.proxy_client_cert_file.is_some() != self.proxy_client_key_file.is_some() {
            return invalid(
                "--proxy-client-cert-file and --proxy-client-key-file must be given together"
                    .to_owned(),
            );
        }
        for (name, value) in [
            (
                "availability-resync-period",
                self.availability_resync_period,
            ),
            ("discovery-check-timeout", self.discovery_check_timeout),
            (
                "availability-degraded-recheck",
                self.availability_degraded_recheck,
            ),
            (
                "apiservice-dir-poll-interval",
                self.apiservice_dir_poll_interval,
            ),
            (
                "certificate-reload-interval",
                self.certificate_reload_interval,
            ),
        ] {
            if value.is_zero() {
                return invalid(format!("--{name} must be greater than zero"));
            }
        }
        if self.audit_log_path.is_some() {
            if let Err(e) = self
                .audit_log_format
                .parse::<kube_aggregator::audit::LogFormat>()
            {
                return invalid(e.to_string());
            }
        }
        if self.audit_webhook_config_file.is_some()
            && self.audit_webhook_version != "audit.k8s.io/v1"
        {
            return invalid(format!(
                "--audit-webhook-version {}: invalid group version, allowed versions are [\"audit.k8s.io/v1\"]",
                self.audit_webhook_version
            ));
        }
        if self.availability_soft_failure_threshold == 0 {
            return invalid("--availability-soft-failure-threshold must be at least 1".to_owned());
        }
        if self.outlier_detection.consecutive_failures == 0
            || self.outlier_detection.base_ejection_time.is_zero()
            || self.outlier_detection.max_ejection_percent > 100
        {
            return invalid("--outlier-consecutive-failures and --outlier-base-ejection-time must be greater than zero, --outlier-max-ejection-percent at most 100".to_owned());
        }
        if self.leader_elect {
            if let Err(e) = self.leader_elect_timing.validate() {
                return invalid(format!("--leader-elect-*: {e}"));
            }
        }
        Ok(())
    }
}

impl Default for GatewayOptions {
    /// The flag defaults, with empty certificate paths (which `parse` never returns).
    fn default() -> Self {
        GatewayOptions {
            bind_address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            secure_port: 6443,
            tls_cert_file: PathBuf::new(),
            tls_private_key_file: PathBuf::new(),
            client_ca_file: None,
            token_auth_file: None,
            anonymous_auth: true,
            requestheader_client_ca_file: None,
            requestheader_allowed_names: Vec::new(),
            requestheader_username_headers: Vec::new(),
            requestheader_uid_headers: Vec::new(),
            requestheader_group_headers: Vec::new(),
            requestheader_extra_headers_prefix: Vec::new(),
            authentication_token_webhook_config_file: None,
            authentication_token_webhook_cache_ttl: Duration::from_secs(120),
            proxy_client_cert_file: None,
            proxy_client_key_file: None,
            apiservice_dir: None,
            kubeconfig: None,
            enable_aggregator_routing: false,
            tenant_dir: None,
            tenant_forwarding: "header".to_owned(),
            service_endpoints: None,
            cluster_domain: "cluster.local".to_owned(),
            yield_before_park: false,
            outlier_detection: OutlierDetection::default(),
            leader_elect: true,
            leader_elect_timing: LeaseTiming::default(),
            leader_elect_resource_name: "kube-aggregator".to_owned(),
            leader_elect_resource_namespace: String::new(),
            authorization_mode: vec!["AlwaysAllow".to_owned()],
            authorization_webhook_config_file: None,
            authorization_webhook_cache_authorized_ttl: Duration::from_secs(300),
            authorization_webhook_cache_unauthorized_ttl: Duration::from_secs(30),
            authorization_webhook_version: "v1beta1".to_owned(),
            tracing_config_file: None,
            audit_policy_file: None,
            audit_log_path: None,
            audit_log_maxage: 366,
            audit_log_maxbackup: 100,
            audit_log_maxsize: 100,
            audit_log_format: "json".to_owned(),
            audit_webhook_config_file: None,
            audit_webhook: WebhookConfig::default(),
            audit_webhook_version: "audit.k8s.io/v1".to_owned(),
            availability_resync_period: Duration::from_secs(30),
            discovery_check_timeout: Duration::from_secs(5),
            availability_soft_failure_threshold: 3,
            availability_degraded_recheck: Duration::from_secs(5),
            apiservice_dir_poll_interval: Duration::from_secs(2),
            certificate_reload_interval: Duration::from_secs(60),
            v: 0,
            enable_http2: true,
            http2_max_streams_per_connection: 0,
            request_timeout: Duration::from_secs(60),
            min_request_timeout: Duration::from_secs(1800),
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
            max_requests_inflight_per_apiservice: 0,
        }
    }
}
/// The webhook's batching settings, checked as kube-apiserver's
/// `validateBackendBatchOptions` checks them when the webhook is `enabled` (the mode, then
/// in batch mode the positive sizes and throttle); unchecked values are clamped.
fn audit_webhook(f: &GatewayFlags, enabled: bool) -> Result<WebhookConfig, FlagError> {
    let mode = match f.audit_webhook_mode.parse::<WebhookMode>() {
        Ok(mode) => mode,
        Err(e) if enabled => return Err(FlagError::Invalid(e)),
        Err(_) => WebhookMode::Batch,
    };
    if enabled && mode == WebhookMode::Batch {
        let positive = |what: &str, v: f64| {
            if v > 0.0 {
                Ok(())
            } else {
                Err(FlagError::Invalid(format!(
                    "invalid audit batch webhook {what} {v}, must be a positive number"
                )))
            }
        };
        positive("buffer size", f.audit_webhook_batch_buffer_size as f64)?;
        positive("max batch size", f.audit_webhook_batch_max_size as f64)?;
        if f.audit_webhook_batch_throttle_enable {
            positive("throttle QPS", f.audit_webhook_batch_throttle_qps)?;
            positive(
                "throttle burst",
                f.audit_webhook_batch_throttle_burst as f64,
            )?;
        }
    }
    let clamp = |v: i64| usize::try_from(v.max(1)).unwrap_or(usize::MAX);
    Ok(WebhookConfig {
        mode,
        buffer_size: clamp(f.audit_webhook_batch_buffer_size),
        max_batch_size: clamp(f.audit_webhook_batch_max_size),
        max_batch_wait: f.audit_webhook_batch_max_wait,
        throttle: f.audit_webhook_batch_throttle_enable.then(|| {
            (
                f.audit_webhook_batch_throttle_qps,
                u32::try_from(f.audit_webhook_batch_throttle_burst.max(1)).unwrap_or(u32::MAX),
            )
        }),
        initial_backoff: f.audit_webhook_initial_backoff,
    })
}

/// Where to dial one Service port: the gateway's stand-in for Service + Endpoints lookups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceEndpoint {
    /// Service namespace (a DNS-1123 label).
    pub namespace: String,
    /// Service name (a DNS-1035 label).
    pub name: String,
    /// The Service port an APIService's `spec.service.port` refers to; default 443 as there.
    pub port: u16,
    /// The `host:port` to connect to; IPv6 hosts in brackets.
    pub address: String,
}

const ENDPOINT_FIELDS: &[&str] = &["namespace", "name", "port", "address"];

/// Reads a `--service-endpoints` file: a top-level list of `{namespace, name, port, address}`
/// maps. A `.json` file is read as JSON and anything else as YAML. An empty file is an empty
/// list.
///
/// # Errors
/// One line naming the file and, for a bad entry, its zero-based index and the field, e.g.
/// `services.yaml: entry 2: address "foo" is not host:port`. Unknown fields and duplicate
/// (namespace, name, port) entries are errors.
pub fn load_service_endpoints(path: &Path) -> Result<Vec<ServiceEndpoint>, String> {
    let file = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{file}: {e}"))?;
    let json = path
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("json"));
    parse_service_endpoints(&text, json).map_err(|e| format!("{file}: {e}"))
}

fn parse_service_endpoints(text: &str, json: bool) -> Result<Vec<ServiceEndpoint>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let document: serde_json::Value = if json {
        serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| format!("invalid YAML: {e}"))?
    };
    let entries = match document {
        serde_json::Value::Array(entries) => entries,
        serde_json::Value::Null => Vec::new(),
        _ => return Err("expected a list of service endpoints at the top level".to_owned()),
    };
    let mut out: Vec<ServiceEndpoint> = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let endpoint = parse_endpoint(entry).map_err(|e| format!("entry {index}: {e}"))?;
        if let Some(first) = out.iter().position(|o| {
            (&o.namespace, &o.name, o.port) == (&endpoint.namespace, &endpoint.name, endpoint.port)
        }) {
            return Err(format!(
                "entry {index}: duplicate of entry {first} ({}/{} port {})",
                endpoint.namespace, endpoint.name, endpoint.port
            ));
        }
        out.push(endpoint);
    }
    Ok(out)
}

fn parse_endpoint(entry: &serde_json::Value) -> Result<ServiceEndpoint, String> {
    let map = entry
        .as_object()
        .ok_or("expected a mapping with namespace, name, port and address")?;
    if let Some(unknown) = map.keys().find(|k| !ENDPOINT_FIELDS.contains(&k.as_str())) {
        return Err(format!(
            "unknown field {unknown:?} (expected {})",
            ENDPOINT_FIELDS.join(", ")
        ));
    }
    let text = |field: &str| -> Result<String, String> {
        match map.get(field) {
            None | Some(serde_json::Value::Null) => Err(format!("{field} is required")),
            Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(other) => Err(format!("{field} must be a non-empty string, got {other}")),
        }
    };
    let namespace = text("namespace")?;
    if !is_dns_label(&namespace, false) {
        return Err(format!(
            "namespace {namespace:?} is not a valid DNS-1123 label"
        ));
    }
    let name = text("name")?;
    if !is_dns_label(&name, true) {
        return Err(format!("name {name:?} is not a valid DNS-1035 label"));
    }
    let port = match map.get("port") {
        None | Some(serde_json::Value::Null) => 443,
        Some(serde_json::Value::Number(n)) => n
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("port {n} is out of range (1-65535)"))?,
        Some(other) => return Err(format!("port must be an integer, got {other}")),
    };
    let address = text("address")?;
    check_host_port(&address)?;
    Ok(ServiceEndpoint {
        namespace,
        name,
        port,
        address,
    })
}

/// DNS-1123 label (or DNS-1035 when `letter_first`): 1-63 of `[a-z0-9-]`, alphanumeric ends.
fn is_dns_label(s: &str, letter_first: bool) -> bool {
    let bytes = s.as_bytes();
    let ok_char = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-';
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            bytes.len() <= 63
                && bytes.iter().all(ok_char)
                && *first != b'-'
                && *last != b'-'
                && (!letter_first || first.is_ascii_lowercase())
        }
        _ => false,
    }
}

fn check_host_port(address: &str) -> Result<(), String> {
    let not_host_port = || format!("address {address:?} is not host:port");
    let (host, port) = address.rsplit_once(':').ok_or_else(not_host_port)?;
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => !host.is_empty() && !host.contains([':', '[', ']', '/', ' ']),
    };
    if !host_ok {
        return Err(not_host_port());
    }
    match port.parse::<u16>() {
        Ok(p) if p != 0 => Ok(()),
        _ => Err(format!(
            "address {address:?} has an invalid port {port:?} (1-65535)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    const CERTS: &[&str] = &["--tls-cert-file=c.pem", "--tls-private-key-file", "k.pem"];

    fn parse(extra: &[&str]) -> Result<GatewayOptions, FlagError> {
        GatewayOptions::parse(args(CERTS).into_iter().chain(args(extra)))
    }

    fn err(extra: &[&str]) -> String {
        parse(extra).expect_err("expected an error").to_string()
    }

    #[test]
    fn defaults_match_kube_apiserver_and_the_table() {
        let o = parse(&[]).expect("parse");
        let expected = GatewayOptions {
            tls_cert_file: "c.pem".into(),
            tls_private_key_file: "k.pem".into(),
            ..GatewayOptions::default()
        };
        assert_eq!(o, expected);
        assert_eq!(o.listen_addr().to_string(), "0.0.0.0:6443");
    }

    #[test]
    fn audit_flags_are_checked_as_kube_apiserver_checks_them() {
        let o = parse(&[
            "--audit-policy-file=policy.yaml",
            "--audit-log-path=-",
            "--audit-log-maxsize=0",
            "--audit-log-maxbackup=3",
            "--audit-log-maxage=7",
            "--audit-log-format=legacy",
        ])
        .expect("parse");
        assert_eq!(o.audit_policy_file, Some(PathBuf::from("policy.yaml")));
        assert_eq!(o.audit_log_path, Some(PathBuf::from("-")));
        assert_eq!(
            (
                o.audit_log_maxsize,
                o.audit_log_maxbackup,
                o.audit_log_maxage
            ),
            (0, 3, 7)
        );
        assert_eq!(
            err(&["--audit-log-maxage=-1"]),
            "--audit-log-maxage -1 can't be a negative number"
        );
        assert_eq!(
            err(&["--audit-log-maxbackup=-2"]),
            "--audit-log-maxbackup -2 can't be a negative number"
        );
        assert_eq!(
            err(&["--audit-log-path=a.log", "--audit-log-format=yaml"]),
            "invalid audit log format yaml, allowed formats are \"legacy,json\""
        );
        // The format is only checked when the log is written.
        assert!(parse(&["--audit-log-format=yaml"]).is_ok());
    }

    #[test]
    fn audit_webhook_flags_are_checked_when_the_webhook_is_on() {
        let o = parse(&[
            "--audit-webhook-config-file=hook.kubeconfig",
            "--audit-webhook-mode=blocking-strict",
            "--audit-webhook-initial-backoff=2s",
        ])
        .expect("parse");
        assert_eq!(
            o.audit_webhook_config_file,
            Some(PathBuf::from("hook.kubeconfig"))
        );
        assert_eq!(o.audit_webhook.mode, WebhookMode::BlockingStrict);
        assert_eq!(o.audit_webhook.initial_backoff, Duration::from_secs(2));
        let o = parse(&[
            "--audit-webhook-config-file=hook.kubeconfig",
            "--audit-webhook-batch-max-size=7",
            "--audit-webhook-batch-max-wait=250ms",
            "--audit-webhook-batch-throttle-enable=false",
        ])
        .expect("parse");
        assert_eq!(
            o.audit_webhook,
            WebhookConfig {
                max_batch_size: 7,
                max_batch_wait: Duration::from_millis(250),
                throttle: None,
                ..WebhookConfig::default()
            }
        );
        assert_eq!(
            parse(&[]).unwrap().audit_webhook.throttle,
            Some((10.0, 15)),
            "upstream's throttle by default"
        );
        let on = "--audit-webhook-config-file=hook.kubeconfig";
        assert_eq!(
            err(&[on, "--audit-webhook-mode=async"]),
            "invalid audit webhook mode async, allowed modes are \"batch,blocking,blocking-strict\""
        );
        assert_eq!(
            err(&[on, "--audit-webhook-batch-buffer-size=0"]),
            "invalid audit batch webhook buffer size 0, must be a positive number"
        );
        assert_eq!(
            err(&[on, "--audit-webhook-batch-throttle-qps=-1"]),
            "invalid audit batch webhook throttle QPS -1, must be a positive number"
        );
        assert_eq!(
            err(&[on, "--audit-webhook-version=audit.k8s.io/v1beta1"]),
            "--audit-webhook-version audit.k8s.io/v1beta1: invalid group version, allowed versions are [\"audit.k8s.io/v1\"]"
        );
        // Unused settings are not checked: the buffer size only matters in batch mode,
        // and nothing matters without the webhook.
        assert!(
            parse(&[
                on,
                "--audit-webhook-mode=blocking",
                "--audit-webhook-batch-buffer-size=0"
            ])
            .is_ok()
        );
        assert!(parse(&["--audit-webhook-mode=async"]).is_ok());
    }

    #[test]
    fn both_value_forms_and_every_flag_type() {
        let o = parse(&[
            "--bind-address",
            "127.0.0.1",
            "--secure-port=8443",
            "--client-ca-file",
            "ca.pem",
            "--proxy-client-cert-file=p.pem",
            "--proxy-client-key-file=p.key",
            "--apiservice-dir",
            "apis",
            "--service-endpoints=svc.yaml",
            "--authorization-mode=AlwaysDeny",
            "--availability-resync-period",
            "1m30s",
            "--discovery-check-timeout=500ms",
            "--apiservice-dir-poll-interval",
            "1.5s",
            "-v",
            "4",
            "--enable-http2=false",
        ])
        .expect("parse");
        assert_eq!(o.listen_addr().to_string(), "127.0.0.1:8443");
        assert_eq!(o.client_ca_file, Some(PathBuf::from("ca.pem")));
        assert_eq!(o.proxy_client_key_file, Some(PathBuf::from("p.key")));
        assert_eq!(o.apiservice_dir, Some(PathBuf::from("apis")));
        assert_eq!(o.service_endpoints, Some(PathBuf::from("svc.yaml")));
        assert_eq!(o.authorization_mode, ["AlwaysDeny"]);
        assert_eq!(o.availability_resync_period, Duration::from_secs(90));
        assert_eq!(o.discovery_check_timeout, Duration::from_millis(500));
        assert_eq!(o.apiservice_dir_poll_interval, Duration::from_millis(1500));
        assert_eq!((o.v, o.enable_http2), (4, false));
    }

    #[test]
    fn bools_and_shorthands_follow_pflag() {
        assert!(parse(&["--enable-http2"]).expect("parse").enable_http2);
        assert!(!parse(&["--enable-http2=F"]).expect("parse").enable_http2);
        assert_eq!(parse(&["-v=3"]).expect("parse").v, 3);
        assert_eq!(parse(&["-v7"]).expect("parse").v, 7);
        assert_eq!(
            parse(&["--v", "2", "--v=5"]).expect("parse").v,
            5,
            "last wins"
        );
        assert_eq!(parse(&["--secure_port=1"]).expect("parse").secure_port, 1);
        // A bool never takes the next argument, which is then a stray positional.
        assert_eq!(
            err(&["--enable-http2", "false"]),
            r#""gateway" does not take any arguments, got ["false"]"#
        );
        assert_eq!(
            err(&["--enable-http2=maybe"]),
            r#"invalid argument "maybe" for "--enable-http2" flag: strconv.ParseBool: parsing "maybe": invalid syntax"#
        );
    }

    #[test]
    fn list_flags_replace_the_default_then_append() {
        let o = parse(&["--authorization-mode", "AlwaysDeny,AlwaysAllow"]).expect("parse");
        assert_eq!(o.authorization_mode, ["AlwaysDeny", "AlwaysAllow"]);
        let f = parse_flags(args(CERTS).into_iter().chain(args(&[
            "--authorization-mode=a,b",
            "--authorization-mode",
            "c",
        ])))
        .expect("parse");
        assert_eq!(f.flags.authorization_mode(), ["a", "b", "c"]);
        assert!(f.changed("authorization-mode") && !f.changed("v"));
    }

    #[test]
    fn errors_name_the_flag_in_pflag_wording() {
        assert_eq!(
            err(&["--secure-port=5x"]),
            r#"invalid argument "5x" for "--secure-port" flag: strconv.ParseInt: parsing "5x": invalid syntax"#
        );
        assert_eq!(
            err(&["--secure-port", "70000"]),
            r#"invalid argument "70000" for "--secure-port" flag: strconv.ParseInt: parsing "70000": value out of range"#
        );
        assert_eq!(err(&["--foo"]), "unknown flag: --foo");
        assert_eq!(err(&["--foo=1"]), "unknown flag: --foo");
        assert_eq!(err(&["-x"]), "unknown shorthand flag: 'x' in -x");
        assert_eq!(
            err(&["--secure-port"]),
            "flag needs an argument: --secure-port"
        );
        assert_eq!(err(&["-v"]), "flag needs an argument: 'v' in -v");
        assert_eq!(err(&["---x"]), "bad flag syntax: ---x");
        assert_eq!(
            err(&["-v", "x"]),
            r#"invalid argument "x" for "-v, --v" flag: strconv.ParseInt: parsing "x": invalid syntax"#
        );
        assert_eq!(
            err(&["--bind-address=nope"]),
            r#"invalid argument "nope" for "--bind-address" flag: failed to parse IP: "nope""#
        );
        assert_eq!(
            err(&["--discovery-check-timeout=5x"]),
            r#"invalid argument "5x" for "--discovery-check-timeout" flag: time: unknown unit "x" in duration "5x""#
        );
        assert_eq!(
            err(&["--tls-cert-file="]),
            r#"invalid argument "" for "--tls-cert-file" flag: must not be empty"#
        );
        assert_eq!(
            err(&["--", "--v=1"]),
            r#""gateway" does not take any arguments, got ["--v=1"]"#
        );
    }

    #[test]
    fn required_files_are_enforced() {
        let e = GatewayOptions::parse(args(&[]))
            .expect_err("missing")
            .to_string();
        assert_eq!(
            e,
            r#"required flag(s) "tls-cert-file", "tls-private-key-file" not set"#
        );
        let e = GatewayOptions::parse(args(&["--tls-cert-file=c"])).expect_err("missing");
        assert_eq!(
            e.to_string(),
            r#"required flag(s) "tls-private-key-file" not set"#
        );
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn timeout_and_inflight_flags_validate_as_kube_apiserver() {
        let o = parse(&[]).expect("defaults");
        assert_eq!(o.request_timeout, Duration::from_secs(60));
        assert_eq!(o.min_request_timeout, Duration::from_secs(1800));
        assert_eq!(
            (o.max_requests_inflight, o.max_mutating_requests_inflight),
            (400, 200)
        );
        assert_eq!(o.max_requests_inflight_per_apiservice, 0);
        let o = parse(&[
            "--request-timeout=30s",
            "--min-request-timeout=60",
            "--max-requests-inflight=0",
            "--max-mutating-requests-inflight",
            "5",
            "--max-requests-inflight-per-apiservice=50",
        ])
        .expect("parse");
        assert_eq!(o.request_timeout, Duration::from_secs(30));
        assert_eq!(o.min_request_timeout, Duration::from_secs(60));
        assert_eq!(
            (o.max_requests_inflight, o.max_mutating_requests_inflight),
            (0, 5)
        );
        assert_eq!(o.max_requests_inflight_per_apiservice, 50);
        assert_eq!(
            err(&["--request-timeout=-1s"]),
            "--request-timeout can not be negative value"
        );
        assert_eq!(
            err(&["--min-request-timeout=-1"]),
            "--min-request-timeout can not be negative value"
        );
        assert_eq!(
            err(&["--max-requests-inflight=-1"]),
            "--max-requests-inflight can not be negative value"
        );
        assert_eq!(
            err(&["--max-mutating-requests-inflight=-2"]),
            "--max-mutating-requests-inflight can not be negative value"
        );
        assert_eq!(
            err(&["--request-timeout=5"]),
            r#"invalid argument "5" for "--request-timeout" flag: time: missing unit in duration "5""#
        );
    }

    #[test]
    fn help_is_its_own_outcome() {
        for flag in ["--help", "-h"] {
            let e = GatewayOptions::parse(args(&[flag])).expect_err("help");
            assert_eq!((e.clone(), e.exit_code()), (FlagError::Help, 0));
        }
        let text = usage();
        assert!(
            text.starts_with("Usage:\n  gateway [flags]\n  gateway check [flags]   "),
            "{text}"
        );
        assert!(text.contains("\n\nFlags:\n"), "{text}");
        assert!(text.contains("      --secure-port int "), "{text}");
        assert!(
            text.contains("(default 6443)") && text.contains("(default 30s)"),
            "{text}"
        );
        assert!(
            text.contains("(default [AlwaysAllow])") && text.contains("  -v, --v int "),
            "{text}"
        );
        assert!(
            !text.contains("(default 0)"),
            "pflag omits zero defaults: {text}"
        );
        assert!(
            text.contains("      --enable-http2 ") && text.contains("(default true)"),
            "{text}"
        );
        assert!(
            text.contains("--tls-cert-file string") && text.contains("(required)"),
            "{text}"
        );
    }

    #[test]
    fn gateway_validation() {
        assert_eq!(
            err(&["--authorization-mode=RBAC"]),
            r#"authorization-mode "RBAC" is not supported by this gateway (supported: AlwaysAllow, AlwaysDeny, Webhook)"#
        );
        assert_eq!(
            err(&["--authorization-mode=Webhook"]),
            "authorization-mode Webhook's authorization config file not passed (--authorization-webhook-config-file)"
        );
        assert_eq!(
            err(&["--authorization-webhook-version=v2"]),
            r#"--authorization-webhook-version: unsupported version "v2" (v1 or v1beta1)"#
        );
        assert_eq!(
            err(&["--authorization-mode=Foo"]),
            r#"authorization-mode "Foo" is not a valid mode"#
        );
        assert_eq!(
            err(&["--authorization-mode=AlwaysAllow,AlwaysAllow"]),
            r#"authorization-mode "AlwaysAllow" has mode specified more than once"#
        );
        assert_eq!(
            err(&["--authorization-mode="]),
            "at least one authorization-mode must be passed"
        );
        assert_eq!(
            err(&["--proxy-client-cert-file=p.pem"]),
            "--proxy-client-cert-file and --proxy-client-key-file must be given together"
        );
        assert_eq!(
            err(&["--discovery-check-timeout=0"]),
            "--discovery-check-timeout must be greater than zero"
        );
        assert_eq!(
            err(&["--availability-soft-failure-threshold=0"]),
            "--availability-soft-failure-threshold must be at least 1"
        );
        assert_eq!(
            err(&["--availability-degraded-recheck=0s"]),
            "--availability-degraded-recheck must be greater than zero"
        );
    }

    #[test]
    fn every_default_in_the_table_parses() {
        // clap's own consistency checks of the declarations.
        GatewayFlags::command().debug_assert();
        let f = parse_flags(args(CERTS)).expect("parse");
        // Each default, given on the command line, goes through the flag's parser.
        let command = GatewayFlags::command();
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            for default in arg.get_default_values() {
                let given = format!("--{long}={}", default.to_string_lossy());
                assert!(
                    parse_flags(args(CERTS).into_iter().chain([given.clone()])).is_ok(),
                    "{given}"
                );
            }
        }
        assert!(!f.changed("nope"));
    }

    #[test]
    fn go_durations() {
        let ok = |s: &str| parse_duration(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(ok("30s"), Duration::from_secs(30));
        assert_eq!(ok("5m"), Duration::from_secs(300));
        assert_eq!(ok("1h30m"), Duration::from_secs(5400));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok("2us"), Duration::from_micros(2));
        assert_eq!(ok("2µs"), Duration::from_micros(2));
        assert_eq!(ok("3ns"), Duration::from_nanos(3));
        assert_eq!(ok(".5s"), Duration::from_millis(500));
        assert_eq!(ok("5.s"), Duration::from_secs(5));
        assert_eq!(ok("+1m"), Duration::from_secs(60));
        assert_eq!(ok("1h1m1s1ms"), Duration::from_millis(3_661_001));
        assert_eq!(
            ok("0.0000000019s"),
            Duration::from_nanos(1),
            "sub-ns truncated"
        );
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("-0"), Duration::ZERO);
        assert_eq!(ok("2562047h"), Duration::from_secs(2_562_047 * 3600));
        let bad = |s: &str| parse_duration(s).expect_err(s);
        assert_eq!(bad(""), r#"time: invalid duration """#);
        assert_eq!(bad("abc"), r#"time: invalid duration "abc""#);
        assert_eq!(bad("."), r#"time: invalid duration ".""#);
        assert_eq!(bad("-"), r#"time: invalid duration "-""#);
        assert_eq!(bad("1"), r#"time: missing unit in duration "1""#);
        assert_eq!(bad("1s2"), r#"time: missing unit in duration "1s2""#);
        assert_eq!(bad("5x"), r#"time: unknown unit "x" in duration "5x""#);
        assert_eq!(bad("1d"), r#"time: unknown unit "d" in duration "1d""#);
        assert_eq!(bad("3000000h"), r#"time: invalid duration "3000000h""#);
        assert_eq!(bad("-5s"), r#"negative duration "-5s" is not allowed"#);
    }

    fn endpoints(text: &str, json: bool) -> Result<Vec<ServiceEndpoint>, String> {
        parse_service_endpoints(text, json)
    }

    #[test]
    fn service_endpoints_from_yaml_and_json() {
        let yaml = "- namespace: kube-system\n  name: metrics-server\n  port: 443\n  address: 127.0.0.1:8443\n\
                    - {namespace: default, name: api, address: \"[::1]:9443\"}\n";
        let expected = vec![
            ServiceEndpoint {
                namespace: "kube-system".into(),
                name: "metrics-server".into(),
                port: 443,
                address: "127.0.0.1:8443".into(),
            },
            ServiceEndpoint {
                namespace: "default".into(),
                name: "api".into(),
                port: 443,
                address: "[::1]:9443".into(),
            },
        ];
        assert_eq!(endpoints(yaml, false), Ok(expected.clone()));
        let json = r#"[{"namespace":"kube-system","name":"metrics-server","port":443,"address":"127.0.0.1:8443"},
                       {"namespace":"default","name":"api","address":"[::1]:9443"}]"#;
        assert_eq!(endpoints(json, true), Ok(expected));
        assert_eq!(endpoints("", false), Ok(vec![]));
        assert_eq!(endpoints("[]", true), Ok(vec![]));
    }

    #[test]
    fn service_endpoint_errors_name_entry_and_field() {
        let entry = |body: &str| {
            format!(
                "- {{namespace: a, name: b, address: 'h:1'}}\n- {{namespace: a, name: c, address: 'h:1'}}\n- {{{body}}}\n"
            )
        };
        let bad = |body: &str| endpoints(&entry(body), false).expect_err(body);
        assert_eq!(
            bad("namespace: a, name: d, address: foo"),
            r#"entry 2: address "foo" is not host:port"#
        );
        assert_eq!(
            bad("namespace: a, name: d, address: 'h:0'"),
            r#"entry 2: address "h:0" has an invalid port "0" (1-65535)"#
        );
        assert_eq!(
            bad("namespace: a, name: d, address: ':80'"),
            r#"entry 2: address ":80" is not host:port"#
        );
        assert_eq!(bad("namespace: a, name: d"), "entry 2: address is required");
        assert_eq!(
            bad("namespace: A, name: d, address: 'h:1'"),
            r#"entry 2: namespace "A" is not a valid DNS-1123 label"#
        );
        assert_eq!(
            bad("namespace: a, name: 1d, address: 'h:1'"),
            r#"entry 2: name "1d" is not a valid DNS-1035 label"#
        );
        assert_eq!(
            bad("namespace: a, name: d, port: 70000, address: 'h:1'"),
            "entry 2: port 70000 is out of range (1-65535)"
        );
        assert_eq!(
            bad("namespace: a, name: d, port: x, address: 'h:1'"),
            r#"entry 2: port must be an integer, got "x""#
        );
        assert_eq!(
            bad("namespace: a, name: d, adress: 'h:1'"),
            r#"entry 2: unknown field "adress" (expected namespace, name, port, address)"#
        );
        assert_eq!(
            bad("namespace: a, name: b, port: 443, address: 'h:2'"),
            "entry 2: duplicate of entry 0 (a/b port 443)"
        );
        assert_eq!(
            endpoints("a: 1", false).expect_err("map"),
            "expected a list of service endpoints at the top level"
        );
        assert_eq!(
            endpoints("[1]", true).expect_err("scalar"),
            "entry 0: expected a mapping with namespace, name, port and address"
        );
        assert!(
            endpoints("[", true)
                .expect_err("syntax")
                .starts_with("invalid JSON: ")
        );
    }

    #[test]
    fn load_names_the_file() {
        let dir = std::env::temp_dir().join(format!("flags-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("services.yaml");
        std::fs::write(&path, "- {namespace: a, name: b, address: foo}\n").expect("write");
        let e = load_service_endpoints(&path).expect_err("bad address");
        assert_eq!(
            e,
            format!(
                "{}: entry 0: address \"foo\" is not host:port",
                path.display()
            )
        );
        let missing = load_service_endpoints(&dir.join("nope.json")).expect_err("missing");
        assert!(
            missing.starts_with(&format!("{}: ", dir.join("nope.json").display())),
            "{missing}"
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn tenant_flags() {
        let o = parse(&[]).expect("parse");
        assert_eq!(
            (o.tenant_dir, o.tenant_forwarding.as_str()),
            (None, "header")
        );
        let o =
            parse(&["--tenant-dir=tenants", "--tenant-forwarding", "path-prefix"]).expect("parse");
        assert_eq!(o.tenant_dir, Some(PathBuf::from("tenants")));
        assert_eq!(o.tenant_forwarding, "path-prefix");
        assert_eq!(
            err(&["--tenant-forwarding=query"]),
            r#"--tenant-forwarding: unsupported value "query" (header or path-prefix)"#
        );
    }

    #[test]
    fn outlier_and_leader_election_flags() {
        let o = parse(&[]).expect("parse");
        assert_eq!(o.outlier_detection, OutlierDetection::default());
        assert!(o.leader_elect);
        let o = parse(&[
            "--outlier-consecutive-failures=2",
            "--outlier-base-ejection-time=500ms",
            "--outlier-max-ejection-time=1m",
            "--outlier-max-ejection-percent=34",
            "--leader-elect-lease-duration=30s",
            "--leader-elect-renew-deadline=20s",
            "--leader-elect-retry-period=5s",
        ])
        .expect("parse");
        assert_eq!(
            o.outlier_detection,
            OutlierDetection {
                consecutive_failures: 2,
                base_ejection_time: Duration::from_millis(500),
                max_ejection_time: Duration::from_secs(60),
                max_ejection_percent: 34,
            }
        );
        assert_eq!(
            o.leader_elect_timing.lease_duration,
            Duration::from_secs(30)
        );
        assert!(err(&["--outlier-consecutive-failures=0"]).contains("greater than zero"));
        assert!(err(&["--outlier-max-ejection-percent=101"]).contains("at most 100"));
        assert_eq!(
            err(&["--leader-elect-renew-deadline=15s"]),
            "--leader-elect-*: leader election: lease duration (15s) must be greater than renew deadline (15s)"
        );
        // Without leader election its timing is not checked.
        parse(&["--leader-elect=false", "--leader-elect-renew-deadline=15s"]).expect("parse");
    }
}
