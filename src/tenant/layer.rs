//! The edge of a tenant's request: `/clusters/<name>` off the path, the [`Tenant`] into
//! the extensions (kcp's `WithClusterScope`).

use std::borrow::Cow;

use http::uri::PathAndQuery;
use http::{Request, Response, StatusCode, Uri};

use super::{CLUSTERS_PREFIX, TENANT_HEADER, Tenant};
use crate::authz::RequestInfo;
use crate::body::Body;
use crate::filter::{BodyService, Filter, Filtered, Unwrapped, filter_layer};
use crate::status::Status;

/// Layer that takes the tenant out of a `/clusters/<name>/...` path; put it in front of
/// everything that reads the path (the timeout, in-flight and authorization layers).
///
/// For a path starting with `/clusters/`: the next segment is the tenant's name, taken as
/// written (a `%` escape in it is not a name); the rest of the path (`/` when there is
/// none) and the query go on as the request's URI, with the [`Tenant`] in the
/// extensions. A `RequestInfo` already in the extensions, which described the path
/// before, is removed so the one behind is computed from the path that remains.
///
/// Answers itself, 400 `BadRequest` `Status`: a name that is not a tenant name (empty
/// included: `/clusters//apis`), kcp's `invalid cluster: "<name>" does not match the
/// regex`; and a path whose `/clusters/` only appears once percent escapes are decoded
/// (`/clusters%2Fteam-a/...`), which names a tenant in one spelling and none in another.
/// Other paths pass untouched.
///
/// A client's own [`TENANT_HEADER`] (`X-Kubernetes-Cluster`) is removed from every request:
/// the path alone names the tenant.
///
/// Whether the tenant is mounted is not checked here: the aggregator answers 404 for one
/// that is not, after authentication and authorization.
///
/// ```
/// use kube_aggregator::tenant::TenantLayer;
/// let layer = TenantLayer::new();
/// # let _ = layer;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TenantLayer {
    enabled: bool,
}

impl TenantLayer {
    /// A layer that mounts tenants under `/clusters/`.
    pub fn new() -> TenantLayer {
        TenantLayer { enabled: true }
    }

    /// A layer that passes every request untouched (a stack without tenants).
    pub(crate) fn off() -> TenantLayer {
        TenantLayer { enabled: false }
    }
}

impl Default for TenantLayer {
    fn default() -> Self {
        TenantLayer::new()
    }
}

filter_layer! {
    /// Service of [`TenantLayer`].
    pub type TenantService<S> = FilterService<TenantLayer, S>;
}

impl<S: BodyService<B>, B> Filter<S, B> for TenantLayer {
    type Future = ResponseFuture<S::Future>;

    fn filter(&self, inner: &mut S, mut req: Request<B>) -> Self::Future {
        if self.enabled {
            if let Err(res) = mount(&mut req) {
                return Filtered::ready(*res);
            }
        }
        Filtered::inner(inner.call(req))
    }
}

/// Strips the tenant off `req`'s path, or the answer refusing it.
fn mount<B>(req: &mut Request<B>) -> Result<(), Box<Response<Body>>> {
    // Only the path names a tenant: a client's own tenant header is dropped here, before
    // authorization and the host's handlers see it (the proxy drops it again).
    req.headers_mut().remove(TENANT_HEADER);
    let path = req.uri().path();
    let Some(after) = path.strip_prefix(CLUSTERS_PREFIX) else {
        if escaped_prefix(path) {
            return Err(bad_request(
                "the /clusters/ prefix of a path must not be percent-encoded".to_owned(),
            ));
        }
        return Ok(());
    };
    let (name, rest) = match after.find('/') {
        Some(i) => (&after[..i], &after[i..]),
        None => (after, "/"),
    };
    let tenant = Tenant::new(name).map_err(|e| bad_request(e.to_string()))?;
    let uri = rewritten(req.uri(), rest).map_err(|e| bad_request(e.to_string()))?;
    *req.uri_mut() = uri;
    req.extensions_mut().remove::<RequestInfo>();
    req.extensions_mut().insert(tenant);
    Ok(())
}

/// `uri` with its path replaced by `path`; scheme, authority and query kept.
fn rewritten(uri: &Uri, path: &str) -> Result<Uri, http::Error> {
    let pq = match uri.query() {
        Some(q) => PathAndQuery::try_from(format!("{path}?{q}"))?,
        None => PathAndQuery::try_from(path)?,
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(pq);
    Ok(Uri::from_parts(parts)?)
}

/// True when `path` starts with `/clusters/` only after percent-decoding.
fn escaped_prefix(path: &str) -> bool {
    // Only the first bytes matter: `/clusters/` is at most 30 bytes when fully escaped.
    let head = &path.as_bytes()[..path.len().min(3 * CLUSTERS_PREFIX.len())];
    if !head.contains(&b'%') {
        return false;
    }
    let decoded: Cow<'_, [u8]> = percent_encoding::percent_decode(head).into();
    decoded.starts_with(CLUSTERS_PREFIX.as_bytes())
}

/// Response future of [`TenantService`] and [`super::TenantGate`]: the inner call, or
/// the refusal.
pub type ResponseFuture<F> = Filtered<F, Unwrapped<F>>;

fn bad_request(message: String) -> Box<Response<Body>> {
    Box::new(Status::failure(StatusCode::BAD_REQUEST, "BadRequest", message).into_response())
}
