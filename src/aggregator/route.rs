//! Which handler a request goes to: the mux of kube-aggregator's `apiserver.go`, over one
//! routing-table snapshot and the request's `RequestInfo`.

use std::sync::Arc;

use http::{Method, Request, Response, header};

use super::{Scope, json, openapi};
use crate::authz::ApiPath;
use crate::body::Body;
use crate::discovery::{AggregatedVersion, Negotiated};
use crate::openapi::V3Entry;
use crate::registry::{RemoteBackend, Route};

/// Where [`route`] sends a request. Decided synchronously from the snapshot and the
/// `RequestInfo`, before anything is awaited.
pub(super) enum Target {
    /// Answered already (discovery of one group, the APIService API, a path error).
    Ready(Response<Body>),
    /// `/apis`: our group list merged with the host's.
    GroupList,
    /// `/apis` (or `/api` when `core`) with an aggregated `Accept`.
    Aggregated {
        core: bool,
        version: AggregatedVersion,
    },
    /// `/openapi/v2`, or the `/openapi/v3` root.
    OpenApi { v3_root: bool },
    /// A remote APIService, and how it is reached.
    Remote(Arc<Route>, Arc<RemoteBackend>),
    /// The host's own handlers.
    Inner,
}

/// The mux of kube-aggregator's `apiserver.go`. Reads the RequestInfo authorization read
/// (or computes the same one when no authorization layer runs), so routing and
/// authorization see one group and version.
///
/// `/apis/<group>` is an exact route (a group with APIServices answers its `APIGroup`,
/// others go to the host); `/apis/<group>/<version>` and everything under it is a prefix
/// route to that APIService. The legacy core API (`/api/...`) is proxied only when `v1.`
/// is a remote APIService, as upstream registers `/api` for it. Only `GET` and `HEAD` get
/// the discovery documents; other methods on those paths go to the host.
pub(super) fn route(
    table: &crate::registry::RoutingTable,
    req: &mut Request<Body>,
    scope: &Scope,
) -> Target {
    let is_get = req.method() == Method::GET || req.method() == Method::HEAD;
    if let Err(e) = crate::authz::request_info::ensure(req) {
        return Target::Ready(e.into_response(req.uri()));
    }
    let req = &*req;
    let Some(info) = req.extensions().get::<crate::authz::RequestInfo>() else {
        // `ensure` stored it; never reached, and never a reason to route.
        let uri = req.uri().to_string();
        return Target::Ready(crate::status::internal_error(&uri, &"no RequestInfo"));
    };
    match info.api_path() {
        ApiPath::GroupList if is_get => match aggregated(req, scope, info.path == "/apis") {
            Some(target) => target,
            None => Target::GroupList,
        },
        ApiPath::Group(crate::apiservice::API_GROUP)
        | ApiPath::GroupVersion {
            group: crate::apiservice::API_GROUP,
            ..
        } => Target::Ready(crate::apiregistration::handle(table, req, info)),
        ApiPath::Group(g) if is_get => match table.group(g) {
            Some(group) => Target::Ready(json(group.api_group_json.clone())),
            None => Target::Inner,
        },
        ApiPath::GroupVersion { group, version } => match table.lookup(group, version) {
            Some(route) => remote_target(route),
            None => Target::Inner,
        },
        // The legacy core API is proxied only when `v1.` is a remote APIService.
        ApiPath::Legacy => match table.get("v1.").filter(|r| r.remote().is_some()) {
            Some(route) => remote_target(route),
            None if is_get && matches!(info.path.as_str(), "/api" | "/api/") => {
                match aggregated(req, scope, true) {
                    Some(Target::Aggregated { version, .. }) => Target::Aggregated {
                        core: true,
                        version,
                    },
                    _ => Target::Inner,
                }
            }
            None => Target::Inner,
        },
        ApiPath::Other if is_get && scope.openapi.is_some() => {
            openapi_target(table, req, info, scope)
        }
        _ => Target::Inner,
    }
}

/// The proxy for a remote APIService's route, the inner service for a local one.
fn remote_target(route: &Arc<Route>) -> Target {
    match route.remote() {
        Some(backend) => Target::Remote(route.clone(), backend.clone()),
        None => Target::Inner,
    }
}

/// `/openapi/v2`, `/openapi/v3` and the v3 group-version documents remote APIServices
/// listed; every other path (the host's own v3 documents included) goes to the inner
/// service.
fn openapi_target(
    table: &crate::registry::RoutingTable,
    req: &Request<Body>,
    info: &crate::authz::RequestInfo,
    scope: &Scope,
) -> Target {
    let Some(manager) = &scope.openapi else {
        return Target::Inner;
    };
    match info.path.as_str() {
        "/openapi/v2" => Target::OpenApi { v3_root: false },
        "/openapi/v3" => Target::OpenApi { v3_root: true },
        path => {
            let Some(key) = path.strip_prefix("/openapi/v3/") else {
                return Target::Inner;
            };
            match manager.snapshot().v3.get(key) {
                Some(V3Entry::Remote { apiservice, .. }) => match table.get(apiservice) {
                    Some(route) => remote_target(route),
                    None => Target::Inner,
                },
                Some(V3Entry::Converted(doc)) => Target::Ready(openapi::converted(req, key, doc)),
                None => Target::Inner,
            }
        }
    }
}

/// The aggregated-discovery target of a discovery request, when a manager serves it:
/// only the exact path (`/apis`, not `/apis/`, as upstream's mux) with an aggregated
/// `Accept`; `Some(Ready(406))` when the `Accept` allows nothing JSON.
fn aggregated(req: &Request<Body>, scope: &Scope, exact: bool) -> Option<Target> {
    scope.discovery.as_ref()?;
    let accept = crate::gocompat::header(req.headers(), header::ACCEPT);
    match crate::discovery::negotiate(accept) {
        Negotiated::Aggregated(version) if exact => Some(Target::Aggregated {
            core: false,
            version,
        }),
        Negotiated::NotAcceptable if exact => {
            Some(Target::Ready(crate::discovery::not_acceptable()))
        }
        _ => None,
    }
}
