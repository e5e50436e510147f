//! Multi-tenant mounting, in kcp's shape: one stack serves `/clusters/<name>/...` for any
//! number of tenants (kcp's logical clusters, or workspaces), each with an APIService
//! table of its own (routing, legacy and aggregated discovery, `/openapi`, the
//! `apiregistration.k8s.io` API, availability), while every tenant shares the stack's
//! transport (one client, so one connection pool, per backend target, whichever tenants
//! and the stack's own APIServices reach it), its resolver and its one worker.
//!
//! What a request under `/clusters/<name>` goes through:
//!
//! 1. [`TenantLayer`], at the edge, before anything reads the path: `/clusters/<name>`
//!    is cut off the path (`/clusters/team-a/apis/g/v/x` goes on as `/apis/g/v/x`,
//!    `/clusters/team-a` as `/`) and the tenant is put into the request extensions as a
//!    [`Tenant`], as kcp's `WithClusterScope` filter does
//!    ([pkg/server/filters/filters.go](https://github.com/kcp-dev/kcp/blob/main/pkg/server/filters/filters.go)).
//!    Everything behind (request timeout, in-flight limits, authorization, routing) parses
//!    the path that remains, once: the one `RequestInfo` authorization and routing share.
//!    A name that is not a tenant name (kcp's logical-cluster pattern, empty included) is
//!    400, as in kcp.
//! 2. Authorization: the tenant is [`Attributes::tenant`](crate::authz::Attributes::tenant),
//!    and the SubjectAccessReview carries it as `spec.extra["authorization.kcp.io/cluster-name"]`
//!    ([`TENANT_EXTRA_KEY`], kcp's key); impersonation checks and self reviews are asked
//!    within the tenant too.
//! 3. Routing: the aggregator looks the tenant up in [`Tenants`] (one lock-free load) and
//!    routes by that tenant's table alone, so a tenant never sees, reaches or lists another
//!    tenant's APIServices. A tenant that is not mounted is 404 `clusters "<name>" not
//!    found`, after authorization, as kube-apiserver answers a missing object only to a
//!    caller allowed to ask for it ([`TenantGateLayer`] answers the same right after
//!    authorization, so the self reviews are not answered for it either). Paths the
//!    tenant's APIServices do not serve go to the host's handlers with the [`Tenant`] in
//!    the extensions. A SelfSubjectRulesReview lists what the authorizer's
//!    [`rules_for`](crate::authz::Authorizer::rules_for) gives, which takes no tenant.
//! 4. To the backend, as [`TenantForwarding`] says: the path stripped and the tenant in
//!    [`TENANT_HEADER`] (`X-Kubernetes-Cluster`, the header kcp read the cluster from),
//!    or the `/clusters/<name>` prefix kept. The same holds for the aggregator's own
//!    requests of that tenant's backends (availability probes, discovery and OpenAPI
//!    fetches). A client's own `X-Kubernetes-Cluster` is removed at the edge (by
//!    [`TenantLayer`]) and again by the proxy, so it never reaches the authorizer, the
//!    host or a backend; an extension server behind the aggregator, which authenticates
//!    it as a front proxy, reads the aggregator's.
//!
//! Tenants come and go at run time through the same kind of feed as APIServices: a
//! [`TenantSource`] of [`TenantEvent`]s (a tenant applied with its APIServices, deleted,
//! one APIService change inside a tenant, or the full set), or [`Tenants::apply`].
//!
//! ```no_run
//! # #[cfg(feature = "tokio")]
//! # async fn run(widgets: kube_aggregator::apiservice::ApiService) -> Result<(), Box<dyn std::error::Error>> {
//! use kube_aggregator::Aggregator;
//! use kube_aggregator::authz::AlwaysAllow;
//! use kube_aggregator::tenant::{TenantEvent, TenantForwarding, TenantSpec};
//! use kube_aggregator::transport::RustlsTransport;
//!
//! let transport = RustlsTransport::from_pem(&std::fs::read("proxy.crt")?, &std::fs::read("proxy.key")?)?;
//! let (aggregator, worker) = Aggregator::builder(transport)
//!     .authorizer(AlwaysAllow)
//!     .tenants(TenantForwarding::Header)
//!     .build()?;
//! tokio::spawn(worker);
//! let tenants = aggregator.tenants().expect("tenants are mounted");
//! // `kubectl --server https://host/clusters/team-a api-resources` now lists widgets.
//! tenants.apply(TenantEvent::Applied(TenantSpec::new("team-a", vec![widgets])))?;
//! # Ok(()) }
//! ```

pub(crate) mod client;
mod event;
mod gate;
mod layer;
mod signal;
mod tenants;

use std::sync::Arc;

use http::HeaderName;

pub use event::{TenantApplyError, TenantError, TenantEvent, TenantSource, TenantSpec};
pub(crate) use gate::not_found;
pub use gate::{TenantGate, TenantGateLayer};
pub use layer::{ResponseFuture, TenantLayer, TenantService};
pub use signal::Changed;
pub use tenants::{TenantStatusSink, Tenants, TenantsConfig};

/// The path prefix of a tenant's requests: `/clusters/<name>/...` (kcp's).
pub const CLUSTERS_PREFIX: &str = "/clusters/";

/// The header that names the tenant to a backend under [`TenantForwarding::Header`]:
/// `X-Kubernetes-Cluster: <name>` (the header kcp's servers read the logical cluster
/// from). A client's own copy is removed by [`TenantLayer`] and by the proxy, whatever
/// the forwarding, as a client's `X-Remote-*` headers are.
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

/// The tenant a request addresses. [`TenantLayer`] puts it into the request extensions
/// for a path under `/clusters/<name>`; the host's handlers read it there to know whose
/// request they serve.
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

#[cfg(test)]
mod tests;
