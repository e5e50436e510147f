//! The immutable snapshot the request path reads: routes by name and by group, the group
//! order of `/apis` and its encoded documents.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::apiservice::{ApiService, ServiceReference, sort_by_group_and_version};
use crate::discovery;
use crate::sharded::ShardedMap;
use crate::transport::{BackendClient, BackendTarget, TransportError};

/// One APIService as the request path sees it: the object with its current status, and
/// how its requests are answered. Routes are shared (`Arc`) between snapshots until the
/// APIService changes.
#[derive(Debug, Clone)]
pub struct Route {
    /// The APIService, with its current status.
    pub apiservice: ApiService,
    /// How requests reach it.
    pub backend: Backend,
}

/// Where a route's requests go: kube-aggregator's proxy handler state, which is either
/// "local" (delegate) or a Service with its transport.
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
    /// The client, or the transport error answered as 500 (the "transport failed to
    /// build" step of
    /// [`pkg/apiserver/handler_proxy.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/handler_proxy.go)).
    pub client: Result<BackendClient, TransportError>,
    /// The HTTP/1.1-only client for upgrade requests ([`Transport::upgrade_client`]); an
    /// error here answers upgrades 503 and leaves other requests alone.
    ///
    /// [`Transport::upgrade_client`]: crate::transport::Transport::upgrade_client
    pub upgrade_client: Result<BackendClient, TransportError>,
}

impl Route {
    /// True when the route's `Available` condition is `True` (a missing condition,
    /// `False` and `Unknown` all count as unavailable, as upstream's `IsAPIServiceConditionTrue`).
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

/// APIServices of one group, versions in priority order: what `/apis/<group>` serves.
#[derive(Debug, Clone)]
pub struct GroupRoutes {
    /// Group name.
    pub name: String,
    /// Versions, highest priority first: by `versionPriority` descending, then the
    /// Kubernetes version order (`v2` > `v1` > `v1beta1`). The first is the group's
    /// `preferredVersion`.
    pub versions: Vec<Arc<Route>>,
    /// The `APIGroup` discovery document, pre-encoded JSON
    /// (`{"kind":"APIGroup","apiVersion":"v1","name":...,"versions":[...],"preferredVersion":...}`).
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
    /// Increases by one with each published change; 0 for the empty table a registry
    /// starts with.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The route of APIService `name` (`<version>.<group>`; `v1.` for the legacy core
    /// group).
    pub fn get(&self, name: &str) -> Option<&Arc<Route>> {
        self.by_name.get(name)
    }

    /// Every route, sorted by name (allocates and sorts on each call: not for the request
    /// path).
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

    /// The route for `group`/`version`: what `/apis/<group>/<version>/...` is proxied to.
    /// Two hash lookups and a scan of the group's few versions.
    pub fn lookup(&self, group: &str, version: &str) -> Option<&Arc<Route>> {
        self.group(group)?
            .versions
            .iter()
            .find(|r| r.apiservice.spec.version == version)
    }

    /// Groups in discovery order: by the highest `groupPriorityMinimum` of the group's
    /// APIServices, descending, ties by APIService name (kube-aggregator's
    /// `SortedByGroupAndVersion`,
    /// [`pkg/apis/apiregistration/v1/helper/helpers.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apis/apiregistration/v1/helper/helpers.go)).
    /// Computed on first use and kept with the snapshot.
    pub fn groups(&self) -> &[Arc<GroupRoutes>] {
        &self.sorted().ordered
    }

    /// The `/apis` `APIGroupList`, encoded (apiregistration.k8s.io first, then
    /// [`RoutingTable::groups`] in order, the core group left out). Unavailable
    /// APIServices are listed: availability never filters discovery, as upstream's
    /// [`pkg/apiserver/handler_apis.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/handler_apis.go) does not.
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
