//! The builder: a stack whose worker does not run (never spawned, or dropped) answers
//! remote requests 503 naming the problem, and building without an authorizer is refused.

use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use tower::{Layer, ServiceExt};

use super::*;
use crate::apiservice::ApiService;
use crate::authz::AlwaysAllow;
use crate::availability::StaticServiceResolver;
use crate::body::Body;
use crate::source::ApiServiceEvent;
use crate::testing::{NoExecutor, StoppedClock};
use crate::transport::InMemoryTransport;
use std::time::Duration;

fn apiservice() -> ApiService {
    ApiService::remote("widgets.example.io", "v1", "ns", "widgets")
        .priorities(1000, 15)
        .insecure_skip_tls_verify()
}

async fn get(
    service: &(
         impl tower::Service<
        Request<Body>,
        Response = Response<Body>,
        Error = std::convert::Infallible,
        Future: Send,
    > + Clone
     ),
) -> (StatusCode, String) {
    let mut req = Request::get("/apis/widgets.example.io/v1/things")
        .body(Body::empty())
        .unwrap();
    req.extensions_mut().insert(UserInfo::new("alice", ["dev"]));
    let res = service.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn a_stack_whose_worker_does_not_run_says_so() {
    let transport = InMemoryTransport::new();
    transport.insert(
        "widgets.ns.svc",
        tower::service_fn(|_: Request<Body>| async {
            Ok::<_, std::convert::Infallible>(Response::new(Body::full("from the backend")))
        }),
    );
    let mut resolver = StaticServiceResolver::new();
    resolver
        .insert("ns", "widgets", 443, "10.0.0.1:443")
        .unwrap();
    let clock = StoppedClock::new();
    let (aggregator, mut worker) = Aggregator::builder(transport)
        .resolver(resolver)
        .authorizer(AlwaysAllow)
        .runtime(NoExecutor::executor(), clock.timer())
        .build()
        .unwrap();
    aggregator
        .registry()
        .apply(ApiServiceEvent::Applied(apiservice()))
        .unwrap();
    let host = tower::service_fn(|_: Request<Body>| async {
        Ok::<_, std::convert::Infallible>(Response::new(String::from("host")))
    });
    let service = aggregator.layer(host);

    // Never spawned: after the start-up grace every remote request says why it fails.
    clock.advance(Duration::from_secs(6));
    let (status, body) = get(&service).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        body.starts_with("the aggregator's worker is not running"),
        "{body}"
    );

    // Once it runs, it checks the APIService and the backend answers.
    assert!(futures_util::FutureExt::now_or_never(&mut worker).is_none());
    let (status, body) = get(&service).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "from the backend")
    );

    // Dropped: said too.
    drop(worker);
    let (status, body) = get(&service).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        body.starts_with("the aggregator's worker has stopped"),
        "{body}"
    );
}

#[test]
fn an_authorizer_is_required() {
    let err = Aggregator::builder(InMemoryTransport::new())
        .build()
        .unwrap_err();
    assert_eq!(err, BuildError::NoAuthorizer);
}
