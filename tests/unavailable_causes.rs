//! Why an APIService is unavailable, one real misconfiguration per cause, over TLS on
//! 127.0.0.1: an extension server set up wrong in exactly one way, the availability
//! controller checking it through the real transport, and the condition it writes (reason
//! upstream's, message naming the values and the setting to change) and the cause counted
//! in `aggregator_apiservice_failed_checks_total{cause}`.

#[path = "../examples/support/pki.rs"]
pub mod pki;

#[path = "common/refusal.rs"]
mod refusal;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use kube_aggregator::apiservice::{ApiService, ApiServiceCondition};
use kube_aggregator::availability::{
    AvailabilityConfig, AvailabilityController, AvailabilityMetrics, StaticServiceResolver,
};
use kube_aggregator::registry::Registry;
use kube_aggregator::rt::{Executor, Timer};
use kube_aggregator::source::ApiServiceEvent;
use kube_aggregator::transport::{ClientCertificate, RustlsTransport};
use pki::{Ca, Leaf};
use tokio::net::TcpListener;

const NAME: &str = "v1alpha1.widgets.example.io";
const NAMESPACE: &str = "widgets";
const SERVICE: &str = "widget-api";
const SERVICE_DNS: &str = "widget-api.widgets.svc";
const PROBE_PATH: &str = "/apis/widgets.example.io/v1alpha1";
const RESOURCE_LIST: &str = r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"widgets.example.io/v1alpha1","resources":[]}"#;

/// The trust domains: the extension server's serving CA and the front-proxy CA whose
/// client certificate the aggregator presents.
struct Cluster {
    backend_ca: Ca,
    front_proxy_ca: Ca,
}

impl Cluster {
    fn new() -> Cluster {
        Cluster {
            backend_ca: Ca::new("widget-api-ca"),
            front_proxy_ca: Ca::new("front-proxy-ca"),
        }
    }

    /// A serving certificate with the name the aggregator expects.
    fn serving(&self) -> Leaf {
        self.backend_ca.server(SERVICE, &[SERVICE_DNS])
    }

    /// The aggregator's proxy client certificate.
    fn proxy_identity(&self) -> ClientCertificate {
        let leaf = self.front_proxy_ca.client("front-proxy-client", &[]);
        ClientCertificate::from_pem(leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes())
            .expect("proxy client certificate")
    }

    /// The APIService, trusting the backend CA.
    fn apiservice(&self) -> ApiService {
        ApiService::remote("widgets.example.io", "v1alpha1", NAMESPACE, SERVICE)
            .priorities(1000, 15)
            .ca_bundle(self.backend_ca.cert_pem.as_bytes())
    }
}

/// An extension server's TLS: `serving`, and a client certificate from `client_ca`
/// required in the handshake.
fn backend_tls(serving: &Leaf, client_ca: &Ca) -> Arc<rustls::ServerConfig> {
    serving.server_config(&[&client_ca.cert_pem], &[b"h2", b"http/1.1"])
}

/// Serves HTTPS with `tls` on 127.0.0.1, answering every request with `answer()`.
async fn backend(
    tls: Arc<rustls::ServerConfig>,
    answer: fn() -> Response<Full<Bytes>>,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A refused handshake closes as a server that reads what it was sent,
                // so the client gets the TLS alert rather than a reset.
                let stream = match acceptor.accept(tcp).into_fallible().await {
                    Ok(stream) => stream,
                    Err((_, tcp)) => return refusal::drain_then_close(tcp).await,
                };
                let svc = hyper::service::service_fn(move |_: Request<Incoming>| async move {
                    Ok::<_, Infallible>(answer())
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

fn resource_list() -> Response<Full<Bytes>> {
    json(StatusCode::OK, RESOURCE_LIST)
}

fn json(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .expect("response")
}

/// What the controller wrote for the APIService once its check failed, and the metrics.
struct Failure {
    condition: ApiServiceCondition,
    metrics: String,
}

impl Failure {
    /// The cause counted for the failed check.
    fn assert_cause(&self, cause: &str) {
        let series = format!(
            "aggregator_apiservice_failed_checks_total{{name=\"{NAME}\",cause=\"{cause}\"}}"
        );
        assert!(
            self.metrics.lines().any(|l| l.starts_with(&series)),
            "{series} in\n{}",
            self.metrics
        );
    }

    /// The condition's message contains every one of `words`.
    fn assert_message(&self, words: &[&str]) {
        for w in words {
            assert!(
                self.condition.message.contains(w),
                "{w:?} not in the message {:?}",
                self.condition.message
            );
        }
    }
}

/// Runs the availability controller for `apiservice` with the Service resolved to
/// `address`, our proxy client certificate `proxy`, until its condition is no longer
/// `True` (every failure flips at once here: the soft-failure threshold is 1).
async fn first_failure(apiservice: ApiService, address: &str, proxy: ClientCertificate) -> Failure {
    let mut resolver = StaticServiceResolver::new();
    resolver
        .insert(NAMESPACE, SERVICE, 443, address)
        .expect("resolver entry");
    let registry = Registry::new(RustlsTransport::new(
        proxy,
        Executor::tokio(),
        Timer::tokio(),
    ));
    registry
        .apply(ApiServiceEvent::Resynced(vec![apiservice]))
        .expect("a valid APIService");
    let metrics = Arc::new(AvailabilityMetrics::default());
    let controller = AvailabilityController::new(
        registry.clone(),
        resolver,
        Timer::tokio(),
        // One attempt, failing at once: each case's first check decides.
        AvailabilityConfig {
            resync_period: Duration::from_millis(200),
            probe_timeout: Duration::from_secs(1),
            probe_attempts: 1,
            soft_failure_threshold: 1,
            ..AvailabilityConfig::default()
        },
        metrics.clone(),
    );
    let task = tokio::spawn(controller.run());
    let deadline = Instant::now() + Duration::from_secs(10);
    let condition = loop {
        let condition = registry
            .snapshot()
            .get(NAME)
            .and_then(|r| r.apiservice.available_condition().cloned());
        match condition {
            Some(c) if c.status.as_str() != "True" => break c,
            other => {
                assert!(
                    Instant::now() < deadline,
                    "no failed check within 10 s: {other:?}"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    task.abort();
    Failure {
        condition,
        metrics: metrics.render(),
    }
}

/// The extension server's request-header CA is another CA: it refuses our client
/// certificate in the handshake.
#[tokio::test]
async fn our_client_certificate_refused_in_the_handshake() {
    let c = Cluster::new();
    let other = Ca::new("other-front-proxy-ca");
    let addr = backend(backend_tls(&c.serving(), &other), resource_list).await;
    let f = first_failure(c.apiservice(), &addr.to_string(), c.proxy_identity()).await;
    assert_eq!(f.condition.reason, "FailedDiscoveryCheck");
    f.assert_cause("ClientCertificateRejected");
    f.assert_message(&[
        &format!("failing or missing response from https://{addr}{PROBE_PATH}: "),
        "the extension server refused our client certificate during the TLS handshake (alert ",
        r#"the proxy client certificate has subject "CN=front-proxy-client" issued by "CN=front-proxy-ca""#,
        r#"the extension server's --requestheader-client-ca-file must contain the CA "CN=front-proxy-ca" that issued it"#,
    ]);
}

/// The extension server trusts our CA but not our CN (its allowed names leave it out):
/// it answers the discovery request 401.
#[tokio::test]
async fn front_proxy_identity_refused_with_401() {
    let c = Cluster::new();
    let tls = backend_tls(&c.serving(), &c.front_proxy_ca);
    let addr = backend(tls, || {
        json(StatusCode::UNAUTHORIZED, r#"{"kind":"Status","code":401}"#)
    })
    .await;
    let f = first_failure(c.apiservice(), &addr.to_string(), c.proxy_identity()).await;
    assert_eq!(f.condition.reason, "FailedDiscoveryCheck");
    f.assert_cause("FrontProxyIdentityRejected");
    f.assert_message(&[
        &format!("bad status from https://{addr}{PROBE_PATH}: 401"),
        "the extension server did not accept the front-proxy identity",
        r#"its --requestheader-client-ca-file contains the CA "CN=front-proxy-ca""#,
        r#"its --requestheader-allowed-names, if set, lists "front-proxy-client""#,
    ]);
}

/// A serving certificate without `<service>.<namespace>.svc`.
#[tokio::test]
async fn serving_certificate_without_the_service_name() {
    let c = Cluster::new();
    let serving = c.backend_ca.server("widget-api", &["widget-api.other.svc"]);
    let addr = backend(backend_tls(&serving, &c.front_proxy_ca), resource_list).await;
    let f = first_failure(c.apiservice(), &addr.to_string(), c.proxy_identity()).await;
    assert_eq!(f.condition.reason, "FailedDiscoveryCheck");
    f.assert_cause("ServingCertificateNotValidForName");
    f.assert_message(&[
        &format!("the serving certificate is not valid for \"{SERVICE_DNS}\""),
        "widget-api.other.svc",
        &format!("reissue it with the DNS name \"{SERVICE_DNS}\""),
    ]);
}

/// An expired serving certificate, and one not valid yet: the dates, in RFC 3339.
#[tokio::test]
async fn serving_certificate_outside_its_validity() {
    let c = Cluster::new();
    for (from, to, cause, words) in [
        (
            (2020, 1, 1),
            (2021, 1, 1),
            "ServingCertificateExpired",
            "expired at 2021-01-01T00:00:00Z",
        ),
        (
            (2099, 1, 1),
            (2100, 1, 1),
            "ServingCertificateNotYetValid",
            "is not valid before 2099-01-01T00:00:00Z",
        ),
    ] {
        let serving = c
            .backend_ca
            .server_valid("widget-api", &[SERVICE_DNS], from, to);
        let addr = backend(backend_tls(&serving, &c.front_proxy_ca), resource_list).await;
        let f = first_failure(c.apiservice(), &addr.to_string(), c.proxy_identity()).await;
        f.assert_cause(cause);
        f.assert_message(&[
            r#"the serving certificate (subject "CN=widget-api")"#,
            words,
        ]);
    }
}

/// A `caBundle` of another CA than the serving certificate's.
#[tokio::test]
async fn ca_bundle_of_another_ca() {
    let c = Cluster::new();
    let addr = backend(backend_tls(&c.serving(), &c.front_proxy_ca), resource_list).await;
    let mut apiservice = c.apiservice();
    apiservice.spec.ca_bundle = Ca::new("some-other-ca").cert_pem.into_bytes();
    let f = first_failure(apiservice, &addr.to_string(), c.proxy_identity()).await;
    f.assert_cause("ServingCertificateUnknownAuthority");
    f.assert_message(&[
        r#"the serving certificate is issued by "CN=widget-api-ca", which is not among the CAs of spec.caBundle ["CN=some-other-ca"]"#,
    ]);
}

/// Nothing listens at the address.
#[tokio::test]
async fn closed_port() {
    let c = Cluster::new();
    // Bound and never listening: connections are refused, and no other listener can
    // take the port meanwhile.
    let closed = tokio::net::TcpSocket::new_v4().expect("socket");
    closed
        .bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    let addr = closed.local_addr().expect("address");
    let f = first_failure(c.apiservice(), &addr.to_string(), c.proxy_identity()).await;
    drop(closed);
    f.assert_cause("ConnectionRefused");
    f.assert_message(&[
        &format!("dial tcp {addr}: connect: connection refused: nothing listens at {addr}"),
        "spec.service.port",
    ]);
}

/// A black hole: the connection is accepted and nothing is ever said on it. The check's
/// budget runs out; the message gives the time against the budget.
#[tokio::test]
async fn black_hole() {
    let c = Cluster::new();
    let hole = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = hole.local_addr().expect("address");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = hole.accept().await {
            held.push(tcp);
        }
    });
    let f = first_failure(c.apiservice(), &addr.to_string(), c.proxy_identity()).await;
    f.assert_cause("DiscoveryTimeout");
    f.assert_message(&[
        "context deadline exceeded (Client.Timeout exceeded while awaiting headers): no response in ",
        "(the budget is 1s); the extension server is slow or hung",
    ]);
}

/// The extension server does not serve the group-version.
#[tokio::test]
async fn group_version_not_served() {
    let c = Cluster::new();
    let tls = backend_tls(&c.serving(), &c.front_proxy_ca);
    let addr = backend(tls, || {
        json(StatusCode::NOT_FOUND, r#"{"kind":"Status","code":404}"#)
    })
    .await;
    let f = first_failure(c.apiservice(), &addr.to_string(), c.proxy_identity()).await;
    f.assert_cause("GroupVersionNotServed");
    f.assert_message(&[
        &format!("bad status from https://{addr}{PROBE_PATH}: 404"),
        "the extension server does not serve widgets.example.io/v1alpha1",
    ]);
}

/// A 200 whose body is not an `APIResourceList`: the Service points at another server.
#[tokio::test]
async fn not_an_api_resource_list() {
    let c = Cluster::new();
    let tls = backend_tls(&c.serving(), &c.front_proxy_ca);
    let addr = backend(tls, || {
        json(StatusCode::OK, r#"{"kind":"APIGroupList","groups":[]}"#)
    })
    .await;
    let f = first_failure(c.apiservice(), &addr.to_string(), c.proxy_identity()).await;
    f.assert_cause("NotAPIResourceList");
    f.assert_message(&[
        r#"the response is not an APIResourceList (Content-Type "application/json", an object of kind "APIGroupList")"#,
        "spec.service may point at a server that is not this API's extension server",
    ]);
}
