//! A transport whose extension servers are tower services in the same process: the
//! [`InMemoryTransport`].

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use http::{Request, Response};
use tower::Service;
use tower::util::BoxCloneSyncService;

use super::{BackendClient, BackendTarget, Transport, TransportError};
use crate::body::{Body, BoxError};

/// A [`Transport`] that hands each APIService an in-process backend instead of a network
/// connection: no sockets, no TLS, no runtime. For tests, benches and fuzzing of the whole
/// stack, and for hosts that serve an aggregated group from the same binary.
///
/// Backends are keyed by the name the serving certificate would carry,
/// `<service>.<namespace>.svc` ([`BackendTarget::server_name`]). A backend receives the
/// request exactly as the proxy would send it over the wire: URI
/// `https://<resolved address>/<path>?<query>`, identity in `X-Remote-*`, hop-by-hop and
/// credential headers removed. `caBundle` and `insecureSkipTLSVerify` are not consulted.
///
/// The registry asks for a client when an APIService is applied, so insert a backend
/// before applying the APIServices that point at it. An APIService whose Service has no
/// backend here gets a [`TransportError`] naming the server name, and its requests are
/// answered 503 like an unreachable backend. Upgrade requests are not supported (503).
#[derive(Clone, Default)]
pub struct InMemoryTransport {
    backends: Arc<RwLock<HashMap<String, BackendClient>>>,
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
}

impl std::fmt::Debug for InMemoryTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backends = self.backends.read().unwrap_or_else(PoisonError::into_inner);
        let mut names: Vec<&String> = backends.keys().collect();
        names.sort();
        f.debug_struct("InMemoryTransport")
            .field("backends", &names)
            .finish()
    }
}

impl Transport for InMemoryTransport {
    fn client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        self.backends
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&target.server_name)
            .cloned()
            .ok_or_else(|| {
                TransportError::new(format!(
                    "no in-memory backend serves {:?}",
                    target.server_name
                ))
            })
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
}
