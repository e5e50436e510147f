//! Bumps the tenants' change signal ([`Signal`]) on every table a tenant's registry
//! publishes.

use std::sync::Arc;

use crate::registry::{RoutingTable, TableObserver};
use crate::tenancy::Signal;

/// Bumps the tenants' signal on every table a tenant publishes.
pub(super) struct Bump(pub(super) Arc<Signal>);

impl TableObserver for Bump {
    fn table_published(&self, _table: &Arc<RoutingTable>) {
        self.0.bump();
    }
}
