//! kube-apiserver's request metrics: what k8s.io/apiserver
//! [`pkg/endpoints/metrics/metrics.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/metrics/metrics.go)
//! records for each request, with its names, labels and buckets, through
//! [`prometheus_client`].
//!
//! [`RequestMetrics`] holds the families; [`MetricsLayer`] records every request that
//! passed authorization into them (upstream records at the handler, so requests refused by
//! authentication or authorization are counted by their own metrics, not here);
//! [`RequestMetrics::terminated`] counts a request refused in self-defense. Uses: `authz`
//! (the [`RequestInfo`]), `timeout` (which requests are long-running); used by the
//! builder.
//!
//! Floor 8 of the import order (docs/architecture.md): uses `authz`, `body`, `filter`,
//! `outcome_metrics`, `timeout`; used by `builder`, `inflight`.

mod labels;

use prometheus_client::encoding::{EncodeLabel as _, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use std::sync::Arc;

use crate::authz::RequestInfo;

use labels::{Aborted, Code, Interned, LabelsView, NoDryRun, Shared, WithCode};

mod layer;

pub use layer::{
    MetricsBody, MetricsLayer, MetricsService, ResponseFuture as MetricsResponseFuture,
};

/// `apiserver_request_duration_seconds`' buckets: upstream's, tuned for its latency SLO.
const DURATION_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// The labels a request is known by: `verb` (upstream's reported verb: `GET`, `LIST`,
/// `WATCH`, `POST`, `APPLY`, `CONNECT`, ... or `other`), `dry_run`, `group`, `version`,
/// `resource`, `subresource`, `scope` (`resource`, `namespace`, `cluster` or empty),
/// `component`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, Default)]
pub struct RequestLabels {
    /// The reported verb.
    pub verb: &'static str,
    /// `""`, `All`, or `invalid` (upstream's `cleanDryRun`).
    pub dry_run: &'static str,
    /// The API group (empty for the core group and non-resource requests).
    pub group: String,
    /// The API version.
    pub version: String,
    /// The resource.
    pub resource: String,
    /// The subresource.
    pub subresource: String,
    /// `resource`, `namespace`, `cluster` or empty (upstream's `CleanScope`).
    pub scope: &'static str,
    /// `apiserver`, as upstream labels what its handlers serve.
    pub component: &'static str,
}

impl RequestLabels {
    /// The labels of `info` (a request with `method`, `query` and `content_type`), as
    /// upstream's `MonitorRequest` derives them.
    pub fn of(
        info: &RequestInfo,
        method: &http::Method,
        query: Option<&str>,
        content_type: Option<&[u8]>,
    ) -> RequestLabels {
        LabelsView::of(info, method, query, content_type).to_owned()
    }
}

impl<'a> LabelsView<'a> {
    /// [`RequestLabels::of`], borrowing the strings from `info`.
    fn of(
        info: &'a RequestInfo,
        method: &http::Method,
        query: Option<&str>,
        content_type: Option<&[u8]>,
    ) -> LabelsView<'a> {
        LabelsView {
            verb: reported_verb(info, method, query, content_type),
            dry_run: dry_run(query),
            group: &info.api_group,
            version: &info.api_version,
            resource: &info.resource,
            subresource: &info.subresource,
            scope: clean_scope(info),
            component: COMPONENT,
        }
    }
}

/// The `component` label of what this crate serves.
const COMPONENT: &str = "apiserver";

impl RequestLabels {
    /// Writes the labels in upstream's order, without those named in `skip` (the
    /// families that have no `dry_run`, or no `component`).
    fn encode_without(&self, encoder: &mut LabelSetEncoder<'_>, skip: &[&str]) -> std::fmt::Result {
        for (k, v) in [
            ("verb", self.verb),
            ("dry_run", self.dry_run),
            ("group", &self.group),
            ("version", &self.version),
            ("resource", &self.resource),
            ("subresource", &self.subresource),
            ("scope", self.scope),
            ("component", self.component),
        ] {
            if !skip.contains(&k) {
                (k, v).encode(encoder.encode_label())?;
            }
        }
        Ok(())
    }
}

impl EncodeLabelSet for RequestLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> std::fmt::Result {
        self.encode_without(encoder, &[])
    }
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// kube-apiserver's request metrics, with upstream's names, help, labels and buckets:
/// `apiserver_request_total`, `apiserver_request_duration_seconds`,
/// `apiserver_response_sizes` (`GET` and `LIST` only), `apiserver_longrunning_requests`
/// `apiserver_request_terminations_total` and `apiserver_request_aborts_total`. Shared
/// (`Arc`) by the layers that record.
#[derive(Debug)]
pub struct RequestMetrics {
    requests: Family<WithCode<Shared>, Counter>,
    durations: Histograms<Shared>,
    sizes: Histograms<NoDryRun>,
    long_running: Family<NoDryRun, Gauge>,
    terminations: Family<WithCode<NoDryRun>, Counter>,
    aborts: Family<Aborted, Counter>,
    /// The three families' samples of each label set seen, so that a request looks its
    /// labels up once, not once per family.
    samples: std::sync::RwLock<rustc_hash::FxHashMap<Shared, Arc<Samples>>>,
    /// The label sets of `samples`, by hash: a request whose labels were seen before
    /// shares them instead of copying its strings.
    interned: Interned,
}

/// The samples one label set records into: its duration, its response size (`GET` and
/// `LIST`), and its count for each code answered so far.
#[derive(Debug)]
struct Samples {
    duration: Histogram,
    size: Option<Histogram>,
    counts: std::sync::Mutex<Vec<(u16, Counter)>>,
}

impl Default for RequestMetrics {
    fn default() -> Self {
        RequestMetrics {
            requests: Family::default(),
            durations: Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS)),
            // 1 kB to 1 GB.
            sizes: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(1000.0, 10.0, 7))
            }),
            long_running: Family::default(),
            terminations: Family::default(),
            aborts: Family::default(),
            samples: std::sync::RwLock::default(),
            interned: Interned::default(),
        }
    }
}

impl RequestMetrics {
    /// Adds the families to `registry` (`prometheus_client` ends each help text with the
    /// period upstream's have).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "apiserver_request",
            "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code",
            self.requests.clone(),
        );
        registry.register(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component",
            self.durations.clone(),
        );
        registry.register(
            "apiserver_response_sizes",
            "Response size distribution in bytes for each group, version, verb, resource, subresource, scope and component",
            self.sizes.clone(),
        );
        registry.register(
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way",
            self.long_running.clone(),
        );
        registry.register(
            "apiserver_request_terminations",
            "Number of requests which apiserver terminated in self-defense",
            self.terminations.clone(),
        );
        registry.register(
            "apiserver_request_aborts",
            "Number of requests which apiserver aborted possibly due to a timeout, for each group, version, verb, resource, subresource and scope",
            self.aborts.clone(),
        );
    }

    /// One request over: its labels, code, duration in seconds and response bytes.
    pub fn observe(&self, labels: &RequestLabels, code: u16, seconds: f64, bytes: u64) {
        self.observe_shared(&Shared::new(labels.clone()), code, seconds, bytes);
    }

    fn observe_shared(&self, labels: &Shared, code: u16, seconds: f64, bytes: u64) {
        let labels = labels.bounded(code);
        let samples = self.samples_of(&labels);
        if let Some(size) = &samples.size {
            size.observe(bytes as f64);
        }
        samples.duration.observe(seconds);
        let mut counts = samples
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match counts.iter().find(|(c, _)| *c == code) {
            Some((_, count)) => {
                count.inc();
            }
            None => {
                let count = self
                    .requests
                    .get_or_create(&WithCode(labels, Code(code)))
                    .clone();
                count.inc();
                counts.push((code, count));
            }
        };
    }

    /// The samples of `labels` in the families, found once per label set.
    fn samples_of(&self, labels: &Shared) -> Arc<Samples> {
        use std::sync::PoisonError;
        let known = self.samples.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(samples) = known.get(labels) {
            return samples.clone();
        }
        drop(known);
        let samples = Arc::new(Samples {
            duration: self.durations.get_or_create(labels).clone(),
            size: matches!(labels.0.verb, "GET" | "LIST")
                .then(|| self.sizes.get_or_create(&NoDryRun::of(labels)).clone()),
            counts: std::sync::Mutex::default(),
        });
        self.interned.remember(labels);
        self.samples
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(labels.clone())
            .or_insert(samples)
            .clone()
    }

    /// The labels of a request ([`RequestLabels::of`]), shared with the earlier requests
    /// that had the same.
    fn labels_of(
        &self,
        info: &RequestInfo,
        method: &http::Method,
        query: Option<&str>,
        content_type: Option<&[u8]>,
    ) -> Shared {
        self.interned
            .shared(&LabelsView::of(info, method, query, content_type))
    }

    /// A request refused in self-defense (the in-flight limit's 429, the timeout's 504):
    /// `apiserver_request_terminations_total`, and for a 429 `apiserver_request_total`
    /// too, as upstream's `RecordDroppedRequest` counts it.
    pub fn terminated(&self, labels: &RequestLabels, code: u16) {
        let labels = Shared::new(labels.clone()).bounded(code);
        self.terminations
            .get_or_create(&WithCode(NoDryRun::of(&labels), Code(code)))
            .inc();
        if code == 429 {
            self.requests
                .get_or_create(&WithCode(labels, Code(code)))
                .inc();
        }
    }

    /// As [`RequestMetrics::terminated`], for a request known by its method and URI (its
    /// RequestInfo parsed again: this is for rare answers, such as the timeout's).
    pub fn terminated_request(&self, method: &http::Method, uri: &http::Uri, code: u16) {
        if let Some(labels) = labels_of(method, uri) {
            self.terminated(&labels, code);
        }
    }

    /// A request whose answer was cut after its head was sent (upstream's
    /// `RecordRequestAbort`, for the handlers that abort with `http.ErrAbortHandler`: the
    /// timeout filter when the deadline passes mid-answer, the proxy when the backend's
    /// body fails): `apiserver_request_aborts_total`.
    pub fn aborted(&self, labels: &RequestLabels) {
        self.aborted_shared(&Shared::new(labels.clone()));
    }

    fn aborted_shared(&self, labels: &Shared) {
        self.aborts
            .get_or_create(&Aborted(NoDryRun::of(labels)))
            .inc();
    }

    /// As [`RequestMetrics::aborted`], for a request known by its method and URI.
    pub fn aborted_request(&self, method: &http::Method, uri: &http::Uri) {
        if let Some(labels) = labels_of(method, uri) {
            self.aborted(&labels);
        }
    }

    /// The gauge of a long-running request's labels, raised while it runs.
    fn long_running(&self, labels: &Shared) -> Gauge {
        self.long_running
            .get_or_create(&NoDryRun::of(labels))
            .clone()
    }

    /// The metrics alone, in the Prometheus text format.
    pub fn render(&self) -> String {
        crate::outcome_metrics::render(|registry| self.register(registry))
    }
}

/// The labels of a request known only by its method and URI (its RequestInfo parsed
/// again); `None` for a path without one.
fn labels_of(method: &http::Method, uri: &http::Uri) -> Option<RequestLabels> {
    let mut req = http::Request::new(());
    *req.method_mut() = method.clone();
    *req.uri_mut() = uri.clone();
    crate::authz::request_info::ensure(&mut req).ok()?;
    let info = req.extensions().get::<RequestInfo>()?;
    Some(RequestLabels::of(info, method, uri.query(), None))
}

/// upstream's `CleanScope`.
fn clean_scope(info: &RequestInfo) -> &'static str {
    if !info.name.is_empty() || info.verb == "create" {
        "resource"
    } else if !info.namespace.is_empty() {
        "namespace"
    } else if info.is_resource_request {
        "cluster"
    } else {
        ""
    }
}

/// The subresources upstream reports as `CONNECT`.
const CONNECT_SUBRESOURCES: [&str; 5] = ["log", "exec", "portforward", "attach", "proxy"];

/// upstream's reported verb (`CanonicalVerb` then `cleanVerb`), from the RequestInfo verb
/// where upstream takes its route's: `GET`/`LIST`/`WATCH`, `POST` for a create, `PUT` for
/// an update, `PATCH` (`APPLY` for a server-side apply), `DELETE`, `DELETECOLLECTION`,
/// `CONNECT` for the streaming subresources; a non-resource request's method; anything
/// else `other`.
fn reported_verb(
    info: &RequestInfo,
    method: &http::Method,
    query: Option<&str>,
    content_type: Option<&[u8]>,
) -> &'static str {
    let get = *method == http::Method::GET || *method == http::Method::HEAD;
    if get && query.is_some_and(is_watch) {
        return "WATCH";
    }
    if info.is_resource_request {
        if CONNECT_SUBRESOURCES.contains(&info.subresource.as_str()) {
            return "CONNECT";
        }
        return match info.verb.as_str() {
            "get" => "GET",
            "list" => "LIST",
            "watch" => "WATCH",
            "create" => "POST",
            "update" => "PUT",
            "patch" if content_type == Some(b"application/apply-patch+yaml") => "APPLY",
            "patch" => "PATCH",
            "delete" => "DELETE",
            "deletecollection" => "DELETECOLLECTION",
            "proxy" => "PROXY",
            _ => "other",
        };
    }
    // A non-resource request has no scope: its GET (or HEAD) is a GET.
    match *method {
        http::Method::GET | http::Method::HEAD => "GET",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::PATCH => "PATCH",
        http::Method::DELETE => "DELETE",
        http::Method::CONNECT => "CONNECT",
        _ => "other",
    }
}

/// A `watch` query parameter that is not `0` or `false` (upstream's `getVerbIfWatch`
/// reads the first one).
fn is_watch(query: &str) -> bool {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "watch")
        .is_some_and(|(_, v)| {
            let v = v.to_ascii_lowercase();
            v != "0" && v != "false"
        })
}

/// upstream's `cleanDryRun`: empty without `dryRun`, `All` when every value is `All`
/// (the one valid value), else `invalid`.
fn dry_run(query: Option<&str>) -> &'static str {
    let Some(query) = query.filter(|q| q.contains("dryRun")) else {
        return "";
    };
    let mut values = form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v)
        .peekable();
    if values.peek().is_none() {
        return "";
    }
    if values.all(|v| v == "All") {
        "All"
    } else {
        "invalid"
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
