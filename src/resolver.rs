//! Service resolution: where `namespace/name:port` lives.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use http::uri::Authority;

use crate::apiservice::ServiceReference;

/// Why a Service could not be resolved; each maps to the upstream condition reason and
/// message of the remote availability controller (docs/upstream-behaviour.md §4.3).
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
    /// The condition reason upstream reports for this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            ResolveError::ServiceNotFound { .. } => "ServiceNotFound",
            ResolveError::ServicePortError { .. } => "ServicePortError",
            ResolveError::EndpointsNotFound { .. } => "EndpointsNotFound",
            ResolveError::MissingEndpoints { .. } => "MissingEndpoints",
            ResolveError::ServiceAccessError { .. } => "ServiceAccessError",
        }
    }

    /// True when upstream reports the condition as `Unknown` rather than `False`.
    pub fn is_unknown(&self) -> bool {
        matches!(self, ResolveError::ServiceAccessError { .. })
    }
}

/// The boxed future a [`ServiceResolver`] returns.
pub type ResolveFuture = Pin<Box<dyn Future<Output = Result<Authority, ResolveError>> + Send>>;

/// Resolves an APIService's `spec.service` to a dialable `host:port`.
pub trait ServiceResolver: Send + Sync + 'static {
    /// The address of `service` (port already defaulted to 443 when absent).
    fn resolve(&self, service: &ServiceReference) -> ResolveFuture;
}

impl<R: ServiceResolver + ?Sized> ServiceResolver for std::sync::Arc<R> {
    fn resolve(&self, service: &ServiceReference) -> ResolveFuture {
        (**self).resolve(service)
    }
}

/// A fixed map from `(namespace, name, port)` to `host:port`.
///
/// A name with no entry at all is `ServiceNotFound`; a known name without that port is
/// `ServicePortError`.
#[derive(Debug, Clone, Default)]
pub struct StaticServiceResolver {
    entries: HashMap<(String, String), HashMap<i32, Authority>>,
}

impl StaticServiceResolver {
    /// An empty resolver.
    pub fn new() -> StaticServiceResolver {
        StaticServiceResolver::default()
    }

    /// Adds `namespace/name:port` at `address` (`host:port`).
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
            .entry((namespace.to_owned(), name.to_owned()))
            .or_default()
            .insert(port, authority);
        Ok(())
    }
}

/// An address given to [`StaticServiceResolver::insert`] that is not `host:port`.
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
        let port = service.port_or_default();
        let result = match self
            .entries
            .get(&(service.namespace.clone(), service.name.clone()))
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
        };
        Box::pin(std::future::ready(result))
    }
}
