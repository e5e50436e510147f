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
//!
//! Floor 9 of the import order (docs/architecture.md): uses `aggregator`, `authz`, `body`,
//! `filter`, `status`, `tenancy`; used by `builder`.

mod gate;
mod layer;

pub use gate::{TenantGate, TenantGateLayer};
pub use layer::{ResponseFuture, TenantLayer, TenantService};

pub use crate::aggregator::tenants::{
    TenantApplyError, TenantError, TenantEvent, TenantSource, TenantSpec, TenantStatusSink,
    Tenants, TenantsConfig,
};

pub use crate::tenancy::{
    CLUSTERS_PREFIX, Changed, InvalidTenantName, TENANT_EXTRA_KEY, TENANT_HEADER, Tenant,
    TenantForwarding,
};

#[cfg(test)]
mod tests;
