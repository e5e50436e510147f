//! What the discovery and OpenAPI managers are told about APIServices: plain data and a
//! way to send a request to the backend, never the registry itself.

use http::{Request, Response};
use tower::util::BoxCloneSyncService;

use crate::body::{Body, BoxError};

/// A group-version as plain names: `(group, version)`, the group empty for the core
/// group. The key of every per-group-version map in discovery.
pub(super) type GroupVersion = (String, String);

/// Sends one request to an APIService's backend. The request's URI is a path and query
/// (`/apis`, `/openapi/v2`); the fetcher resolves the Service, connects with the
/// APIService's TLS settings and the proxy client certificate, and sends it with the
/// headers it carries (the caller sets the `X-Remote-*` identity). No availability gate:
/// discovery fetches reach backends whose `Available` condition is not `True`, as
/// upstream's discovery manager does. Errors: the Service could not be resolved or the
/// backend could not be reached.
pub type Fetcher = BoxCloneSyncService<Request<Body>, Response<Body>, BoxError>;

/// The Service a remote APIService points at: the cache key of discovery fetches, so
/// several APIServices on one Service share one fetch (upstream `serviceKey`; the port
/// defaults to 443).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceKey {
    /// Namespace of the Service.
    pub namespace: String,
    /// Name of the Service.
    pub name: String,
    /// Port (443 when the APIService gives none).
    pub port: i32,
}

impl std::fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}:{}", self.namespace, self.name, self.port)
    }
}

/// One remote APIService, as the discovery and OpenAPI managers need it: names,
/// priorities, its Service and a way to reach it.
#[derive(Clone)]
pub struct Target {
    /// The APIService name, `<version>.<group>`.
    pub name: String,
    /// `spec.group` (empty for the core group, `v1.`).
    pub group: String,
    /// `spec.version`.
    pub version: String,
    /// `spec.groupPriorityMinimum`.
    pub group_priority_minimum: i32,
    /// `spec.versionPriority`.
    pub version_priority: i32,
    /// `spec.service`, port defaulted.
    pub service: ServiceKey,
    /// Whether its `Available` condition is `True` (the OpenAPI downloads go through the
    /// availability gate, as upstream's go through the proxy handler).
    pub available: bool,
    /// How to reach its backend.
    pub fetcher: Fetcher,
}

impl Target {
    /// True when everything but the fetcher and availability is the same: such a change
    /// needs no refetch.
    pub(crate) fn same_spec(&self, other: &Target) -> bool {
        self.name == other.name
            && self.group == other.group
            && self.version == other.version
            && self.group_priority_minimum == other.group_priority_minimum
            && self.version_priority == other.version_priority
            && self.service == other.service
    }

    /// The group-version path: `/apis/<group>/<version>`, or `/api/<version>` for the
    /// core group.
    pub fn group_version_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }
}

debug_fields!(Target {
    name,
    service,
    available
});

/// A group-version the host serves itself (a local APIService), with its priorities, so
/// the host's own groups sort where its APIServices say (as kube-apiserver gives its
/// built-in groups their APIServices' priorities).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalVersion {
    /// The group.
    pub group: String,
    /// The version.
    pub version: String,
    /// `spec.groupPriorityMinimum`.
    pub group_priority_minimum: i32,
    /// `spec.versionPriority`.
    pub version_priority: i32,
}

/// Every APIService at one registry generation: what a [`TargetSink`] is given.
#[derive(Debug, Clone, Default)]
pub struct TargetSet {
    /// The registry generation this set reflects; older sets than the last one applied
    /// are ignored.
    pub generation: u64,
    /// Remote APIServices (with `spec.service`).
    pub remote: Vec<Target>,
    /// Local APIServices.
    pub local: Vec<LocalVersion>,
}

/// Something that follows the APIServices: the discovery and OpenAPI managers.
///
/// [`Registry::feed`](crate::registry::Registry::feed) calls it with every published
/// table, on the writer's task, after the registry lock is released; it must not block
/// (record what changed and wake a worker of its own).
pub trait TargetSink: Send + Sync + 'static {
    /// Takes the full current set; cheap when nothing changed. A set whose generation is
    /// older than the last one applied is ignored, so sets arriving out of order from two
    /// writers are harmless.
    fn sync(&self, targets: &TargetSet);
}
