//! Service resolution: where `namespace/name:port` lives.
//!
//! The [`ServiceResolver`] seam is kube-aggregator's `ServiceResolver`
//! ([`pkg/apiserver/resolvers.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/resolvers.go)): the proxy and
//! the availability controller call it for every request and probe, and the registry
//! hands it to the discovery and OpenAPI fetchers. Upstream resolves through the Service's
//! ClusterIP (the default) or a random ready endpoint of its EndpointSlices
//! (`--enable-aggregator-routing`); a host does either, or whatever its platform offers.
//! The errors carry the availability controller's reasons and messages, so a failed
//! resolution reads in `kubectl get apiservices` as it would upstream.
//!
//! Re-exported from [`availability`](crate::availability).
//!
//! Floor 2 of the import order (docs/architecture.md): uses `apiservice`; used by
//! `aggregator`, `availability`, `registry`, `transport`.

use std::future::Future;
use std::pin::Pin;

use fnv::FnvHashMap;
use http::uri::Authority;

use crate::apiservice::ServiceReference;

#[cfg(feature = "dns")]
mod dns;
#[cfg(feature = "dns")]
pub use dns::{DEFAULT_CLUSTER_DOMAIN, DnsConfigError, DnsServiceResolver};

/// Why a Service could not be resolved; each maps to the upstream condition reason and
/// message of the remote availability controller
/// ([`remote_available_controller.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/controllers/status/remote/remote_available_controller.go)).
///
/// The proxy answers every one of them 503 `service unavailable` and logs the text, as
/// upstream tells the client nothing more.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// No such Service.
    #[error("service/{name} in \"{namespace}\" is not present")]
    ServiceNotFound {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// The Service exists but has no port equal to the APIService's port.
    #[error("service/{name} in \"{namespace}\" is not listening on port {port}")]
    ServicePortError {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The APIService's port.
        port: i32,
    },
    /// The Service has no EndpointSlices.
    #[error("cannot find endpointslices for service/{name} in \"{namespace}\"")]
    EndpointsNotFound {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// No ready endpoint has a port of the Service port's name.
    #[error(
        "endpointslices for service/{name} in \"{namespace}\" have no addresses with port name \"{port_name}\""
    )]
    MissingEndpoints {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The Service port's name.
        port_name: String,
    },
    /// The Service's DNS name did not resolve ([`DnsServiceResolver`]): upstream dials
    /// the name and fails on the lookup, so its reason is `FailedDiscoveryCheck`.
    #[error("service/{name} in \"{namespace}\" cannot be resolved: lookup {host}: {detail}")]
    NameResolutionFailed {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The name looked up (`<name>.<namespace>.svc.<cluster domain>`).
        host: String,
        /// What the resolver said (`no such host`, a timeout).
        detail: String,
    },
    /// The Service exists but cannot be routed to: a ClusterIP Service without a
    /// ClusterIP (`None`, headless), an unsupported type, a port it does not have.
    /// Upstream's resolver fails the same way (k8s.io/apiserver `pkg/util/proxy/proxy.go`,
    /// `ResolveCluster`, `ResolveEndpoint`), and the discovery check with it, so the
    /// reason is `FailedDiscoveryCheck`.
    #[error("service/{name} in \"{namespace}\" cannot be routed to: {detail}")]
    Unroutable {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Upstream's words (`cannot route to service with ClusterIP "None"`).
        detail: String,
    },
    /// The Service could not be looked up (not a NotFound).
    #[error("service/{name} in \"{namespace}\" cannot be checked due to: {error}")]
    ServiceAccessError {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The lookup error.
        error: String,
    },
}

impl ResolveError {
    /// The condition reason upstream reports for this failure: the variant's name
    /// (`ServiceNotFound`, `ServicePortError`, `EndpointsNotFound`, `MissingEndpoints`,
    /// `ServiceAccessError`), and `FailedDiscoveryCheck` for a name that did not resolve
    /// and for a Service that cannot be routed to.
    pub fn reason(&self) -> &'static str {
        match self {
            ResolveError::ServiceNotFound { .. } => "ServiceNotFound",
            ResolveError::ServicePortError { .. } => "ServicePortError",
            ResolveError::EndpointsNotFound { .. } => "EndpointsNotFound",
            ResolveError::MissingEndpoints { .. } => "MissingEndpoints",
            ResolveError::ServiceAccessError { .. } => "ServiceAccessError",
            ResolveError::NameResolutionFailed { .. } | ResolveError::Unroutable { .. } => {
                "FailedDiscoveryCheck"
            }
        }
    }

    /// True when upstream reports the condition as `Unknown` rather than `False`: the
    /// lookup itself failed ([`ResolveError::ServiceAccessError`]), so nothing is known
    /// about the Service.
    pub fn is_unknown(&self) -> bool {
        matches!(self, ResolveError::ServiceAccessError { .. })
    }
}

/// The boxed future a [`ServiceResolver`] returns: the address to dial, or why not.
pub type ResolveFuture = Pin<Box<dyn Future<Output = Result<Authority, ResolveError>> + Send>>;

/// Every address a Service can be reached at, as a resolver found it: one (a ClusterIP,
/// a DNS name, a fixed map) or several (the ready endpoints of its EndpointSlices), among
/// which the proxy spreads requests and from which it ejects the failing ones (see
/// [`OutlierDetection`](crate::aggregator::OutlierDetection)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceEndpoints {
    /// One address: every request goes there.
    One(Authority),
    /// Several addresses, none repeated; never empty.
    Many(std::sync::Arc<[Authority]>),
}

impl ServiceEndpoints {
    /// The endpoints of `addresses`, duplicates removed (in first-seen order); `None`
    /// when there are none.
    pub fn from_addresses(
        addresses: impl IntoIterator<Item = Authority>,
    ) -> Option<ServiceEndpoints> {
        let mut unique: Vec<Authority> = Vec::new();
        for a in addresses {
            if !unique.contains(&a) {
                unique.push(a);
            }
        }
        match unique.len() {
            0 => None,
            1 => unique.pop().map(ServiceEndpoints::One),
            _ => Some(ServiceEndpoints::Many(unique.into())),
        }
    }

    /// The addresses.
    pub fn as_slice(&self) -> &[Authority] {
        match self {
            ServiceEndpoints::One(a) => std::slice::from_ref(a),
            ServiceEndpoints::Many(all) => all,
        }
    }
}

/// The boxed future of [`ServiceResolver::resolve_endpoints`].
pub type EndpointsFuture =
    Pin<Box<dyn Future<Output = Result<ServiceEndpoints, ResolveError>> + Send>>;

/// Resolves an APIService's `spec.service` to a dialable `host:port`.
///
/// Called on the request path for every proxied request, so it should answer from memory
/// (an informer cache, a static map) and keep any lookup off it. The address is dialled
/// as given; TLS still verifies the serving certificate as `<service>.<namespace>.svc`.
/// Implemented for `Arc<R>`, so one resolver can be shared by the builder, the proxy and
/// the fetchers.
pub trait ServiceResolver: Send + Sync + 'static {
    /// The address of `service` (port already defaulted to 443 when absent): an IP or a
    /// DNS name with a port, IPv6 in brackets (`[fd00::5]:443`).
    ///
    /// # Errors
    ///
    /// A [`ResolveError`] whose reason the availability controller writes into the
    /// APIService's condition.
    fn resolve(&self, service: &ServiceReference) -> ResolveFuture;

    /// Every address of `service` that may take requests: what the proxy spreads a
    /// Service's requests over. By default the one address of
    /// [`ServiceResolver::resolve`]; a resolver that knows a Service's endpoints (its
    /// ready EndpointSlice endpoints) returns them all, and the proxy balances over them
    /// and ejects failing ones. The availability controller still probes through
    /// [`ServiceResolver::resolve`].
    ///
    /// # Errors
    ///
    /// As [`ServiceResolver::resolve`].
    fn resolve_endpoints(&self, service: &ServiceReference) -> EndpointsFuture {
        let one = self.resolve(service);
        Box::pin(async move { one.await.map(ServiceEndpoints::One) })
    }
}

impl<R: ServiceResolver + ?Sized> ServiceResolver for std::sync::Arc<R> {
    fn resolve(&self, service: &ServiceReference) -> ResolveFuture {
        (**self).resolve(service)
    }

    fn resolve_endpoints(&self, service: &ServiceReference) -> EndpointsFuture {
        (**self).resolve_endpoints(service)
    }
}

/// A fixed map from `(namespace, name, port)` to `host:port`.
///
/// A name with no entry at all is `ServiceNotFound`; a known name without that port is
/// `ServicePortError`. For hosts whose extension servers sit at fixed addresses, for the
/// gateway's `--service` flags, and for tests.
///
/// ```
/// use kube_aggregator::apiservice::ServiceReference;
/// use kube_aggregator::availability::{
///     ResolveError, ServiceEndpoints, ServiceResolver, StaticServiceResolver,
/// };
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut resolver = StaticServiceResolver::new();
/// resolver.insert("kube-system", "metrics-server", 443, "10.0.0.5:4443")?;
/// let service = ServiceReference {
///     namespace: "kube-system".into(),
///     name: "metrics-server".into(),
///     port: None,
/// };
/// assert_eq!(resolver.resolve(&service).await?, "10.0.0.5:4443");
/// // One address: the proxy has nothing to balance.
/// assert_eq!(
///     resolver.resolve_endpoints(&service).await?,
///     ServiceEndpoints::One("10.0.0.5:4443".parse()?)
/// );
/// let many = ServiceEndpoints::from_addresses(["10.0.0.5:4443".parse()?, "10.0.0.6:4443".parse()?, "10.0.0.5:4443".parse()?]);
/// assert_eq!(many.map(|m| m.as_slice().len()), Some(2));
/// assert_eq!(ServiceEndpoints::from_addresses([]), None);
///
/// let other = ServiceReference { port: Some(8443), ..service };
/// let err = resolver.resolve(&other).await.unwrap_err();
/// assert_eq!(err.reason(), "ServicePortError");
/// assert_eq!(err.to_string(), r#"service/metrics-server in "kube-system" is not listening on port 8443"#);
/// assert!(resolver.insert("kube-system", "x", 443, "no-port").is_err());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct StaticServiceResolver {
    /// Namespace, then name, then port: looked up by `&str`, without building a key, and
    /// hashed with FNV (the keys are the host's Service names, not a client's input).
    entries: FnvHashMap<String, FnvHashMap<String, FnvHashMap<i32, Authority>>>,
}

impl StaticServiceResolver {
    /// An empty resolver.
    pub fn new() -> StaticServiceResolver {
        StaticServiceResolver::default()
    }

    /// Adds `namespace/name:port` at `address` (`host:port`), replacing an earlier address
    /// for the same key. `port` is the APIService's `spec.service.port` (443 when the
    /// APIService gives none), not the backend's.
    ///
    /// # Errors
    ///
    /// [`InvalidAddress`] when `address` is not a `host:port` authority.
    pub fn insert(
        &mut self,
        namespace: &str,
        name: &str,
        port: i32,
        address: &str,
    ) -> Result<(), InvalidAddress> {
        let authority: Authority = address.parse().map_err(|source| InvalidAddress {
            address: address.to_owned(),
            source: Some(source),
        })?;
        if authority.port_u16().is_none() {
            return Err(InvalidAddress {
                address: address.to_owned(),
                source: None,
            });
        }
        self.entries
            .entry(namespace.to_owned())
            .or_default()
            .entry(name.to_owned())
            .or_default()
            .insert(port, authority);
        Ok(())
    }
}

/// An address given to [`StaticServiceResolver::insert`] that is not `host:port`: it does
/// not parse as a URI authority (the parse error is its source), or it has no port.
#[derive(Debug, thiserror::Error)]
#[error("address {address:?} {}", match source {
    Some(e) => format!("is not host:port: {e}"),
    None => "has no port".to_owned(),
})]
pub struct InvalidAddress {
    address: String,
    #[source]
    source: Option<http::uri::InvalidUri>,
}

impl InvalidAddress {
    /// The address as given.
    pub fn address(&self) -> &str {
        &self.address
    }
}

impl ServiceResolver for StaticServiceResolver {
    fn resolve(&self, service: &ServiceReference) -> ResolveFuture {
        Box::pin(std::future::ready(self.lookup(service)))
    }

    fn resolve_endpoints(&self, service: &ServiceReference) -> EndpointsFuture {
        Box::pin(std::future::ready(
            self.lookup(service).map(ServiceEndpoints::One),
        ))
    }
}

impl StaticServiceResolver {
    fn lookup(&self, service: &ServiceReference) -> Result<Authority, ResolveError> {
        let port = service.port_or_default();
        match self
            .entries
            .get(service.namespace.as_str())
            .and_then(|names| names.get(service.name.as_str()))
        {
            None => Err(ResolveError::ServiceNotFound {
                namespace: service.namespace.clone(),
                name: service.name.clone(),
            }),
            Some(ports) => {
                ports
                    .get(&port)
                    .cloned()
                    .ok_or_else(|| ResolveError::ServicePortError {
                        namespace: service.namespace.clone(),
                        name: service.name.clone(),
                        port,
                    })
            }
        }
    }
}
