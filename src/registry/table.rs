//! The immutable snapshot the request path reads: routes by name and by group, the group
//! order of `/apis` and its encoded documents.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::apiservice::{ApiService, ServiceReference, sort_by_group_and_version};
use crate::discovery;
use crate::sharded::ShardedMap;
use crate::transport::{BackendClient, BackendTarget, TransportError};

/// One APIService as the request path sees it.
#[derive(Debug, Clone)]
pub struct Route {
    /// The APIService, with its current status.
    pub apiservice: ApiService,
    /// How requests reach it.
    pub backend: Backend,
}

/// Where a route's requests go.
#[derive(Debug, Clone)]
pub enum Backend {
    /// A local APIService (no `spec.service`): the host's own handlers.
    Local,
    /// A remote APIService: its Service and clients, shared by the snapshots in which
    /// its TLS settings stay the same.
    Remote(Arc<RemoteBackend>),
}

/// How a remote APIService is reached.
#[derive(Debug)]
#[non_exhaustive]
pub struct RemoteBackend {
    /// `spec.service`.
    pub service: ServiceReference,
    /// TLS settings the clients were built for.
    pub target: BackendTarget,
    /// The client, or the transport error answered as 500 (docs/upstream-behaviour.md
    /// §3.1 step 4).
    pub client: Result<BackendClient, TransportError>,
    /// The HTTP/1.1-only client for upgrade requests.
    pub upgrade_client: Result<BackendClient, TransportError>,
}

impl Route {
    /// True when the route's `Available` condition is `True`.
    pub fn is_available(&self) -> bool {
        self.apiservice.is_available()
    }

    /// The Service and clients of a remote APIService; `None` for a local one.
    pub fn remote(&self) -> Option<&Arc<RemoteBackend>> {
        match &self.backend {
            Backend::Remote(remote) => Some(remote),
            Backend::Local => None,
        }
    }
}

/// APIServices of one group, versions in priority order.
#[derive(Debug, Clone)]
pub struct GroupRoutes {
    /// Group name.
    pub name: String,
    /// Versions, highest priority first.
    pub versions: Vec<Arc<Route>>,
    /// The `APIGroup` discovery document, pre-encoded.
    pub api_group_json: Bytes,
}

/// An immutable snapshot of every APIService, indexed for the request path.
///
/// A new snapshot shares every unchanged route and group with the previous one; only the
/// groups an update touches are rebuilt. The group order of `/apis` and its encoded
/// `APIGroupList` are computed on first use.
#[derive(Debug, Default)]
pub struct RoutingTable {
    pub(super) generation: u64,
    pub(super) by_name: ShardedMap<Arc<Route>>,
    pub(super) groups: ShardedMap<Arc<GroupRoutes>>,
    pub(super) sorted: OnceLock<Sorted>,
}

#[derive(Debug)]
pub(super) struct Sorted {
    ordered: Vec<Arc<GroupRoutes>>,
    api_group_list_json: Bytes,
}

impl RoutingTable {
    /// Increases by one with each published change.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The route of APIService `name` (`<version>.<group>`).
    pub fn get(&self, name: &str) -> Option<&Arc<Route>> {
        self.by_name.get(name)
    }

    /// Every route, sorted by name.
    pub fn routes(&self) -> impl Iterator<Item = &Arc<Route>> {
        let mut all: Vec<(&Arc<str>, &Arc<Route>)> = self.by_name.iter().collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        all.into_iter().map(|(_, r)| r)
    }

    /// Every route, in no particular order (no sorting, for scans).
    pub(crate) fn routes_unordered(&self) -> impl Iterator<Item = &Arc<Route>> {
        self.by_name.values()
    }

    /// The number of APIServices.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// True when there are no APIServices.
    pub fn is_empty(&self) -> bool {
        self.by_name.len() == 0
    }

    /// The group's routes, if any APIService serves `group`.
    pub fn group(&self, group: &str) -> Option<&GroupRoutes> {
        self.groups.get(group).map(|g| &**g)
    }

    /// The route for `group`/`version`.
    pub fn lookup(&self, group: &str, version: &str) -> Option<&Arc<Route>> {
        self.group(group)?
            .versions
            .iter()
            .find(|r| r.apiservice.spec.version == version)
    }

    /// Groups in discovery order (docs/upstream-behaviour.md §2.3).
    pub fn groups(&self) -> &[Arc<GroupRoutes>] {
        &self.sorted().ordered
    }

    /// The `/apis` `APIGroupList`, encoded (apiregistration.k8s.io first).
    pub fn api_group_list_json(&self) -> &Bytes {
        &self.sorted().api_group_list_json
    }

    fn sorted(&self) -> &Sorted {
        self.sorted.get_or_init(|| {
            let order = sort_by_group_and_version(self.routes_unordered().map(|r| &r.apiservice));
            let ordered: Vec<Arc<GroupRoutes>> = order
                .iter()
                .filter_map(|gv| self.groups.get(gv.group).cloned())
                .collect();
            let api_group_list_json = discovery::api_group_list_json(ordered.iter().map(|g| {
                let versions = g
                    .versions
                    .iter()
                    .map(|r| r.apiservice.spec.version.as_str());
                (g.name.as_str(), versions)
            }));
            Sorted {
                ordered,
                api_group_list_json,
            }
        })
    }
}

/// The routes of one group, versions in priority order, with its `APIGroup` document.
pub(super) fn group_routes(
    group: &str,
    members: &BTreeSet<Arc<str>>,
    by_name: &ShardedMap<Arc<Route>>,
) -> GroupRoutes {
    let routes: Vec<&Arc<Route>> = members.iter().filter_map(|n| by_name.get(n)).collect();
    let order = sort_by_group_and_version(routes.iter().map(|r| &r.apiservice));
    let versions: Vec<Arc<Route>> = order
        .iter()
        .flat_map(|gv| gv.versions.iter())
        .filter_map(|svc| by_name.get(svc.name()).cloned())
        .collect();
    let api_group_json = discovery::api_group_json(
        group,
        versions.iter().map(|r| r.apiservice.spec.version.as_str()),
    );
    GroupRoutes {
        name: group.to_owned(),
        versions,
        api_group_json,
    }
}
