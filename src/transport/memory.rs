//! A transport whose extension servers are tower services in the same process.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::task::{Context, Poll};

use http::uri::Authority;
use http::{Extensions, Request, Response};
use tower::Service;
use tower::util::{BoxCloneSyncService, Oneshot, ServiceExt};

use super::{BackendClient, BackendTarget, ClientCertificate, Transport, TransportError};
use crate::apiservice::ServiceReference;
use crate::authn::ConnectionInfo;
use crate::availability::{ResolveError, ResolveFuture, ServiceResolver};
use crate::body::{Body, BoxError};

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
}

/// One in-process backend's client: what crosses a network hop, and nothing else.
#[derive(Clone)]
struct InProcess {
    backend: BackendClient,
    peer: Option<ClientCertificate>,
}

impl Service<Request<Body>> for InProcess {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Oneshot<BackendClient, Request<Body>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

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

impl std::fmt::Debug for InMemoryResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryResolver")
            .field("fallback", &self.fallback.is_some())
            .finish_non_exhaustive()
    }
}

impl InMemoryResolver {
    /// Resolves the Services without an in-process backend with `fallback` (the
    /// resolver of the network transport's Services).
    pub fn or(mut self, fallback: impl ServiceResolver) -> InMemoryResolver {
        self.fallback = Some(Arc::new(fallback));
        self
    }
}

impl ServiceResolver for InMemoryResolver {
    fn resolve(&self, service: &ServiceReference) -> ResolveFuture {
        let server_name = service.server_name();
        let served = self
            .backends
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&server_name);
        if served {
            let port = service.port_or_default();
            let authority = Authority::try_from(format!("{server_name}:{port}")).map_err(|e| {
                ResolveError::ServiceAccessError {
                    namespace: service.namespace.clone(),
                    name: service.name.clone(),
                    error: e.to_string(),
                }
            });
            return Box::pin(std::future::ready(authority));
        }
        match &self.fallback {
            Some(fallback) => fallback.resolve(service),
            None => Box::pin(std::future::ready(Err(ResolveError::ServiceNotFound {
                namespace: service.namespace.clone(),
                name: service.name.clone(),
            }))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll, Waker};

    use tower::ServiceExt;

    use super::*;

    fn target(name: &str) -> BackendTarget {
        BackendTarget {
            server_name: name.to_owned(),
            ca_bundle: Vec::new(),
            insecure_skip_tls_verify: false,
        }
    }

    #[test]
    fn hands_out_the_backend_inserted_for_the_server_name() {
        let transport = InMemoryTransport::new();
        transport.insert(
            "metrics-server.kube-system.svc",
            tower::service_fn(|req: Request<Body>| async move {
                let mut res = Response::new(Body::empty());
                *res.status_mut() = http::StatusCode::IM_A_TEAPOT;
                res.headers_mut().insert(
                    "x-seen-path",
                    http::HeaderValue::from_str(req.uri().path())?,
                );
                Ok::<_, BoxError>(res)
            }),
        );
        let client = transport
            .client(&target("metrics-server.kube-system.svc"))
            .unwrap();
        let req = Request::get("https://10.0.0.5:4443/apis/metrics.k8s.io")
            .body(Body::empty())
            .unwrap();
        let mut fut = std::pin::pin!(client.oneshot(req));
        let Poll::Ready(Ok(res)) = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()))
        else {
            panic!("the in-memory backend did not answer at once");
        };
        assert_eq!(res.status(), http::StatusCode::IM_A_TEAPOT);
        assert_eq!(res.headers()["x-seen-path"], "/apis/metrics.k8s.io");
    }

    #[test]
    fn an_unknown_server_name_is_an_error_naming_it() {
        let transport = InMemoryTransport::new();
        let Err(err) = transport.client(&target("api.other.svc")) else {
            panic!("no backend was inserted, yet a client came back");
        };
        assert!(err.to_string().contains("\"api.other.svc\""), "{err}");
        assert!(format!("{transport:?}").contains("backends: []"));
    }

    /// What a backend sees of a request's extensions: none of the caller's, and the
    /// aggregator's certificate as its TLS peer when one is configured.
    #[tokio::test]
    async fn a_backend_sees_what_crosses_a_wire_and_nothing_else() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        let backend = tower::service_fn(move |req: Request<Body>| {
            let peer = req
                .extensions()
                .get::<ConnectionInfo>()
                .map(|c| (c.remote_addr, c.peer_certificates.len()));
            let user = req.extensions().get::<crate::authn::UserInfo>().cloned();
            record.lock().unwrap().push((peer, user));
            std::future::ready(Ok::<_, BoxError>(Response::new(Body::empty())))
        });
        let leaf = rcgen::generate_simple_self_signed(vec!["front-proxy-client".into()]).unwrap();
        let cert = ClientCertificate::from_pem(
            leaf.cert.pem().as_bytes(),
            leaf.signing_key.serialize_pem().as_bytes(),
        )
        .unwrap();
        let plain = InMemoryTransport::new();
        plain.insert("api.ns.svc", backend.clone());
        let presenting = plain.clone().client_certificate(cert);
        for (transport, want_peer) in [(&plain, None), (&presenting, Some((None, 1)))] {
            let mut req = Request::get("https://api.ns.svc:443/apis")
                .body(Body::empty())
                .unwrap();
            req.extensions_mut()
                .insert(crate::authn::UserInfo::new("client", ["g"]));
            req.extensions_mut().insert(ConnectionInfo {
                remote_addr: Some("192.0.2.1:5555".parse().unwrap()),
                peer_certificates: Arc::from(Vec::new()),
            });
            let client = transport.client(&target("api.ns.svc")).unwrap();
            client.oneshot(req).await.unwrap();
            let (peer, user) = seen.lock().unwrap().pop().unwrap();
            assert_eq!(peer, want_peer);
            assert!(
                user.is_none(),
                "the caller's UserInfo crossed into the backend"
            );
        }
    }

    /// Backends here for some Services, a fallback transport and resolver for the rest.
    #[tokio::test]
    async fn the_rest_go_to_the_fallback() {
        struct Named(&'static str);
        impl Transport for Named {
            fn client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
                Err(TransportError::new(format!(
                    "{} for {}",
                    self.0, target.server_name
                )))
            }
        }
        let transport = InMemoryTransport::new().fallback(Named("mtls"));
        transport.insert(
            "adapter.custom-metrics.svc",
            tower::service_fn(|_: Request<Body>| async {
                Ok::<_, BoxError>(Response::new(Body::empty()))
            }),
        );
        assert!(
            transport
                .client(&target("adapter.custom-metrics.svc"))
                .is_ok()
        );
        let Err(e) = transport.client(&target("metrics-server.kube-system.svc")) else {
            panic!("no fallback was asked");
        };
        assert_eq!(e.to_string(), "mtls for metrics-server.kube-system.svc");
        // Upgrades: refused in process, the fallback's answer otherwise.
        let Err(e) = transport.upgrade_client(&target("adapter.custom-metrics.svc")) else {
            panic!("an in-process upgrade client");
        };
        assert!(e.to_string().contains("does not support upgrade"), "{e}");
        let Err(e) = transport.upgrade_client(&target("metrics-server.kube-system.svc")) else {
            panic!("no fallback was asked");
        };
        assert!(e.to_string().contains("does not support upgrade"), "{e}");

        let service = |namespace: &str, name: &str, port| ServiceReference {
            namespace: namespace.into(),
            name: name.into(),
            port,
        };
        let alone = transport.resolver();
        assert_eq!(
            alone
                .resolve(&service("custom-metrics", "adapter", None))
                .await
                .unwrap(),
            "adapter.custom-metrics.svc:443"
        );
        assert_eq!(
            alone
                .resolve(&service("kube-system", "metrics-server", Some(443)))
                .await
                .unwrap_err()
                .reason(),
            "ServiceNotFound"
        );
        let mut network = crate::availability::StaticServiceResolver::new();
        network
            .insert("kube-system", "metrics-server", 443, "10.0.0.5:4443")
            .unwrap();
        let both = transport.resolver().or(network);
        assert_eq!(
            both.resolve(&service("kube-system", "metrics-server", Some(443)))
                .await
                .unwrap(),
            "10.0.0.5:4443"
        );
        assert_eq!(
            both.resolve(&service("custom-metrics", "adapter", Some(6443)))
                .await
                .unwrap(),
            "adapter.custom-metrics.svc:6443"
        );
    }
}
