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
    let Poll::Ready(Ok(res)) = fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) else {
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
