//! The tenants' feed: the same small vocabulary as [`ApiServiceEvent`]'s, one level up.

use std::future::Future;

use crate::apiservice::ApiService;
use crate::registry::ApplyError;
use crate::source::ApiServiceEvent;

/// A tenant and its APIServices.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TenantSpec {
    /// The tenant's name (see [`Tenant`](crate::tenant::Tenant)).
    pub name: String,
    /// Every APIService of the tenant.
    pub apiservices: Vec<ApiService>,
}

impl TenantSpec {
    /// Tenant `name` with `apiservices`.
    pub fn new(name: impl Into<String>, apiservices: Vec<ApiService>) -> TenantSpec {
        TenantSpec {
            name: name.into(),
            apiservices,
        }
    }
}

/// One change to the set of tenants, or inside one.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[allow(clippy::large_enum_variant)] // events are moved once, never stored in bulk
pub enum TenantEvent {
    /// Mounted when new; its APIServices become exactly these (as
    /// [`ApiServiceEvent::Resynced`] within the tenant).
    Applied(TenantSpec),
    /// Unmounted, by name: its requests are 404 from now on, its APIServices gone.
    Deleted(String),
    /// One change to the APIServices of a mounted tenant.
    ApiService {
        /// The tenant's name.
        tenant: String,
        /// The change.
        event: ApiServiceEvent,
    },
    /// The complete set of tenants, each with all its APIServices: tenants not listed are
    /// unmounted. The set of mounted tenants changes in one step.
    Resynced(Vec<TenantSpec>),
}

/// A feed of [`TenantEvent`]s (a watch of workspaces, a database, files).
pub trait TenantSource: Send + 'static {
    /// The next event; `None` when the source has ended for good.
    fn next_event(&mut self) -> impl Future<Output = Option<TenantEvent>> + Send;
}

/// What one part of a [`TenantEvent`] could not do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TenantError {
    /// The name is not a tenant name; nothing of that tenant was applied.
    #[error(transparent)]
    InvalidName(#[from] crate::tenancy::InvalidTenantName),
    /// An APIService change for a tenant that is not mounted.
    #[error("clusters {tenant:?} not found")]
    NotMounted {
        /// The tenant's name.
        tenant: String,
    },
    /// Some of the tenant's APIServices were rejected (the rest were applied), each with
    /// upstream's validation message.
    #[error("cluster {tenant:?}: {source}")]
    ApiServices {
        /// The tenant's name.
        tenant: String,
        /// The rejected APIServices.
        #[source]
        source: ApplyError,
    },
}

/// Parts of a [`TenantEvent`] that could not be applied; everything else was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct TenantApplyError {
    /// One entry per failed part.
    pub errors: Vec<TenantError>,
}
