//! Request timeouts: kube-apiserver's deadline and timeout filters for requests that are
//! not long-running.
//!
//! [`TimeoutLayer`] gives every request that is not long-running a deadline of
//! `--request-timeout` (default 60 s), shortened by a `?timeout=` in the URL when that is
//! above zero and below the maximum, and answers 504 when the inner service has not
//! produced the response head by then. A response whose head came in time but whose body
//! is still streaming at the deadline is aborted (the connection closed over HTTP/1.1, the
//! stream reset over HTTP/2), as upstream's filter does. Dropping the inner future is what
//! releases a proxied request's backend connection or stream.
//!
//! Long-running requests get no deadline: watches, `proxy`, the `attach`, `exec`, `log`,
//! `portforward` and `proxy` subresources and `/debug/pprof/` ([`LongRunningCheck`]). A host
//! whose extension servers stream on other subresources (a VM console, say, which upstream
//! would cut off after 60 s) adds them with [`LongRunningCheck::or`].
//!
//! Mirrors k8s.io/apiserver
//! [`pkg/endpoints/filters/request_deadline.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/request_deadline.go),
//! [`pkg/server/filters/timeout.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/server/filters/timeout.go)
//! and [`pkg/server/filters/longrunning.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/server/filters/longrunning.go).
//!
//! ```
//! use std::time::Duration;
//! use kube_aggregator::rt::Timer;
//! use kube_aggregator::timeout::{LongRunningCheck, TimeoutLayer};
//!
//! # fn timer() -> Timer { Timer::tokio() }
//! let layer = TimeoutLayer::new(timer())
//!     .request_timeout(Duration::from_secs(30))
//!     // A VM console streams for as long as the user keeps it open.
//!     .long_running(LongRunningCheck::kube_apiserver().or(|_head, info| info.subresource == "console"));
//! # let _ = layer;
//! ```
//!
//! Floor 7 of the import order (docs/architecture.md): uses `authz`, `body`, `filter`,
//! `gocompat`, `rt`, `status`; used by `audit`, `builder`, `inflight`, `metrics`.

mod service;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;

pub use service::{OnTimeout, ResponseFuture, Timed, TimeoutLayer, TimeoutService};

use crate::authz::RequestInfo;
use crate::status::{Status, StatusDetails};

/// kube-apiserver's `--request-timeout` default.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

type Predicate = dyn Fn(&http::request::Parts, &RequestInfo) -> bool + Send + Sync;

/// Decides which requests are long-running: they get no request timeout and are not
/// counted by the in-flight limits (upstream `LongRunningRequestCheck`).
///
/// [`LongRunningCheck::kube_apiserver`] (the default) is kube-apiserver's own set,
/// [`RequestInfo::is_long_running`]. [`LongRunningCheck::basic`] builds upstream's
/// `BasicLongRunningRequestCheck` from other verbs and subresources, and
/// [`LongRunningCheck::or`] adds the host's own rule.
#[derive(Clone, Default)]
pub struct LongRunningCheck {
    basic: Option<Arc<(Vec<String>, Vec<String>)>>,
    extra: Vec<Arc<Predicate>>,
}

impl fmt::Debug for LongRunningCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("LongRunningCheck");
        match &self.basic {
            None => d.field("base", &"kube-apiserver"),
            Some(b) => d.field("verbs", &b.0).field("subresources", &b.1),
        };
        d.field("extra_rules", &self.extra.len()).finish()
    }
}

impl LongRunningCheck {
    /// kube-apiserver's rule (`pkg/controlplane/apiserver/config.go`): verbs `watch` and
    /// `proxy`; resource requests for `attach`, `exec`, `proxy`, `log` or `portforward`;
    /// non-resource paths under `/debug/pprof/`.
    pub fn kube_apiserver() -> LongRunningCheck {
        LongRunningCheck::default()
    }

    /// Upstream `BasicLongRunningRequestCheck(verbs, subresources)`: one of `verbs`, a
    /// resource request for one of `subresources`, or a non-resource path under
    /// `/debug/pprof/`. `basic(["watch"], [])` is the generic apiserver's default.
    pub fn basic(
        verbs: impl IntoIterator<Item = impl Into<String>>,
        subresources: impl IntoIterator<Item = impl Into<String>>,
    ) -> LongRunningCheck {
        LongRunningCheck {
            basic: Some(Arc::new((
                verbs.into_iter().map(Into::into).collect(),
                subresources.into_iter().map(Into::into).collect(),
            ))),
            extra: Vec::new(),
        }
    }

    /// This check, or `rule`: the request is long-running when either says so. `rule`
    /// sees the request head (method, URI, headers) and its [`RequestInfo`].
    ///
    /// ```
    /// use kube_aggregator::authz::RequestInfo;
    /// use kube_aggregator::timeout::LongRunningCheck;
    ///
    /// // A VM console streams for as long as someone watches it.
    /// let check = LongRunningCheck::kube_apiserver()
    ///     .or(|_, info| info.api_group == "subresources.kubevirt.io" && info.subresource == "console");
    /// let console = http::Request::get("/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm/console")
    ///     .body(()).unwrap();
    /// let info = RequestInfo::from_parts(console.method(), console.uri()).unwrap();
    /// assert!(check.is_long_running(&console.into_parts().0, &info));
    /// ```
    pub fn or(
        mut self,
        rule: impl Fn(&http::request::Parts, &RequestInfo) -> bool + Send + Sync + 'static,
    ) -> LongRunningCheck {
        self.extra.push(Arc::new(rule));
        self
    }

    /// True when the request is long-running.
    pub fn is_long_running(&self, head: &http::request::Parts, info: &RequestInfo) -> bool {
        let base = match &self.basic {
            None => info.is_long_running(),
            Some(b) => {
                let (verbs, subresources) = &**b;
                verbs.contains(&info.verb)
                    || (info.is_resource_request && subresources.contains(&info.subresource))
                    || (!info.is_resource_request && info.path.starts_with("/debug/pprof/"))
            }
        };
        base || self.extra.iter().any(|rule| rule(head, info))
    }
}

/// The deadline a request gets (upstream `WithRequestDeadline`): the first `timeout`
/// query value, parsed as a Go duration, when it is above zero and below `maximum`;
/// `maximum` otherwise (missing, empty, zero, negative, or too long: no error).
///
/// # Errors
///
/// A value Go's `time.ParseDuration` refuses, with upstream's 400 message, e.g.
/// `invalid timeout specified in the request URL - time: invalid duration "foo"`.
///
/// ```
/// use std::time::Duration;
/// use kube_aggregator::timeout::request_deadline;
///
/// let max = Duration::from_secs(60);
/// let uri = |s: &str| s.parse::<http::Uri>().unwrap();
/// assert_eq!(request_deadline(&uri("/api/v1/pods?timeout=10s"), max).unwrap(), Duration::from_secs(10));
/// assert_eq!(request_deadline(&uri("/api/v1/pods?timeout=2h"), max).unwrap(), max); // capped
/// assert_eq!(request_deadline(&uri("/api/v1/pods"), max).unwrap(), max);
/// assert!(request_deadline(&uri("/api/v1/pods?timeout=soon"), max).is_err());
/// ```
pub fn request_deadline(uri: &http::Uri, maximum: Duration) -> Result<Duration, InvalidTimeout> {
    let Some(query) = uri.query() else {
        return Ok(maximum);
    };
    let value = match crate::authz::request_info::first_query_value(query, "timeout") {
        Some(v) if !v.is_empty() => v,
        _ => return Ok(maximum),
    };
    let nanos = crate::gocompat::parse_duration(&value).map_err(|e| InvalidTimeout(e.0))?;
    let asked = u64::try_from(nanos).map(Duration::from_nanos).ok();
    Ok(match asked {
        Some(d) if !d.is_zero() && d < maximum => d,
        _ => maximum,
    })
}

/// A `?timeout=` that is not a Go duration; `Display` is upstream's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid timeout specified in the request URL - {0}")]
pub struct InvalidTimeout(String);

impl InvalidTimeout {
    /// The 400 `BadRequest` Status upstream answers with.
    pub fn into_response(self) -> http::Response<crate::body::Body> {
        Status::failure(StatusCode::BAD_REQUEST, "BadRequest", self.to_string()).into_response()
    }
}

/// The body of upstream's 504: Go's `encoding/json` of the Status without `kind` and
/// `apiVersion` (the timeout writer encodes `ErrStatus` directly), and a newline.
pub(crate) fn timeout_body() -> Vec<u8> {
    let mut status = Status::failure(
        StatusCode::GATEWAY_TIMEOUT,
        "Timeout",
        "Timeout: request did not complete within the allotted timeout",
    )
    .with_details(StatusDetails::default());
    status.kind = "";
    status.api_version = "";
    status.to_json()
}

#[cfg(test)]
mod tests;
