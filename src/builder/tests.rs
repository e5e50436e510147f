//! The builder: a stack whose worker does not run (never spawned, or dropped) answers
//! remote requests 503 naming the problem, and building without an authorizer is refused.

use http::{Request, Response, StatusCode};
use tower::Layer;

use super::*;
use crate::apiservice::ApiService;
use crate::authn::alice_gets;
use crate::authz::AlwaysAllow;
use crate::availability::StaticServiceResolver;
use crate::body::Body;
use crate::source::ApiServiceEvent;
use crate::testing::{NoExecutor, StoppedClock, answer};
use crate::transport::InMemoryTransport;
use std::time::Duration;

/// The APIService's resource `things`.
const THINGS: &str = "/apis/widgets.example.io/v1/things";

fn apiservice() -> ApiService {
    ApiService::remote("widgets.example.io", "v1", "ns", "widgets")
        .priorities(1000, 15)
        .insecure_skip_tls_verify()
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
    let (status, body) = answer(&service, alice_gets(THINGS)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        body.starts_with("the aggregator's worker is not running"),
        "{body}"
    );

    // Once it runs, it checks the APIService and the backend answers.
    assert!(futures_util::FutureExt::now_or_never(&mut worker).is_none());
    let (status, body) = answer(&service, alice_gets(THINGS)).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "from the backend")
    );

    // Dropped: said too.
    drop(worker);
    let (status, body) = answer(&service, alice_gets(THINGS)).await;
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
