//! How an update becomes the next table: the writer's state, the draft of one update,
//! and the two steps every change goes through (`upsert` one APIService, `publish` the
//! draft).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use super::table::group_routes;
use super::{Backend, Registry, RemoteBackend, Route, RoutingTable};
use crate::apiservice::{
    ApiService, CONDITION_AVAILABLE, ConditionStatus, ValidationError, validate,
};
use crate::rt::lock;
use crate::sharded::ShardedMap;
use crate::transport::BackendTarget;

/// What only the writer reads: the last table it published and each group's members.
/// Kept under the registry's writer mutex; the request path never sees it.
#[derive(Default)]
pub(super) struct Writer {
    /// The last published table; the next one starts from it.
    pub(super) current: Arc<RoutingTable>,
    /// The APIService names of each group.
    pub(super) members: HashMap<Arc<str>, BTreeSet<Arc<str>>>,
}

impl Registry {
    /// Adds `svc` to the draft `next`, or rejects it into `rejected` when it does not
    /// validate. The stored object takes its status from `prev` (the registry owns
    /// status), its creation timestamp from `prev` or now, and for a local APIService the
    /// `Local` condition (recorded in `changed_status` when that changed something). A
    /// remote backend reuses the previous clients while the TLS settings are the same, so
    /// an update of `service` alone keeps pooled connections. An APIService equal to the
    /// one in `prev` keeps its route `Arc`, which `publish` reads as "unchanged".
    pub(super) fn upsert(
        &self,
        next: &mut Draft,
        prev: &ShardedMap<Arc<Route>>,
        mut svc: ApiService,
        rejected: &mut Vec<ValidationError>,
        changed_status: &mut Vec<ApiService>,
    ) {
        if let Err(e) = validate(&svc) {
            rejected.push(e);
            return;
        }
        let name = svc.metadata.name.clone();
        let old = prev.get(name.as_str());
        // The registry owns status (as the upstream strategy wipes it on create and keeps
        // it on update): a source only changes spec.
        svc.status = old.map(|r| r.apiservice.status.clone()).unwrap_or_default();
        if svc.metadata.creation_timestamp.is_none() {
            svc.metadata.creation_timestamp = old
                .and_then(|r| r.apiservice.metadata.creation_timestamp.clone())
                .or_else(|| Some(self.now_rfc3339()));
        }
        let backend = match &svc.spec.service {
            None => {
                // Local APIServices are always available (local availability controller).
                let changed = svc.set_condition(
                    CONDITION_AVAILABLE,
                    ConditionStatus::True,
                    "Local",
                    "Local APIServices are always available",
                    &self.now_rfc3339(),
                );
                if changed {
                    changed_status.push(svc.clone());
                }
                Backend::Local
            }
            Some(service) => {
                let target = BackendTarget {
                    server_name: service.server_name(),
                    ca_bundle: svc.spec.ca_bundle.clone(),
                    insecure_skip_tls_verify: svc.spec.insecure_skip_tls_verify,
                };
                match old.and_then(|r| r.remote()) {
                    // Same Service and TLS settings: the same clients.
                    Some(b) if b.target == target && b.service == *service => {
                        Backend::Remote(b.clone())
                    }
                    // Same TLS settings: keep the clients and their pooled connections.
                    Some(b) if b.target == target => Backend::Remote(Arc::new(RemoteBackend {
                        service: service.clone(),
                        target,
                        client: b.client.clone(),
                        upgrade_client: b.upgrade_client.clone(),
                    })),
                    _ => {
                        let client = self.shared.transport.client(&target);
                        if let Err(e) = &client {
                            tracing::warn!(apiservice = %name, error = %e, "cannot build the transport");
                        }
                        let upgrade_client = self.shared.transport.upgrade_client(&target);
                        Backend::Remote(Arc::new(RemoteBackend {
                            service: service.clone(),
                            target,
                            client,
                            upgrade_client,
                        }))
                    }
                }
            }
        };
        // An unchanged APIService keeps its route, so its group is not rebuilt (a resync
        // of thousands of objects then costs only the comparisons).
        if let Some((key, old)) = prev.get_key_value(name.as_str()) {
            if old.apiservice == svc {
                // `next` started as a copy of `prev` and so holds this route, unless an
                // earlier entry of the same update replaced it.
                if !next
                    .map
                    .get(name.as_str())
                    .is_some_and(|r| Arc::ptr_eq(r, old))
                {
                    next.insert(key.clone(), old.clone());
                }
                return;
            }
        }
        next.insert(
            prev.get_key_value(name.as_str())
                .map_or_else(|| Arc::from(name), |(k, _)| k.clone()),
            Arc::new(Route {
                apiservice: svc,
                backend,
            }),
        );
    }

    /// Publishes `next`: rebuilds the groups of the APIServices it touched (a route that
    /// is still the same `Arc` changed nothing), shares everything else, swaps the table in
    /// and wakes [`Registry::changed`] waiters.
    pub(super) fn publish(&self, w: &mut Writer, next: Draft) {
        let prev = w.current.clone();
        let Draft {
            map: next,
            mut touched,
        } = next;
        touched.sort_unstable();
        touched.dedup();
        let group_of = |r: &Route| -> Arc<str> { Arc::from(r.apiservice.spec.group.as_str()) };
        let mut affected: HashSet<Arc<str>> = HashSet::new();
        for name in &touched {
            let (old, new) = (prev.by_name.get(name), next.get(name));
            if let (Some(old), Some(new)) = (old, new) {
                if Arc::ptr_eq(old, new) {
                    continue;
                }
            }
            if let Some(old) = old {
                let g = group_of(old);
                remove_member(&mut w.members, &g, name);
                affected.insert(g);
            }
            if let Some(new) = new {
                let g = group_of(new);
                w.members.entry(g.clone()).or_default().insert(name.clone());
                affected.insert(g);
            }
        }
        let mut groups = prev.groups.clone();
        for g in affected {
            match w.members.get(&g) {
                Some(members) if !members.is_empty() => {
                    groups.insert(g.clone(), Arc::new(group_routes(&g, members, &next)));
                }
                _ => {
                    groups.remove(&g);
                }
            }
        }
        let table = Arc::new(RoutingTable {
            generation: prev.generation + 1,
            by_name: next,
            groups,
            sorted: OnceLock::new(),
        });
        w.current = table.clone();
        self.shared.table.store(table);
        for waker in lock(&self.shared.wakers).drain(..) {
            waker.wake();
        }
    }
}

/// The next table's routes while an update is assembled, and the names it touched.
pub(super) struct Draft {
    pub(super) map: ShardedMap<Arc<Route>>,
    pub(super) touched: Vec<Arc<str>>,
}

impl Draft {
    pub(super) fn insert(&mut self, key: Arc<str>, route: Arc<Route>) {
        self.touched.push(key.clone());
        self.map.insert(key, route);
    }
}

fn remove_member(
    members: &mut HashMap<Arc<str>, BTreeSet<Arc<str>>>,
    group: &Arc<str>,
    name: &Arc<str>,
) {
    if let Some(set) = members.get_mut(group) {
        set.remove(name);
        if set.is_empty() {
            members.remove(group);
        }
    }
}
