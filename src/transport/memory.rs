//! A transport whose extension servers are tower services in the same process: the
//! [`InMemoryTransport`].

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use http::uri::Authority;
use http::{Extensions, Request, Response};
use tower::Service;
use tower::util::{BoxCloneSyncService, Oneshot, ServiceExt};

use super::{BackendClient, BackendTarget, ClientCertificate, Transport, TransportError};
use crate::apiservice::ServiceReference;
use crate::body::{Body, BoxError};
use crate::identity::ConnectionInfo;
use crate::resolver::{
    EndpointsFuture, ResolveError, ResolveFuture, ServiceEndpoints, ServiceResolver,
};

type Backends = Arc<RwLock<HashMap<String, BackendClient>>>;

/// A [`Transport`] that hands each APIService an in-process backend instead of a network
/// connection: no sockets, no TLS, no runtime. For tests, benches and fuzzing of the whole
/// stack, and for hosts that serve an aggregated group from the same binary (a
/// single-binary distribution running its extension servers in process).
///
/// Backends are keyed by the name the serving certificate would carry,
/// `<service>.<namespace>.svc` ([`BackendTarget::server_name`]). A backend receives the
/// request exactly as a remote extension server would over the wire, and nothing else:
/// URI `https://<resolved address>/<path>?<query>`, identity in `X-Remote-User`,
/// `X-Remote-Uid`, `X-Remote-Group` and `X-Remote-Extra-*` (the caller's, after
/// authentication and impersonation; never a client's own), hop-by-hop and credential
/// headers removed, `X-Forwarded-*` set; and none of the client's request extensions
/// (its connection, its [`UserInfo`](crate::authn::UserInfo), its `RequestInfo`), which
/// a network hop would not carry either. With [`InMemoryTransport::client_certificate`],
/// each request carries a [`ConnectionInfo`] whose peer chain is the aggregator's proxy
/// client certificate, what a TLS server records after the aggregator's handshake, so a
/// backend behind the crate's
/// [`RequestHeaderAuthenticator`](crate::authn::RequestHeaderAuthenticator) authenticates
/// the aggregator as it does over mTLS. `caBundle` and `insecureSkipTLSVerify` are not
/// consulted.
///
/// The registry asks for a client when an APIService is applied, so insert a backend
/// before applying the APIServices that point at it. An APIService whose Service has no
/// backend here goes to the [`InMemoryTransport::fallback`] transport when there is one
/// (some APIServices in process, the others over mTLS), and otherwise gets a
/// [`TransportError`] naming the server name: its requests are answered 500 and its
/// availability check fails with that message. Upgrade requests to an in-process backend
/// are not supported (503).
///
/// The Services of in-process backends need an address only to fill the URI:
/// [`InMemoryTransport::resolver`] resolves them without a lookup.
#[derive(Clone, Default)]
pub struct InMemoryTransport {
    backends: Backends,
    fallback: Option<Arc<dyn Transport>>,
    peer: Option<ClientCertificate>,
}

impl InMemoryTransport {
    /// An empty transport: every APIService gets a [`TransportError`] until its backend
    /// is inserted.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `<service>.<namespace>.svc` with `backend`, replacing an earlier one for the
    /// same name. APIServices applied afterwards use it; ones already applied keep the
    /// client they were given.
    pub fn insert<S>(&self, server_name: impl Into<String>, backend: S)
    where
        S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        let client = BoxCloneSyncService::new(
            tower::ServiceBuilder::new()
                .map_err(Into::into)
                .service(backend),
        );
        self.backends
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(server_name.into(), client);
    }

    /// Sends the APIServices whose Service has no in-process backend through `transport`
    /// (a [`RustlsTransport`](super::RustlsTransport): the others over mTLS), upgrade
    /// requests included. The choice is made when an APIService is applied.
    pub fn fallback(mut self, transport: impl Transport) -> Self {
        self.fallback = Some(Arc::new(transport));
        self
    }

    /// Presents `certificate` (the aggregator's `--proxy-client-cert-file`, the same handle
    /// the network transport uses, so a rotation shows here too) to in-process backends as
    /// the peer chain of a [`ConnectionInfo`] in each request's extensions. Without it
    /// they see no `ConnectionInfo`: a request-header authenticator then refuses them, as
    /// a server refuses a client without a certificate.
    pub fn client_certificate(mut self, certificate: ClientCertificate) -> Self {
        self.peer = Some(certificate);
        self
    }

    /// A [`ServiceResolver`] for the Services of in-process backends: `namespace/name:port`
    /// whose `<name>.<namespace>.svc` is served here resolves to that name and port
    /// (nothing dials it); any other is `ServiceNotFound`, unless
    /// [`InMemoryResolver::or`] names a resolver for it. It sees backends inserted later.
    pub fn resolver(&self) -> InMemoryResolver {
        InMemoryResolver {
            backends: self.backends.clone(),
            fallback: None,
        }
    }

    fn backend(&self, server_name: &str) -> Option<BackendClient> {
        self.backends
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(server_name)
            .cloned()
    }
}

impl std::fmt::Debug for InMemoryTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backends = self.backends.read().unwrap_or_else(PoisonError::into_inner);
        let mut names: Vec<&String> = backends.keys().collect();
        names.sort();
        f.debug_struct("InMemoryTransport")
            .field("backends", &names)
            .field("fallback", &self.fallback.is_some())
            .field("client_certificate", &self.peer.is_some())
            .finish()
    }
}

impl Transport for InMemoryTransport {
    fn client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        if let Some(backend) = self.backend(&target.server_name) {
            return Ok(BoxCloneSyncService::new(InProcess {
                backend,
                peer: self.peer.clone(),
            }));
        }
        match &self.fallback {
            Some(fallback) => fallback.client(target),
            None => Err(TransportError::new(format!(
                "no in-memory backend serves {:?}",
                target.server_name
            ))),
        }
    }

    fn upgrade_client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        match &self.fallback {
            Some(fallback) if self.backend(&target.server_name).is_none() => {
                fallback.upgrade_client(target)
            }
            _ => Err(TransportError::new(
                "this transport does not support upgrade requests",
            )),
        }
    }

    fn client_certificate(&self) -> Option<super::CertificateSummary> {
        match (&self.peer, &self.fallback) {
            (Some(peer), _) => peer.summary(),
            (None, Some(fallback)) => fallback.client_certificate(),
            (None, None) => None,
        }
    }

    /// The fallback's metrics (in-process backends have no connections to count).
    fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        if let Some(fallback) = &self.fallback {
            fallback.register_metrics(registry);
        }
    }
}

/// One in-process backend's client: what crosses a network hop, and nothing else.
#[derive(Clone)]
struct InProcess {
    backend: BackendClient,
    peer: Option<ClientCertificate>,
}

impl Service<Request<Body>> for InProcess {
    crate::body::answers!(BoxError, Oneshot<BackendClient, Request<Body>>);

    fn call(&mut self, mut req: Request<Body>) -> Self::Future {
        // The client's extensions stay on this side of the "wire": a backend that read
        // them could take the caller's own connection or user for the aggregator's.
        let mut extensions = Extensions::new();
        if let Some(chain) = self.peer.as_ref().and_then(ClientCertificate::chain) {
            extensions.insert(ConnectionInfo {
                remote_addr: None,
                peer_certificates: chain,
            });
        }
        *req.extensions_mut() = extensions;
        self.backend.clone().oneshot(req)
    }
}

/// The [`ServiceResolver`] of [`InMemoryTransport::resolver`].
#[derive(Clone)]
pub struct InMemoryResolver {
    backends: Backends,
    fallback: Option<Arc<dyn ServiceResolver>>,
}

debug_fields!(InMemoryResolver { fallback.is_some() });

impl InMemoryResolver {
    /// Resolves the Services without an in-process backend with `fallback` (the
    /// resolver of the network transport's Services).
    pub fn or(mut self, fallback: impl ServiceResolver) -> InMemoryResolver {
        self.fallback = Some(Arc::new(fallback));
        self
    }
}

impl InMemoryResolver {
    /// The in-process address of `service`, when it has an in-process backend.
    fn served(&self, service: &ServiceReference) -> Option<Result<Authority, ResolveError>> {
        let server_name = service.server_name();
        let served = self
            .backends
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&server_name);
        served.then(|| {
            let port = service.port_or_default();
            Authority::try_from(format!("{server_name}:{port}")).map_err(|e| {
                ResolveError::ServiceAccessError {
                    namespace: service.namespace.clone(),
                    name: service.name.clone(),
                    error: e.to_string(),
                }
            })
        })
    }

    fn not_found(service: &ServiceReference) -> ResolveError {
        ResolveError::ServiceNotFound {
            namespace: service.namespace.clone(),
            name: service.name.clone(),
        }
    }
}

impl ServiceResolver for InMemoryResolver {
    fn resolve(&self, service: &ServiceReference) -> ResolveFuture {
        if let Some(served) = self.served(service) {
            return Box::pin(std::future::ready(served));
        }
        match &self.fallback {
            Some(fallback) => fallback.resolve(service),
            None => Box::pin(std::future::ready(Err(InMemoryResolver::not_found(
                service,
            )))),
        }
    }

    fn resolve_endpoints(&self, service: &ServiceReference) -> EndpointsFuture {
        if let Some(served) = self.served(service) {
            return Box::pin(std::future::ready(served.map(ServiceEndpoints::One)));
        }
        match &self.fallback {
            Some(fallback) => fallback.resolve_endpoints(service),
            None => Box::pin(std::future::ready(Err(InMemoryResolver::not_found(
                service,
            )))),
        }
    }
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
