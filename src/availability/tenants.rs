//! The seam through which the availability controller reads the mounted tenants: what it
//! needs of them (each tenant's registry and a change signal), implemented by
//! [`Tenants`](crate::tenant::Tenants), so the controller does not depend on how tenants
//! are composed.

use crate::registry::Registry;
use crate::tenancy::{Changed, Tenant};

/// The tenants an [`AvailabilityController`](super::AvailabilityController) checks
/// besides the stack's own registry (see
/// [`AvailabilityController::tenants`](super::AvailabilityController::tenants)).
///
/// [`Tenants`](crate::tenant::Tenants) implements it; a host with tenants of its own
/// making implements it over those.
pub trait MountedTenants: Send + Sync + 'static {
    /// Every mounted tenant with its registry, in no particular order.
    fn registries(&self) -> Vec<(Tenant, Registry)>;

    /// A count that increases with every tenant mounted or unmounted and every table a
    /// tenant's registry publishes.
    fn generation(&self) -> u64;

    /// Completes once [`MountedTenants::generation`] is greater than `seen`.
    fn changed(&self, seen: u64) -> Changed;
}
