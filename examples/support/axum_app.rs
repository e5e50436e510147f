//! The axum host of `examples/axum_host.rs`: a `Router` of its own behind the
//! aggregator, and one in-process extension server for `widgets.example.io/v1`.

use std::convert::Infallible;

use axum::Router;
use axum::routing::get as route_get;
use http::{Request, Response};
use kube_aggregator::apiservice::ApiService;
use kube_aggregator::authn::{BearerToken, TokenFileAuthenticator};
use kube_aggregator::authz::AlwaysAllow;
use kube_aggregator::availability::StaticServiceResolver;
use kube_aggregator::source::ApiServiceEvent;
use kube_aggregator::transport::InMemoryTransport;
use kube_aggregator::{Aggregator, Body};
use tower::Layer;

/// The `--token-auth-file` of the example: one administrator.
const TOKENS: &str = "demo-token,demo-admin,1,\"system:masters\"\n";

/// The host's own routes.
pub(crate) fn router() -> Router {
    Router::new()
        .route("/hello", route_get(|| async { "hello from the axum host\n" }))
        .route(
            "/apis",
            route_get(|| async {
                axum::Json(serde_json::json!({
                    "kind": "APIGroupList", "apiVersion": "v1",
                    "groups": [{"name": "host.example.io",
                        "versions": [{"groupVersion": "host.example.io/v1", "version": "v1"}],
                        "preferredVersion": {"groupVersion": "host.example.io/v1", "version": "v1"}}]
                }))
            }),
        )
}

/// The extension server: answers every request with the caller it was told about.
async fn widgets(req: Request<Body>) -> Result<Response<Body>, Infallible> {
    let user = req
        .headers()
        .get("x-remote-user")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = serde_json::json!({
        "kind": "WidgetList", "apiVersion": "widgets.example.io/v1",
        "items": [], "metadata": {"annotations": {"served-for": user}},
    });
    let mut res = Response::new(Body::full(body.to_string()));
    res.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(res)
}

fn widgets_apiservice() -> ApiService {
    ApiService::remote("widgets.example.io", "v1", "default", "widgets")
        .priorities(1000, 15)
        .insecure_skip_tls_verify()
}

/// The whole stack around [`router`], with its worker spawned on tokio.
pub(crate) fn stack() -> Result<
    kube_aggregator::builder::AggregatorStack<std::convert::Infallible>,
    Box<dyn std::error::Error + Send + Sync>,
> {
    let transport = InMemoryTransport::new();
    transport.insert("widgets.default.svc", tower::service_fn(widgets));
    let mut resolver = StaticServiceResolver::new();
    resolver.insert("default", "widgets", 443, "widgets.default.svc:443")?;
    let (aggregator, worker) = Aggregator::builder(transport)
        .resolver(resolver)
        .authenticator(BearerToken::new(TokenFileAuthenticator::from_csv(TOKENS)?))
        .authorizer(AlwaysAllow)
        .build()?;
    aggregator
        .registry()
        .apply(ApiServiceEvent::Resynced(vec![widgets_apiservice()]))?;
    tokio::spawn(worker);
    Ok(aggregator.layer(router()))
}

/// `GET http://addr/path` with an optional bearer token, waiting (up to 5 s) for an
/// aggregated path to become available; the status and body.
pub(crate) async fn get(
    addr: std::net::SocketAddr,
    path: &str,
    token: Option<&str>,
) -> Result<(http::StatusCode, String), Box<dyn std::error::Error + Send + Sync>> {
    use http_body_util::BodyExt as _;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await?;
        tokio::spawn(conn);
        let mut req = Request::get(path).header(http::header::HOST, addr.to_string());
        if let Some(token) = token {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let res = sender
            .send_request(req.body(http_body_util::Empty::<bytes::Bytes>::new())?)
            .await?;
        let status = res.status();
        let body = String::from_utf8(res.into_body().collect().await?.to_bytes().to_vec())?;
        // The first availability check runs right after start.
        if status != http::StatusCode::SERVICE_UNAVAILABLE || tokio::time::Instant::now() > deadline
        {
            return Ok((status, body));
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
