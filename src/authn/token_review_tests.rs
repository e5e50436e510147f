//! The TokenReview authenticator against a stub webhook: the rows of apiserver's webhook
//! tests (audiences, status errors), and the cache (coalesced lookups, TTLs on a manual
//! clock, errors never kept, a dropped leader handing its lookup over).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::util::BoxCloneSyncService;

use super::*;
use crate::body::Body;

use crate::testing::ManualClock;

/// A webhook answering `status` and recording the request bodies.
fn webhook(status: Value) -> (WebhookClient, Arc<Mutex<Vec<Value>>>, Arc<AtomicUsize>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    let (s, c) = (seen.clone(), calls.clone());
    let svc = tower::service_fn(move |req: http::Request<Body>| {
        let (status, seen, calls) = (status.clone(), s.clone(), c.clone());
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            assert_eq!(req.method(), http::Method::POST);
            let body = req.into_body().collect().await?.to_bytes();
            seen.lock().unwrap().push(serde_json::from_slice(&body)?);
            // Let concurrent callers pile up behind this one.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let answer =
                json!({"kind": "TokenReview", "apiVersion": API_VERSION, "status": status});
            Ok::<_, crate::body::BoxError>(http::Response::new(Body::full(answer.to_string())))
        }
    });
    let client = WebhookClient::new(
        BoxCloneSyncService::new(svc),
        "https://authn.example/review".parse().unwrap(),
        Timer::tokio(),
    );
    (client, seen, calls)
}

type Seen = Arc<Mutex<Vec<Value>>>;

fn authn(
    status: Value,
    implicit: &[&str],
) -> (
    TokenReviewAuthenticator,
    Seen,
    Arc<AtomicUsize>,
    ManualClock,
) {
    let (client, seen, calls) = webhook(status);
    let clock = ManualClock::new();
    let a = TokenReviewAuthenticator::new(client, clock.timer(), CacheTtl::default())
        .unwrap()
        .with_implicit_audiences(implicit.iter().copied());
    (a, seen, calls, clock)
}

fn auds(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

const API_AUDS: &[&str] = &["api", "other-api"];

#[tokio::test]
async fn vectors_4_5_rows() {
    let somebody = json!({"authenticated": true, "user": {"username": "somebody"}});
    let with_auds = |a: &[&str]| {
        let mut s = somebody.clone();
        s["audiences"] = json!(a);
        s
    };
    let mut api_and_other = API_AUDS.to_vec();
    api_and_other.push("other");
    // (webhook status, implicit audiences, wanted audiences, user)
    type Row<'a> = (Value, &'a [&'a str], Vec<String>, Option<&'a str>);
    let rows: Vec<Row> = vec![
        (somebody.clone(), &[], vec![], Some("somebody")),
        (
            json!({"authenticated": false, "user": {"username": "garbage"}}),
            &[],
            vec![],
            None,
        ),
        (json!({"authenticated": false}), &[], vec![], None),
        (somebody.clone(), API_AUDS, auds(API_AUDS), Some("somebody")),
        (
            somebody.clone(),
            &api_and_other,
            auds(API_AUDS),
            Some("somebody"),
        ),
        (
            json!({"authenticated": false}),
            API_AUDS,
            auds(&["other"]),
            None,
        ),
        (somebody.clone(), API_AUDS, auds(&["other"]), None),
        (
            with_auds(API_AUDS),
            API_AUDS,
            auds(API_AUDS),
            Some("somebody"),
        ),
        (with_auds(API_AUDS), &[], vec![], Some("somebody")),
        (with_auds(&["other"]), API_AUDS, auds(API_AUDS), None),
    ];
    for (i, (status, implicit, wanted, user)) in rows.into_iter().enumerate() {
        let (a, seen, _, _) = authn(status, implicit);
        let got = a.authenticate_token("tok", &wanted).await.unwrap();
        // The call counted by its code, as upstream's delegated authenticator counts it.
        let text = a.metrics().render();
        assert!(
            text.contains("apiserver_delegated_authn_request_total{code=\"200\"} 1\n"),
            "row {i}: {text}"
        );
        assert_eq!(got.map(|u| u.name), user.map(str::to_owned), "row {i}");
        let req = seen.lock().unwrap()[0].clone();
        assert_eq!(req["apiVersion"], API_VERSION, "row {i}");
        assert_eq!(req["kind"], "TokenReview", "row {i}");
        assert_eq!(req["spec"]["token"], "tok", "row {i}");
        if wanted.is_empty() {
            assert!(req["spec"].get("audiences").is_none(), "row {i}");
        } else {
            assert_eq!(req["spec"]["audiences"], json!(wanted), "row {i}");
        }
    }
}

#[tokio::test]
async fn full_user_and_status_error() {
    let (a, _, _, _) = authn(
        json!({"authenticated": true, "user": {"username": "person@place.com", "uid": "abcd-1234",
            "groups": ["stuff-dev", "main-eng"], "extra": {"foo": ["bar", "baz"]}}}),
        &[],
    );
    let u = a.authenticate_token("t", &[]).await.unwrap().unwrap();
    assert_eq!(
        (u.name.as_str(), u.uid.as_str()),
        ("person@place.com", "abcd-1234")
    );
    assert_eq!(u.groups, ["stuff-dev", "main-eng"]);
    assert_eq!(u.extra["foo"], ["bar", "baz"]);
    let (a, _, _, _) = authn(
        json!({"authenticated": false, "error": "token expired"}),
        &[],
    );
    let err = a.authenticate_token("t", &[]).await.unwrap_err();
    assert_eq!(err.to_string(), "token expired");
}

#[tokio::test]
async fn cache_coalesces_and_honours_ttls() {
    let (a, _, calls, clock) = authn(
        json!({"authenticated": true, "user": {"username": "u"}}),
        &[],
    );
    let lookups = (0..16).map(|_| a.authenticate_token("same", &[]));
    let results = futures_util::future::join_all(lookups).await;
    assert!(
        results
            .iter()
            .all(|r| matches!(r, Ok(Some(u)) if u.name == "u"))
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "one webhook call for 16 concurrent lookups"
    );
    clock.advance(Duration::from_secs(119));
    a.authenticate_token("same", &[]).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1, "within the TTL");
    a.authenticate_token("same", &auds(&["x"])).await.unwrap();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "audiences are part of the key"
    );
    clock.advance(Duration::from_secs(2));
    a.authenticate_token("same", &[]).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3, "after the TTL");
}

#[tokio::test]
async fn errors_are_not_cached_and_failures_use_their_ttl() {
    let (client, _, calls) = webhook(json!({"authenticated": false, "error": "boom"}));
    let ttl = CacheTtl {
        success: Duration::from_secs(60),
        failure: Duration::from_secs(5),
    };
    let clock = ManualClock::new();
    let a = TokenReviewAuthenticator::new(client, clock.timer(), ttl).unwrap();
    a.authenticate_token("t", &[]).await.unwrap_err();
    a.authenticate_token("t", &[]).await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let (client, _, calls) = webhook(json!({"authenticated": false}));
    let clock = ManualClock::new();
    let a = TokenReviewAuthenticator::new(client, clock.timer(), ttl).unwrap();
    assert_eq!(a.authenticate_token("t", &[]).await, Ok(None));
    assert_eq!(a.authenticate_token("t", &[]).await, Ok(None));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    clock.advance(Duration::from_secs(6));
    assert_eq!(a.authenticate_token("t", &[]).await, Ok(None));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_dropped_leader_hands_over() {
    let (a, _, calls, _) = authn(
        json!({"authenticated": true, "user": {"username": "u"}}),
        &[],
    );
    let mut leader = a.authenticate_token("t", &[]);
    assert!(futures_util::FutureExt::now_or_never(&mut leader).is_none());
    let follower = a.authenticate_token("t", &[]);
    drop(leader);
    assert_eq!(follower.await.unwrap().unwrap().name, "u");
    // The follower carries on the leader's lookup instead of starting another.
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn hmac_key_separates_fields() {
    let cache = TokenCache::new(CacheTtl::default(), ManualClock::new().timer()).unwrap();
    assert_ne!(
        cache.key("ab", &auds(&["c"])),
        cache.key("a", &auds(&["bc"]))
    );
    assert_eq!(
        cache.key("ab", &auds(&["c"])),
        cache.key("ab", &auds(&["c"]))
    );
}
