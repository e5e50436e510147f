//! What a request asks for, read from its method and URL: the port of k8s.io/apiserver
//! [`pkg/endpoints/request/requestinfo.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/request/requestinfo.go)
//! (`RequestInfoFactory.NewRequestInfo`).
//!
//! kube-apiserver computes a [`RequestInfo`] for every request before authentication;
//! the authorizer, the long-running check and the Forbidden message all read it.
//! Resource requests look like `/api/<version>/...` (the legacy core group) or
//! `/apis/<group>/<version>/...`; anything else (`/healthz`, `/apis/<group>`,
//! `/openapi/v2`) is a non-resource request whose verb is the lower-cased HTTP method.
//!
//! ```
//! use http::{Method, Uri};
//! use kube_aggregator::authz::RequestInfo;
//!
//! let uri: Uri = "/apis/metrics.k8s.io/v1beta1/namespaces/kube-system/pods?watch=1".parse()?;
//! let info = RequestInfo::from_parts(&Method::GET, &uri)?;
//! assert!(info.is_resource_request);
//! assert_eq!(info.verb, "watch");
//! assert_eq!(info.api_group, "metrics.k8s.io");
//! assert_eq!(info.namespace, "kube-system");
//! assert_eq!(info.resource, "pods");
//! assert!(info.is_long_running());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Where this differs from Go, on purpose
//!
//! - Go's `net/http` answers 400 before any handler when the path holds a malformed
//!   `%` escape; here that is [`RequestInfoError::InvalidPathEscape`].
//! - Go keeps the bytes of a path that decodes to invalid UTF-8. Replacing them would
//!   let two different names authorize as one, so such a path is refused with
//!   [`RequestInfoError::NonUtf8Path`].
//! - Go gives an empty resource when an empty segment stands where the resource belongs
//!   (`/api/v1//pods` is resource `""`, name `pods`). Such a request names no resource an
//!   authorizer could reason about, so it is refused with
//!   [`RequestInfoError::EmptyResource`] (answered 400).
//! - A `fieldSelector` whose decoded value is not UTF-8 never yields a name (the
//!   request is authorized as the broader list or watch); its recorded raw value has
//!   the invalid bytes replaced by U+FFFD.

mod query;
mod resolve;
pub(crate) mod selector;

use http::{Method, Uri};

pub(crate) use query::first_query_value;
use resolve::resolve_with;

/// The attributes of one request, as upstream `request.RequestInfo` holds them.
///
/// Every string is empty when it does not apply (for example `namespace` for a
/// cluster-scoped resource, or everything but `path` and `verb` for a non-resource
/// request).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestInfo {
    /// True for `/api/<v>/...` and `/apis/<g>/<v>/...` requests that name a resource.
    pub is_resource_request: bool,
    /// The percent-decoded URL path, like Go's `URL.Path`.
    pub path: String,
    /// The Kubernetes verb: `get`, `list`, `watch`, `create`, `update`, `patch`,
    /// `delete`, `deletecollection` or `proxy`; `""` for a resource request whose
    /// method has no verb (e.g. OPTIONS). For non-resource requests, the lower-cased
    /// HTTP method.
    pub verb: String,
    /// The prefix the path starts with, e.g. `api` or `apis`.
    pub api_prefix: String,
    /// The API group; empty for the legacy core group under `/api`.
    pub api_group: String,
    /// The API version, e.g. `v1`.
    pub api_version: String,
    /// The namespace, empty for cluster-scoped requests.
    pub namespace: String,
    /// The resource, e.g. `pods` (not the kind).
    pub resource: String,
    /// The subresource, e.g. `status`; never set for the `proxy` verb.
    pub subresource: String,
    /// The object name from the path, or from a `metadata.name` field selector on a
    /// list or watch.
    pub name: String,
    /// The path segments from the resource on: `resource/name/subresource/...`.
    pub parts: Vec<String>,
    /// The raw first `fieldSelector` query value, recorded only for list, watch and
    /// deletecollection whose verb did not come from a `/watch/` path segment.
    pub field_selector: String,
    /// The raw first `labelSelector` query value, recorded like `field_selector`.
    pub label_selector: String,
}

/// Why a [`RequestInfo`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestInfoError {
    /// A resource path ends right after the `proxy` or `watch` verb segment, e.g.
    /// `/api/v1/watch`. Upstream's RequestInfo filter answers this with a 500.
    #[error("unable to determine kind and namespace from url, {url}")]
    UnknownKindAndNamespace {
        /// The request URL as received (path and query; scheme and authority too when
        /// the request line had them).
        url: String,
    },
    /// The path holds a `%` not followed by two hex digits. Go's HTTP server rejects
    /// such a request line with 400 Bad Request before any filter runs.
    #[error("invalid URL escape in path {path:?}")]
    InvalidPathEscape {
        /// The path as received, still percent-encoded.
        path: String,
    },
    /// The path's percent escapes decode to bytes that are not UTF-8. Refused here
    /// (Go keeps them); answer it as a client error (400).
    #[error("URL path {path:?} does not decode to valid UTF-8")]
    NonUtf8Path {
        /// The path as received, still percent-encoded.
        path: String,
    },
    /// A resource path with an empty segment where the resource belongs, e.g.
    /// `/api/v1//pods`. Upstream would authorize resource `""`; refused here (400).
    #[error("URL path {path:?} has an empty resource segment")]
    EmptyResource {
        /// The decoded path.
        path: String,
    },
}

impl RequestInfoError {
    /// The answer upstream gives: Go's HTTP server refuses a path it cannot decode with
    /// 400 before any filter runs (as plain text; a `Status` here, so clients can read
    /// it); a path it decodes but RequestInfo cannot place is the RequestInfo filter's
    /// 500 `InternalError`.
    pub(crate) fn into_response(self, uri: &Uri) -> http::Response<crate::body::Body> {
        match self {
            e @ RequestInfoError::UnknownKindAndNamespace { .. } => crate::status::internal_error(
                &uri.to_string(),
                &format!("failed to create RequestInfo: {e}"),
            ),
            e => crate::status::Status::failure(
                http::StatusCode::BAD_REQUEST,
                "BadRequest",
                e.to_string(),
            )
            .into_response(),
        }
    }
}

/// Puts the request's [`RequestInfo`] into its extensions unless an earlier layer did.
/// Authorization and routing both read the one stored value; on an error, answer with
/// [`RequestInfoError::into_response`].
pub(crate) fn ensure<B>(req: &mut http::Request<B>) -> Result<(), RequestInfoError> {
    if req.extensions().get::<RequestInfo>().is_none() {
        let info = RequestInfo::from_parts(req.method(), req.uri())?;
        req.extensions_mut().insert(info);
    }
    Ok(())
}

/// Which path prefixes hold resources (upstream `RequestInfoFactory`).
///
/// Prefixes are written without leading or trailing slashes.
///
/// ```
/// use kube_aggregator::authz::request_info::RequestInfoConfig;
///
/// // A host that also serves resources under /clusters-api/<group>/<version>/...
/// let config = RequestInfoConfig {
///     api_prefixes: vec!["api".into(), "apis".into(), "clusters-api".into()],
///     ..RequestInfoConfig::default()
/// };
/// let info = config.resolve(&http::Method::GET, &"/clusters-api/example.com/v1/widgets".parse().unwrap()).unwrap();
/// assert_eq!((info.api_group.as_str(), info.resource.as_str(), info.verb.as_str()), ("example.com", "widgets", "list"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfoConfig {
    /// Prefixes under which resource requests live.
    pub api_prefixes: Vec<String>,
    /// Prefixes whose next segment is the version, with no group segment.
    pub groupless_api_prefixes: Vec<String>,
}

impl Default for RequestInfoConfig {
    /// kube-apiserver's configuration (`pkg/server/config.go` NewRequestInfoResolver):
    /// prefixes `api` and `apis`, with `api` groupless.
    fn default() -> Self {
        RequestInfoConfig {
            api_prefixes: vec!["api".to_owned(), "apis".to_owned()],
            groupless_api_prefixes: vec!["api".to_owned()],
        }
    }
}

impl RequestInfoConfig {
    /// Parses `method` and `uri` into a [`RequestInfo`] under this configuration.
    ///
    /// # Errors
    ///
    /// [`RequestInfoError::UnknownKindAndNamespace`] for a path that stops at a
    /// `proxy`/`watch` verb segment; [`RequestInfoError::InvalidPathEscape`] and
    /// [`RequestInfoError::NonUtf8Path`] for paths that cannot be decoded.
    pub fn resolve(&self, method: &Method, uri: &Uri) -> Result<RequestInfo, RequestInfoError> {
        resolve_with(
            |p| self.api_prefixes.iter().any(|x| x == p),
            |p| self.groupless_api_prefixes.iter().any(|x| x == p),
            method,
            uri,
        )
    }
}

impl RequestInfo {
    /// Resolves with the kube-apiserver configuration (prefixes `api` and `apis`;
    /// `api` groupless). Same as `RequestInfoConfig::default().resolve(..)`, without
    /// building the configuration.
    ///
    /// # Errors
    ///
    /// As [`RequestInfoConfig::resolve`].
    pub fn from_parts(method: &Method, uri: &Uri) -> Result<RequestInfo, RequestInfoError> {
        resolve_with(|p| p == "api" || p == "apis", |p| p == "api", method, uri)
    }

    /// True for requests kube-apiserver treats as long-running (no request timeout,
    /// not counted in flight): verbs `watch` and `proxy`, resource requests for the
    /// subresources `attach`, `exec`, `proxy`, `log` and `portforward`, and
    /// non-resource requests under `/debug/pprof/`. Mirrors
    /// `BasicLongRunningRequestCheck` (`pkg/server/filters/longrunning.go`) with
    /// kube-apiserver's verb and subresource sets.
    pub fn is_long_running(&self) -> bool {
        if matches!(self.verb.as_str(), "watch" | "proxy") {
            return true;
        }
        if self.is_resource_request {
            matches!(
                self.subresource.as_str(),
                "attach" | "exec" | "proxy" | "log" | "portforward"
            )
        } else {
            self.path.starts_with("/debug/pprof/")
        }
    }
}

/// The segments of a decoded path as upstream splits it: leading and trailing slashes
/// trimmed, then split on every `/`, so `//` inside the path gives an empty segment.
///
/// The one split of the path: [`RequestInfo`] takes prefix, group and version from it,
/// and [`RequestInfo::api_path`] (what the aggregator routes by) reads the same segments,
/// so routing and authorization cannot disagree on which group and version a path names.
fn path_segments(path: &str) -> impl Iterator<Item = &str> {
    let trimmed = path.trim_matches('/');
    trimmed.split('/').filter(move |_| !trimmed.is_empty())
}

/// Which part of the API a request path addresses, as kube-aggregator's mux matches it
/// (`/apis`, `/apis/<group>`, `/apis/<group>/<version>` exactly or as a `/`-prefix), with
/// group and version taken from the same segments [`RequestInfo`] authorizes.
///
/// A path with an empty segment where the group or version belongs
/// (`/apis//metrics.k8s.io/v1beta1/...`, `/apis/metrics.k8s.io//v1beta1`, or the same
/// with `%2F`) or a doubled leading slash matches none of upstream's patterns and is
/// [`ApiPath::Other`] here too: upstream answers it 404, and it never reaches an
/// APIService whose group the authorizer was not asked about.
///
/// ```
/// use http::{Method, Uri};
/// use kube_aggregator::authz::{ApiPath, RequestInfo};
///
/// let info = |p: &str| RequestInfo::from_parts(&Method::GET, &p.parse::<Uri>().unwrap()).unwrap();
/// assert_eq!(
///     info("/apis/metrics.k8s.io/v1beta1/nodes").api_path(),
///     ApiPath::GroupVersion { group: "metrics.k8s.io", version: "v1beta1" },
/// );
/// assert_eq!(info("/apis/metrics.k8s.io").api_path(), ApiPath::Group("metrics.k8s.io"));
/// // Authorized as the core group, version "metrics.k8s.io": routed nowhere.
/// assert_eq!(info("/apis//metrics.k8s.io/v1beta1/nodes").api_path(), ApiPath::Other);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiPath<'a> {
    /// `/apis` or `/apis/`: the group list.
    GroupList,
    /// `/apis/<group>` or `/apis/<group>/`.
    Group(&'a str),
    /// `/apis/<group>/<version>` or anything below `/apis/<group>/<version>/`.
    GroupVersion {
        /// The API group.
        group: &'a str,
        /// The API version.
        version: &'a str,
    },
    /// `/api`, `/api/`, or `/api/<version>` and below: the legacy core group.
    Legacy,
    /// Anything else.
    Other,
}

impl RequestInfo {
    /// Where [`RequestInfo::path`] points in the API, for routing (see [`ApiPath`]).
    ///
    /// For a resource request under `/apis`, the group and version returned are
    /// [`RequestInfo::api_group`] and [`RequestInfo::api_version`].
    pub fn api_path(&self) -> ApiPath<'_> {
        // Upstream's mux compares the path itself: exactly one leading slash, and no empty
        // segment before what the pattern names. Read from the path in one pass; a test
        // checks it against `path_segments`, the split RequestInfo itself is built from.
        let Some(rest) = self.path.strip_prefix('/') else {
            return ApiPath::Other;
        };
        // Nothing more, or one trailing slash: the pattern matches exactly.
        let at_end = |rest: &str| matches!(rest, "" | "/");
        let (first, rest) = split_segment(rest);
        match first {
            "apis" if at_end(rest) => ApiPath::GroupList,
            "apis" => {
                let (group, rest) = split_segment(&rest[1..]);
                if group.is_empty() {
                    return ApiPath::Other;
                }
                if at_end(rest) {
                    return ApiPath::Group(group);
                }
                let (version, _) = split_segment(&rest[1..]);
                if version.is_empty() {
                    return ApiPath::Other;
                }
                debug_assert!(
                    !self.is_resource_request
                        || (self.api_group == group && self.api_version == version)
                );
                ApiPath::GroupVersion { group, version }
            }
            "api" if at_end(rest) => ApiPath::Legacy,
            "api" if !split_segment(&rest[1..]).0.is_empty() => ApiPath::Legacy,
            _ => ApiPath::Other,
        }
    }
}

/// `s` up to its first `/`, and the rest from that `/` on (empty when there is none).
fn split_segment(s: &str) -> (&str, &str) {
    match s.bytes().position(|b| b == b'/') {
        Some(i) => s.split_at(i),
        None => (s, ""),
    }
}

#[cfg(test)]
mod tests;
