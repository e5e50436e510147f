//! In-memory webhooks shared by the benches: a TokenReview server that authenticates
//! every token and a SubjectAccessReview server that allows everything, each behind the
//! library's `WebhookClient` so the benched code is the real client and cache; and a wait
//! for a built stack's worker to mark an APIService Available; the extension servers'
//! answer, the reader that checks it, the benches' one-worker runtime and their
//! loopback listeners.

use std::time::Duration;

use http::{Request, Response, Uri};
use kube_aggregator::authn::{CacheTtl, TokenReviewAuthenticator};
use kube_aggregator::authz::SubjectAccessReviewAuthorizer;
use kube_aggregator::body::BoxError;
use kube_aggregator::rt::Timer;
use kube_aggregator::webhook::WebhookClient;
use kube_aggregator::{Body, Registry};
use tower::util::BoxCloneSyncService;

/// What the benches' extension servers answer to a `GET` of nodes.
pub const ANSWER: &str =
    r#"{"kind":"NodeMetricsList","apiVersion":"metrics.k8s.io/v1beta1","metadata":{},"items":[]}"#;

/// What the benches' extension servers answer at `path`: an `APIResourceList` to a
/// group-version's discovery (`/apis/<group>/<version>`, the availability check's
/// request), [`ANSWER`] to anything else.
pub fn answer_at(path: &str) -> &'static str {
    let group_version = path
        .strip_prefix("/apis/")
        .map(|gv| gv.split('/').count() == 2);
    if group_version == Some(true) {
        r#"{"kind":"APIResourceList","apiVersion":"v1","resources":[]}"#
    } else {
        ANSWER
    }
}

/// Reads a response through and returns its status, panicking unless the body is
/// [`ANSWER`] (a bench that measured a wrong answer would measure nothing).
pub async fn read_answer<B>(res: Response<B>) -> http::StatusCode
where
    B: http_body::Body,
    B::Error: std::fmt::Display,
{
    use http_body_util::BodyExt;
    let status = res.status();
    let body = res
        .into_body()
        .collect()
        .await
        .unwrap_or_else(|e| panic!("body: {e}"))
        .to_bytes();
    assert_eq!(body, ANSWER.as_bytes(), "the answer changed on the way");
    status
}

/// A tokio runtime with one worker thread: client, gateway and backend share it, as the
/// gateway example runs on one core.
pub fn one_worker_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
}

/// A webhook client whose server answers every call with `answer` (JSON).
fn in_memory_webhook(url: &'static str, answer: &'static str, timer: Timer) -> WebhookClient {
    let svc = tower::service_fn(move |_req: Request<Body>| async move {
        Ok::<_, BoxError>(Response::new(Body::full(answer)))
    });
    WebhookClient::new(BoxCloneSyncService::new(svc), Uri::from_static(url), timer)
}

/// A TokenReview authenticator whose webhook says every token is `alice` in `dev`;
/// answers are cached for an hour, so after the first request every one is a cache hit.
pub fn token_review(timer: Timer) -> TokenReviewAuthenticator {
    let answer = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{"authenticated":true,"user":{"username":"alice","groups":["dev"]}}}"#;
    let client = in_memory_webhook("https://authn.bench/review", answer, timer.clone());
    TokenReviewAuthenticator::new(client, timer, CacheTtl::both(Duration::from_secs(3600)))
        .unwrap_or_else(|e| panic!("token review: {e}"))
}

/// A SubjectAccessReview authorizer whose webhook allows everything (default TTLs, so
/// after the first request every one is a cache hit).
pub fn allowing_sar(timer: Timer) -> SubjectAccessReviewAuthorizer {
    let answer = r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","status":{"allowed":true}}"#;
    let client = in_memory_webhook("https://authz.bench/authorize", answer, timer.clone());
    SubjectAccessReviewAuthorizer::new(client, timer)
}

/// Waits until the worker's availability check has marked APIService `name` Available
/// (the benches measure the proxied path, not the gate's 503).
pub async fn available(registry: &Registry, name: &str) {
    let wait = registry.wait_until(|table| table.get(name).is_some_and(|r| r.is_available()));
    if tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .is_err()
    {
        let condition = registry.snapshot().get(name).and_then(|r| {
            let c = r.apiservice.available_condition()?;
            Some(format!("{}: {}", c.reason, c.message))
        });
        let condition = condition.unwrap_or_else(|| "no condition".to_owned());
        panic!("{name} did not become Available within 30 s ({condition})");
    }
}

/// A listener on a free loopback port and its address; panics naming `what` (say, "the
/// backend") when either fails.
pub async fn bind_loopback(what: &str) -> (tokio::net::TcpListener, std::net::SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("bind {what}: {e}"));
    let addr = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("address of {what}: {e}"));
    (listener, addr)
}
