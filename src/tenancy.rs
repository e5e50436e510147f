//! What a tenant is to the rooms that read one: its name ([`Tenant`], kcp's logical
//! cluster), where it travels (the `/clusters/<name>` path prefix, [`TENANT_HEADER`] to a
//! backend, [`TENANT_EXTRA_KEY`] in a SubjectAccessReview), how its requests reach
//! backends ([`TenantForwarding`]), its 404, and the change signal the tenants' readers
//! wait on ([`Changed`]).
//!
//! A leaf: it uses only [`body`](crate::body) and [`status`](crate::status), so
//! authorization, the proxy, the in-flight limits, the self reviews, availability and
//! the aggregator read a request's tenant without reaching up to the tenants' composition
//! (the per-tenant registries, clients and feed, in `aggregator::tenants`). The public
//! names are re-exported from [`tenant`](crate::tenant).
//!
//! Floor 2 of the import order (docs/architecture.md): uses `body`, `rt`, `status`; used by
//! `aggregator`, `authz`, `availability`, `impersonation`, `inflight`, `proxy`,
//! `selfreview`, `tenant`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use http::{HeaderName, Response};

use crate::body::Body;
use crate::rt::lock;
use crate::status::Status;

/// The path prefix of a tenant's requests: `/clusters/<name>/...` (kcp's).
pub const CLUSTERS_PREFIX: &str = "/clusters/";

/// The header that names the tenant to a backend under [`TenantForwarding::Header`]:
/// `X-Kubernetes-Cluster: <name>` (the header kcp's servers read the logical cluster from).
/// A client's own copy is removed by [`TenantLayer`](crate::tenant::TenantLayer) and by the
/// proxy, whatever the forwarding, as a client's `X-Remote-*` headers are.
pub const TENANT_HEADER: HeaderName = HeaderName::from_static("x-kubernetes-cluster");

/// The SubjectAccessReview `spec.extra` key that carries the tenant of a request:
/// `authorization.kcp.io/cluster-name`, one value, the tenant's name (the key kcp's
/// webhook authorizer sends). A value of the same key in the user's own extra is replaced
/// for a tenant's request and removed for any other, so no authenticator or front proxy
/// can place a request in a tenant.
pub const TENANT_EXTRA_KEY: &str = "authorization.kcp.io/cluster-name";

/// How a tenant's requests reach its backends. The aggregator's own requests of those
/// backends (probes, discovery and OpenAPI fetches) are sent the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TenantForwarding {
    /// The path without `/clusters/<name>` (what a single-tenant extension server serves)
    /// and the tenant in [`TENANT_HEADER`]. The default: backends that ignore the header
    /// work unchanged.
    #[default]
    Header,
    /// The path as the client sent it, `/clusters/<name>` included (what a kcp shard
    /// serves); `X-Forwarded-Uri` keeps the prefix too. No tenant header is sent.
    PathPrefix,
}

/// The tenant a request addresses. [`TenantLayer`](crate::tenant::TenantLayer) puts it into
/// the request extensions for a path under `/clusters/<name>`; the host's handlers read it
/// there to know whose request they serve.
///
/// A name is kcp's logical-cluster name: one or more `:`-separated parts, each 1 to 63
/// lower-case letters, digits and `-`, starting and ending with a letter or digit
/// (`team-a`, `root:org:team-a`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tenant(Arc<str>);

impl Tenant {
    /// The tenant `name`.
    ///
    /// # Errors
    ///
    /// [`InvalidTenantName`] when `name` is not a logical-cluster name (see [`Tenant`]).
    pub fn new(name: &str) -> Result<Tenant, InvalidTenantName> {
        if is_valid_name(name) {
            Ok(Tenant(Arc::from(name)))
        } else {
            Err(InvalidTenantName {
                name: name.to_owned(),
            })
        }
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.0
    }

    pub(crate) fn shared_name(&self) -> &Arc<str> {
        &self.0
    }
}

impl std::fmt::Display for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A tenant name that is not a logical-cluster name; kcp's wording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cluster: {name:?} does not match the regex")]
pub struct InvalidTenantName {
    /// The name as given.
    pub name: String,
}

/// kcp's `^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?:)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`.
fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.split(':').all(|part| {
            let b = part.as_bytes();
            let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            !b.is_empty()
                && b.len() <= 63
                && b.first().is_some_and(alnum)
                && b.last().is_some_and(alnum)
                && b.iter().all(|c| alnum(c) || *c == b'-')
        })
}

/// `clusters "<name>" not found`, apimachinery's `NewNotFound` for resource `clusters`.
pub(crate) fn not_found(tenant: &Tenant) -> Response<Body> {
    Status::not_found("", "clusters", tenant.name()).into_response()
}

/// Bumped by every change of the tenant set and every table a tenant publishes.
#[derive(Default)]
pub(crate) struct Signal {
    /// The count of changes so far; a waiter compares it with the value it last saw, so
    /// a change between two polls is never missed.
    pub(crate) generation: AtomicU64,
    /// The tasks waiting in [`Changed`], each woken once by the next bump.
    wakers: Mutex<Vec<Waker>>,
}

impl Signal {
    /// Counts one change and wakes every waiter.
    pub(crate) fn bump(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        for w in lock(&self.wakers).drain(..) {
            w.wake();
        }
    }
}

/// Future of [`Tenants::changed`](crate::tenant::Tenants::changed).
pub struct Changed {
    pub(crate) signal: Arc<Signal>,
    pub(crate) seen: u64,
}

debug_fields!(Changed { seen });

impl Future for Changed {
    type Output = u64;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
        let g = self.signal.generation.load(Ordering::Acquire);
        if g > self.seen {
            return Poll::Ready(g);
        }
        {
            let mut wakers = lock(&self.signal.wakers);
            if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                wakers.push(cx.waker().clone());
            }
        }
        // Re-checked after registering, so a bump between the two loads is not missed.
        let g = self.signal.generation.load(Ordering::Acquire);
        if g > self.seen {
            Poll::Ready(g)
        } else {
            Poll::Pending
        }
    }
}
