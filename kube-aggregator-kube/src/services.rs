//! [`KubeServiceResolver`]: where a Service lives, from watches of Services and
//! EndpointSlices.

use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use http::uri::Authority;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{Api, Client};
use kube_aggregator::apiservice::ServiceReference;
use kube_aggregator::availability::{
    EndpointsFuture, ResolveError, ResolveFuture, ServiceEndpoints, ServiceResolver,
};

use crate::index::{Cache, Entry};

/// The label that files an EndpointSlice under its Service (k8s.io/api
/// `discovery/v1/well_known_labels.go`, `LabelServiceName`).
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// What is kept of a Service.
#[derive(Debug)]
struct ServiceEntry {
    /// `spec.type`; `ClusterIP` when absent, as the API server defaults it.
    type_: String,
    cluster_ip: String,
    external_name: String,
    /// `(port, name)` of each `spec.ports` entry.
    ports: Vec<(i32, String)>,
    /// `spec.ipFamilies[0]`: the family whose endpoints are preferred.
    primary_family: String,
}

/// What is kept of an EndpointSlice.
#[derive(Debug)]
struct SliceEntry {
    address_type: String,
    /// `(name, port)` of each port; upstream skips a port without either.
    ports: Vec<(Option<String>, Option<i32>)>,
    /// `(addresses[0], ready)` of each endpoint; `ready` absent counts as ready.
    endpoints: Vec<(String, bool)>,
}

/// How a resolved Service is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Routing {
    ClusterIp,
    Endpoints,
}

/// A [`ServiceResolver`] from watches of the cluster's Services and EndpointSlices
/// (every namespace), as kube-aggregator resolves with its informers: never an API call
/// on the request path.
///
/// [`cluster_ip`](KubeServiceResolver::cluster_ip) routes to the Service's ClusterIP and
/// port, upstream's default; [`endpoint_slices`](KubeServiceResolver::endpoint_slices) to
/// a random ready endpoint of its EndpointSlices, preferring the Service's primary IP
/// family, with the port of the Service port's name, as kube-apiserver's
/// `--enable-aggregator-routing` (k8s.io/apiserver `pkg/util/proxy/proxy.go`,
/// `ResolveCluster` and `ResolveEndpoint`).
///
/// Before either, the checks of upstream's availability controller
/// (kube-aggregator `pkg/controllers/status/remote/remote_available_controller.go`), so a
/// refusal carries its reason: no such Service (`ServiceNotFound`); for a `ClusterIP`
/// Service, no port equal to the APIService's (`ServicePortError`), no EndpointSlices
/// (`EndpointsNotFound`), none with a ready endpoint and the port's name
/// (`MissingEndpoints`). What upstream's resolver refuses (a headless Service, an
/// unsupported type, no port, no endpoint) is [`ResolveError::Unroutable`]. An
/// `ExternalName` Service resolves, in ClusterIP mode, to its external name and the
/// APIService's port.
///
/// Until the first list of both kinds is in, a resolution waits for it, so a starting
/// gateway never reports a Service missing that is only not listed yet.
#[derive(Debug, Clone)]
pub struct KubeServiceResolver {
    services: Cache<ServiceEntry>,
    slices: Cache<SliceEntry>,
    routing: Routing,
    random: Arc<RandomState>,
}

impl KubeServiceResolver {
    /// Routes to each Service's ClusterIP (kube-apiserver's default). Starts its watches
    /// on the current tokio runtime; they stop when the last clone is dropped.
    pub fn cluster_ip(client: Client) -> KubeServiceResolver {
        KubeServiceResolver::new(client, Routing::ClusterIp)
    }

    /// Routes to a ready endpoint of each Service's EndpointSlices
    /// (`--enable-aggregator-routing`). Starts its watches as [`cluster_ip`](Self::cluster_ip).
    pub fn endpoint_slices(client: Client) -> KubeServiceResolver {
        KubeServiceResolver::new(client, Routing::Endpoints)
    }

    fn new(client: Client, routing: Routing) -> KubeServiceResolver {
        KubeServiceResolver {
            services: Cache::spawn(Api::<Service>::all(client.clone()), service_entry),
            slices: Cache::spawn(Api::<EndpointSlice>::all(client), slice_entry),
            routing,
            random: Arc::new(RandomState::new()),
        }
    }

    /// Waits until the Services and EndpointSlices have been listed once.
    pub async fn ready(&self) {
        self.services.ready().await;
        self.slices.ready().await;
    }

    fn resolve_now(&self, svc: &ServiceReference) -> Result<Authority, ResolveError> {
        self.with_service(svc, |service, port| match self.routing {
            Routing::ClusterIp => cluster_address(svc, service, port),
            Routing::Endpoints => self.endpoint_address(svc, service, port),
        })
    }

    fn resolve_endpoints_now(
        &self,
        svc: &ServiceReference,
    ) -> Result<ServiceEndpoints, ResolveError> {
        self.with_service(svc, |service, port| match self.routing {
            Routing::ClusterIp => cluster_address(svc, service, port).map(ServiceEndpoints::One),
            Routing::Endpoints => self.all_endpoints(svc, service, port),
        })
    }

    /// Calls `f` with the Service of `svc` and the port asked for, once the availability
    /// controller's checks of a ClusterIP Service passed.
    fn with_service<T>(
        &self,
        svc: &ServiceReference,
        f: impl FnOnce(&ServiceEntry, i32) -> Result<T, ResolveError>,
    ) -> Result<T, ResolveError> {
        let (namespace, name) = (svc.namespace.as_str(), svc.name.as_str());
        let port = svc.port_or_default();
        self.services.with(namespace, name, |found| {
            let Some(service) = found.and_then(|objects| objects.get(name)) else {
                return Err(ResolveError::ServiceNotFound {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                });
            };
            if service.type_ == "ClusterIP" {
                self.check_endpoints(svc, service, port)?;
            }
            f(service, port)
        })
    }

    /// Every ready endpoint (with the port of the Service port's name) of the Service's
    /// primary family, or of the other family when the primary has none; the set
    /// [`ServiceResolver::resolve_endpoints`] gives the proxy to balance over.
    fn all_endpoints(
        &self,
        svc: &ServiceReference,
        service: &ServiceEntry,
        port: i32,
    ) -> Result<ServiceEndpoints, ResolveError> {
        routable_type(svc, service)?;
        let port_name = service_port(svc, service, port)?.1.as_str();
        let none = || {
            unroutable(
                svc,
                format!("no endpoints available for service {:?}", svc.name),
            )
        };
        self.slices.with(&svc.namespace, &svc.name, |slices| {
            let slices = slices.ok_or_else(none)?;
            let mut primary = Vec::new();
            let mut other = Vec::new();
            let mut sorted: Vec<(&String, &SliceEntry)> = slices.iter().collect();
            sorted.sort_by_key(|(name, _)| *name);
            for (_, slice) in sorted {
                let Some(target) = slice
                    .ports
                    .iter()
                    .find_map(|(n, p)| (n.as_deref() == Some(port_name)).then_some(*p).flatten())
                else {
                    continue;
                };
                let into = if slice.address_type == service.primary_family {
                    &mut primary
                } else {
                    &mut other
                };
                for (address, ready) in &slice.endpoints {
                    if *ready {
                        into.push(authority(svc, address, target)?);
                    }
                }
            }
            let chosen = if primary.is_empty() { other } else { primary };
            ServiceEndpoints::from_addresses(chosen).ok_or_else(none)
        })
    }

    /// The availability controller's checks of a ClusterIP Service.
    fn check_endpoints(
        &self,
        svc: &ServiceReference,
        service: &ServiceEntry,
        port: i32,
    ) -> Result<(), ResolveError> {
        let Some((_, port_name)) = service.ports.iter().find(|(p, _)| *p == port) else {
            return Err(ResolveError::ServicePortError {
                namespace: svc.namespace.clone(),
                name: svc.name.clone(),
                port,
            });
        };
        self.slices.with(&svc.namespace, &svc.name, |slices| {
            let slices = slices.filter(|s| !s.is_empty()).ok_or_else(|| {
                ResolveError::EndpointsNotFound {
                    namespace: svc.namespace.clone(),
                    name: svc.name.clone(),
                }
            })?;
            let available = slices.values().any(|slice| {
                slice.endpoints.iter().any(|(_, ready)| *ready)
                    && slice
                        .ports
                        .iter()
                        .any(|(n, p)| n.as_deref() == Some(port_name.as_str()) && p.is_some())
            });
            if available {
                Ok(())
            } else {
                Err(ResolveError::MissingEndpoints {
                    namespace: svc.namespace.clone(),
                    name: svc.name.clone(),
                    port_name: port_name.clone(),
                })
            }
        })
    }

    /// Upstream's `ResolveEndpoint`: a random ready endpoint, the Service's primary family
    /// first.
    fn endpoint_address(
        &self,
        svc: &ServiceReference,
        service: &ServiceEntry,
        port: i32,
    ) -> Result<Authority, ResolveError> {
        let all = self.all_endpoints(svc, service, port)?;
        let all = all.as_slice();
        let i = (self.random.hash_one(rand_seed()) as usize) % all.len().max(1);
        all.get(i).cloned().ok_or_else(|| {
            unroutable(
                svc,
                format!("no endpoints available for service {:?}", svc.name),
            )
        })
    }
}

/// Upstream's `ResolveEndpoint` routes only these Service types.
fn routable_type(svc: &ServiceReference, service: &ServiceEntry) -> Result<(), ResolveError> {
    if matches!(
        service.type_.as_str(),
        "ClusterIP" | "LoadBalancer" | "NodePort"
    ) {
        Ok(())
    } else {
        Err(unroutable(
            svc,
            format!("unsupported service type {:?}", service.type_),
        ))
    }
}

/// Upstream's `ResolveCluster`.
fn cluster_address(
    svc: &ServiceReference,
    service: &ServiceEntry,
    port: i32,
) -> Result<Authority, ResolveError> {
    match service.type_.as_str() {
        "ClusterIP" if service.cluster_ip == "None" => Err(unroutable(
            svc,
            r#"cannot route to service with ClusterIP "None""#.to_owned(),
        )),
        "ClusterIP" | "LoadBalancer" | "NodePort" => {
            let (port, _) = service_port(svc, service, port)?;
            authority(svc, &service.cluster_ip, *port)
        }
        "ExternalName" => authority(svc, &service.external_name, port),
        other => Err(unroutable(
            svc,
            format!("unsupported service type {other:?}"),
        )),
    }
}

/// The Service's port equal to `port` (upstream's `findServicePort`).
fn service_port<'a>(
    svc: &ServiceReference,
    service: &'a ServiceEntry,
    port: i32,
) -> Result<&'a (i32, String), ResolveError> {
    service
        .ports
        .iter()
        .find(|(p, _)| *p == port)
        .ok_or_else(|| {
            unroutable(
                svc,
                format!("no service port {port} found for service {:?}", svc.name),
            )
        })
}

/// `host:port`, an IPv6 address in brackets (Go's `net.JoinHostPort`).
fn authority(svc: &ServiceReference, host: &str, port: i32) -> Result<Authority, ResolveError> {
    let joined = match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(ip)) => format!("[{ip}]:{port}"),
        _ => format!("{host}:{port}"),
    };
    joined
        .parse()
        .map_err(|e| unroutable(svc, format!("address {joined:?}: {e}")))
}

fn unroutable(svc: &ServiceReference, detail: String) -> ResolveError {
    ResolveError::Unroutable {
        namespace: svc.namespace.clone(),
        name: svc.name.clone(),
        detail,
    }
}

/// A value that differs from call to call, for the random orders.
fn rand_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn service_entry(service: &Service) -> Option<Entry<ServiceEntry>> {
    let spec = service.spec.as_ref();
    let name = service.metadata.name.clone()?;
    Some(Entry {
        service: name,
        value: ServiceEntry {
            type_: spec
                .and_then(|s| s.type_.clone())
                .unwrap_or_else(|| "ClusterIP".to_owned()),
            cluster_ip: spec.and_then(|s| s.cluster_ip.clone()).unwrap_or_default(),
            external_name: spec
                .and_then(|s| s.external_name.clone())
                .unwrap_or_default(),
            ports: spec
                .and_then(|s| s.ports.as_ref())
                .map(|ports| {
                    ports
                        .iter()
                        .map(|p| (p.port, p.name.clone().unwrap_or_default()))
                        .collect()
                })
                .unwrap_or_default(),
            primary_family: spec
                .and_then(|s| s.ip_families.as_ref())
                .and_then(|f| f.first().cloned())
                .unwrap_or_default(),
        },
    })
}

fn slice_entry(slice: &EndpointSlice) -> Option<Entry<SliceEntry>> {
    let labels: Option<&std::collections::BTreeMap<String, String>> =
        slice.metadata.labels.as_ref();
    let service = labels?.get(SERVICE_NAME_LABEL)?.clone();
    Some(Entry {
        service,
        value: SliceEntry {
            address_type: slice.address_type.clone(),
            ports: slice
                .ports
                .iter()
                .flatten()
                .map(|p| (p.name.clone(), p.port))
                .collect(),
            endpoints: slice
                .endpoints
                .iter()
                .filter_map(|e| {
                    let ready = e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
                    e.addresses.first().map(|a| (a.clone(), ready))
                })
                .collect(),
        },
    })
}

impl KubeServiceResolver {
    /// `now(service)` once both caches have synced: at once when they have, else after.
    fn when_synced<T: Send + 'static>(
        &self,
        service: &ServiceReference,
        now: fn(&KubeServiceResolver, &ServiceReference) -> T,
    ) -> Pin<Box<dyn Future<Output = T> + Send>> {
        if self.services.is_ready() && self.slices.is_ready() {
            return Box::pin(std::future::ready(now(self, service)));
        }
        let (this, service) = (self.clone(), service.clone());
        Box::pin(async move {
            this.ready().await;
            now(&this, &service)
        })
    }
}

impl ServiceResolver for KubeServiceResolver {
    fn resolve(&self, service: &ServiceReference) -> ResolveFuture {
        self.when_synced(service, KubeServiceResolver::resolve_now)
    }

    fn resolve_endpoints(&self, service: &ServiceReference) -> EndpointsFuture {
        self.when_synced(service, KubeServiceResolver::resolve_endpoints_now)
    }
}
