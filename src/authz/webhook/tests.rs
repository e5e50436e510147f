//! The SubjectAccessReview authorizer against a stub webhook: request bodies byte for
//! byte as apiserver's `webhook_v1_test.go` vectors, status-to-decision mapping, the
//! decision cache (TTLs per identity on a manual clock, errors and huge requests never
//! cached) and failing closed when the webhook is unreachable.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::util::BoxCloneSyncService;

use super::*;
use crate::authn::UserInfo;
use crate::authz::{Decision, RequestInfo};
use crate::body::{Body, BoxError};
use crate::webhook::{Backoff, WebhookTransport};

use crate::testing::ManualClock;

/// A webhook in memory: records each body it receives and answers with `answer(body)`.
struct Stub {
    bodies: Arc<Mutex<Vec<Value>>>,
    calls: Arc<AtomicUsize>,
}

fn webhook_stub(
    answer: impl Fn(&Value) -> (u16, Value) + Send + Sync + 'static,
) -> (Stub, WebhookTransport) {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    let answer = Arc::new(answer);
    let (b, c) = (bodies.clone(), calls.clone());
    let svc = tower::service_fn(move |req: Request<Body>| {
        let (b, c, answer) = (b.clone(), c.clone(), answer.clone());
        async move {
            c.fetch_add(1, Ordering::SeqCst);
            let bytes = req.into_body().collect().await?.to_bytes();
            let body: Value = serde_json::from_slice(&bytes)?;
            let (code, reply) = answer(&body);
            b.lock().unwrap().push(body);
            let mut res = Response::new(Body::full(reply.to_string()));
            *res.status_mut() = StatusCode::from_u16(code)?;
            Ok::<_, BoxError>(res)
        }
    });
    (Stub { bodies, calls }, BoxCloneSyncService::new(svc))
}

fn status(s: Value) -> (u16, Value) {
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "status": s});
    (200, review)
}

/// `authz`'s decision on `a`, which must not be an error.
async fn decision(authz: &SubjectAccessReviewAuthorizer, a: &Attributes) -> Decision {
    let answer = authz.authorize(a).await;
    answer.expect("a decision").decision
}

fn authorizer(transport: WebhookTransport) -> (SubjectAccessReviewAuthorizer, ManualClock) {
    let clock = ManualClock::new();
    let timer = clock.timer();
    let client = WebhookClient::new(
        transport,
        "https://authz.test/authorize".parse().unwrap(),
        timer.clone(),
    )
    .with_backoff(Backoff {
        initial: Duration::from_millis(1),
        factor: 1.5,
        jitter: 0.0,
        steps: 3,
    });
    (SubjectAccessReviewAuthorizer::new(client, timer), clock)
}

fn resource_attrs(user: &str) -> Attributes {
    Attributes {
        user: UserInfo::new(user, ["dev"]),
        verb: "list".into(),
        namespace: String::new(),
        api_group: "metrics.k8s.io".into(),
        api_version: "v1beta1".into(),
        resource: "nodes".into(),
        subresource: String::new(),
        name: String::new(),
        path: "/apis/metrics.k8s.io/v1beta1/nodes".into(),
        is_resource_request: true,
        ..Attributes::default()
    }
}

fn non_resource(user: UserInfo, verb: &str, path: &str) -> Attributes {
    Attributes {
        user,
        verb: verb.into(),
        path: path.into(),
        ..Attributes::default()
    }
}

/// Conformance docs/conformance-vectors.md §8.2 (upstream `webhook_v1_test.go` TestV1Webhook): the whole body,
/// compared as JSON values.
#[tokio::test]
async fn request_bodies_match_upstream_vectors() {
    let jane = UserInfo {
        name: "jane".into(),
        uid: "1".into(),
        groups: vec!["group1".into(), "group2".into()],
        extra: BTreeMap::new(),
    };
    let cases = [
        (
            non_resource(UserInfo::default(), "", ""),
            json!({"nonResourceAttributes": {}}),
        ),
        (
            non_resource(UserInfo::new("jane", Vec::<String>::new()), "", ""),
            json!({"user": "jane", "nonResourceAttributes": {}}),
        ),
        (
            Attributes {
                user: jane,
                verb: "GET".into(),
                namespace: "kittensandponies".into(),
                api_group: "group3".into(),
                api_version: "v7beta3".into(),
                resource: "pods".into(),
                subresource: "proxy".into(),
                name: "my-pod".into(),
                path: "/foo".into(),
                is_resource_request: true,
                ..Attributes::default()
            },
            json!({
                "user": "jane", "uid": "1", "groups": ["group1", "group2"],
                "resourceAttributes": {
                    "verb": "GET", "namespace": "kittensandponies", "group": "group3",
                    "version": "v7beta3", "resource": "pods", "subresource": "proxy", "name": "my-pod"
                }
            }),
        ),
    ];
    for (attrs, spec) in cases {
        let (stub, transport) = webhook_stub(|_| status(json!({"allowed": true})));
        let (authz, _) = authorizer(transport);
        authz.authorize(&attrs).await.unwrap();
        let sent = stub.bodies.lock().unwrap().remove(0);
        let want = json!({
            "kind": "SubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {},
            "spec": spec,
            "status": {"allowed": false},
        });
        assert_eq!(sent, want);
    }
}

#[test]
fn extra_is_sent_and_empty_extra_is_absent() {
    let mut user = UserInfo::new("u", ["g"]);
    user.extra.insert(
        "scopes.example.com/Key".into(),
        vec!["a".into(), "b".into()],
    );
    let spec = SubjectAccessReviewSpec::from_attributes(&non_resource(user, "get", "/healthz"));
    let body: Value =
        serde_json::from_slice(&subject_access_review_body(&spec, WebhookVersion::V1).unwrap())
            .unwrap();
    assert_eq!(
        body["spec"],
        json!({"nonResourceAttributes": {"path": "/healthz", "verb": "get"}, "user": "u", "groups": ["g"], "extra": {"scopes.example.com/Key": ["a", "b"]}})
    );
    let spec = SubjectAccessReviewSpec::from_attributes(&resource_attrs("u"));
    let text = String::from_utf8(
        subject_access_review_body(&spec, WebhookVersion::V1)
            .unwrap()
            .to_vec(),
    )
    .unwrap();
    assert!(
        !text.contains("extra") && !text.contains("\"path\""),
        "{text}"
    );
}

/// A tenant's request carries the tenant as `spec.extra["authorization.kcp.io/cluster-name"]`
/// (kcp's key), replacing any value the user's own extra had for it; outside a tenant a
/// user's value of that key is dropped. Each tenant's answers are cached apart.
#[tokio::test]
async fn the_tenant_is_an_extra_of_the_review_and_part_of_the_cache_key() {
    let mut user = UserInfo::new("u", ["g"]);
    user.extra.insert(
        crate::tenant::TENANT_EXTRA_KEY.into(),
        vec!["team-b".into()],
    );
    user.extra.insert("scopes".into(), vec!["s".into()]);
    let mut in_a = resource_attrs("u");
    in_a.user = user.clone();
    in_a.tenant = "team-a".into();
    let spec = serde_json::to_value(SubjectAccessReviewSpec::from_attributes(&in_a)).unwrap();
    assert_eq!(
        spec["extra"],
        json!({"authorization.kcp.io/cluster-name": ["team-a"], "scopes": ["s"]})
    );
    let mut outside = in_a.clone();
    outside.tenant = String::new();
    let spec = serde_json::to_value(SubjectAccessReviewSpec::from_attributes(&outside)).unwrap();
    assert_eq!(spec["extra"], json!({"scopes": ["s"]}));

    // Allowed in team-a, denied in team-b: two reviews, each answer cached for its tenant.
    let (stub, transport) = webhook_stub(|body| {
        let tenant = &body["spec"]["extra"]["authorization.kcp.io/cluster-name"][0];
        status(json!({"allowed": tenant == "team-a"}))
    });
    let (authz, _) = authorizer(transport);
    let mut in_b = in_a.clone();
    in_b.tenant = "team-b".into();
    for _ in 0..2 {
        assert_eq!(decision(&authz, &in_a).await, Decision::Allow);
        assert_eq!(decision(&authz, &in_b).await, Decision::NoOpinion);
    }
    assert_eq!(stub.calls.load(Ordering::SeqCst), 2);
    assert_ne!(cache_key(&in_a), cache_key(&outside));
}

#[test]
fn v1beta1_names_groups_group() {
    let spec = SubjectAccessReviewSpec::from_attributes(&resource_attrs("u"));
    let body: Value = serde_json::from_slice(
        &subject_access_review_body(&spec, WebhookVersion::V1beta1).unwrap(),
    )
    .unwrap();
    assert_eq!(body["apiVersion"], "authorization.k8s.io/v1beta1");
    assert_eq!(body["spec"]["group"], json!(["dev"]));
    assert!(body["spec"].get("groups").is_none());
    assert_eq!("v1beta1".parse(), Ok(WebhookVersion::V1beta1));
    assert_eq!(
        "v2".parse::<WebhookVersion>().unwrap_err().to_string(),
        "unsupported webhook authorizer version \"v2\", supported versions are [\"v1\" \"v1beta1\"]"
    );
}

/// Reference §8.5: allowed, denied, neither, and both.
#[tokio::test]
async fn status_maps_to_decisions_as_upstream() {
    let cases = [
        (
            json!({"allowed": true, "reason": "rbac"}),
            Ok((Decision::Allow, "rbac")),
        ),
        (
            json!({"allowed": false, "denied": true, "reason": "no"}),
            Ok((Decision::Deny, "no")),
        ),
        (
            json!({"allowed": false, "reason": "dunno", "evaluationError": "x"}),
            Ok((Decision::NoOpinion, "dunno")),
        ),
        (json!({}), Ok((Decision::NoOpinion, ""))),
        (
            json!({"allowed": true, "denied": true}),
            Err(BOTH_ALLOW_AND_DENY),
        ),
    ];
    for (s, want) in cases {
        let answer = s.clone();
        let (_, transport) = webhook_stub(move |_| status(answer.clone()));
        let (authz, _) = authorizer(transport);
        let got = authz.authorize(&resource_attrs("alice")).await;
        let got = got
            .as_ref()
            .map(|a| (a.decision, a.reason.as_str()))
            .map_err(|e| e.to_string());
        assert_eq!(got, want.map_err(str::to_owned), "{s}");
    }
}

#[tokio::test]
async fn answers_are_cached_for_their_ttl_per_identity() {
    let (stub, transport) = webhook_stub(|b| {
        let allowed = b["spec"]["user"] == "alice";
        status(json!({"allowed": allowed}))
    });
    let (authz, clock) = authorizer(transport);
    let authz = authz
        .authorized_ttl(Duration::from_secs(300))
        .unauthorized_ttl(Duration::from_secs(30));
    let calls = || stub.calls.load(Ordering::SeqCst);

    let alice = resource_attrs("alice");
    let bob = resource_attrs("bob");
    assert_eq!(decision(&authz, &alice).await, Decision::Allow);
    assert_eq!(decision(&authz, &bob).await, Decision::NoOpinion);
    assert_eq!(calls(), 2, "a different user is a different key");

    clock.advance(Duration::from_secs(29));
    authz.authorize(&alice).await.unwrap();
    authz.authorize(&bob).await.unwrap();
    assert_eq!(calls(), 2, "both still cached");

    clock.advance(Duration::from_secs(1));
    authz.authorize(&alice).await.unwrap();
    assert_eq!(decision(&authz, &bob).await, Decision::NoOpinion);
    assert_eq!(calls(), 3, "only the unauthorized answer expired");

    let mut other_group = resource_attrs("alice");
    other_group.user.groups.push("extra-group".into());
    authz.authorize(&other_group).await.unwrap();
    assert_eq!(calls(), 4, "groups are part of the key");

    clock.advance(Duration::from_secs(271));
    authz.authorize(&alice).await.unwrap();
    assert_eq!(calls(), 5, "the authorized answer expired after 5 minutes");
}

#[tokio::test]
async fn errors_are_returned_and_never_cached() {
    let (stub, transport) = webhook_stub(|_| (403, json!({"kind": "Status"})));
    let (authz, _) = authorizer(transport);
    let attrs = resource_attrs("alice");
    let err = authz.authorize(&attrs).await.unwrap_err();
    assert!(err.to_string().contains("status code 403"), "{err}");
    authz.authorize(&attrs).await.unwrap_err();
    assert_eq!(
        stub.calls.load(Ordering::SeqCst),
        2,
        "403 is not retried, and not cached"
    );

    // Transient failures are retried (3 steps here) and still fail closed.
    let (stub, transport) = webhook_stub(|_| (500, json!({})));
    let (authz, _) = authorizer(transport);
    authz.authorize(&attrs).await.unwrap_err();
    assert_eq!(stub.calls.load(Ordering::SeqCst), 3);
    // Each attempt counted and timed by its code, as upstream's delegated authorizer
    // records them.
    let text = authz.metrics().render();
    assert!(
        text.contains("apiserver_delegated_authz_request_total{code=\"500\"} 3\n"),
        "{text}"
    );
    assert!(
        text.contains("apiserver_delegated_authz_request_duration_seconds_bucket{le=\"0.25\",code=\"500\"} 3\n"),
        "{text}"
    );
    assert!(
        text.contains("# HELP apiserver_delegated_authz_request Number of HTTP requests partitioned by status code.\n"),
        "{text}"
    );

    let (_, transport) = webhook_stub(|_| (200, json!("not a review")));
    let (authz, _) = authorizer(transport);
    let err = authz.authorize(&attrs).await.unwrap_err();
    assert!(
        err.to_string().starts_with(
            "decoding the SubjectAccessReview answer from https://authz.test/authorize: "
        ),
        "{err}"
    );
}

#[tokio::test]
async fn unreachable_webhook_fails_closed() {
    let svc = tower::service_fn(|_: Request<Body>| async {
        Err::<Response<Body>, BoxError>("dial tcp 127.0.0.1:1: connect: connection refused".into())
    });
    let (authz, _) = authorizer(BoxCloneSyncService::new(svc));
    let err = authz.authorize(&resource_attrs("alice")).await.unwrap_err();
    assert!(err.to_string().contains("connection refused"), "{err}");
    // No answer came: counted as upstream's `<error>`.
    let text = authz.metrics().render();
    assert!(
        text.contains("apiserver_delegated_authz_request_total{code=\"<error>\"} 1\n"),
        "{text}"
    );
}

#[tokio::test]
async fn huge_requests_are_not_cached() {
    let (stub, transport) = webhook_stub(|_| status(json!({"allowed": true})));
    let (authz, _) = authorizer(transport);
    let mut attrs = resource_attrs("alice");
    // 10000 bytes in all: the limit itself is already too large to cache.
    let used: usize = ["list", "metrics.k8s.io", "v1beta1", "nodes"]
        .iter()
        .map(|s| s.len())
        .sum::<usize>()
        + attrs.path.len();
    attrs.name = "n".repeat(10_000 - used);
    authz.authorize(&attrs).await.unwrap();
    authz.authorize(&attrs).await.unwrap();
    assert_eq!(stub.calls.load(Ordering::SeqCst), 2);
    attrs.name.pop();
    authz.authorize(&attrs).await.unwrap();
    authz.authorize(&attrs).await.unwrap();
    assert_eq!(
        stub.calls.load(Ordering::SeqCst),
        3,
        "one byte less is cached"
    );
}

/// The cache key tells apart every pair of specs that differ, including ones whose
/// fields only shift a boundary, and is the same for equal attributes.
#[test]
fn cache_keys_are_distinct_for_different_specs() {
    let base = resource_attrs("alice");
    let mut variants = vec![base.clone()];
    let mut push = |f: &dyn Fn(&mut Attributes)| {
        let mut a = base.clone();
        f(&mut a);
        variants.push(a);
    };
    push(&|a| a.namespace = "ns2".into());
    push(&|a| a.verb = "watch".into());
    push(&|a| a.api_group = "apps".into());
    push(&|a| a.api_version = "v2".into());
    push(&|a| a.resource = "pods".into());
    push(&|a| a.subresource = "status".into());
    push(&|a| a.name = "other".into());
    push(&|a| a.user.name = "alic".into());
    push(&|a| a.user.uid = "1".into());
    push(&|a| a.user.groups = vec!["a,b".into()]);
    push(&|a| a.user.groups = vec!["a".into(), "b".into()]);
    push(&|a| a.user.groups = vec!["ab".into()]);
    push(&|a| a.user.groups = vec!["a".into(), "".into()]);
    push(&|a| {
        a.user.extra.insert("k".into(), vec!["v".into()]);
    });
    push(&|a| {
        a.user
            .extra
            .insert("k".into(), vec!["v".into(), "w".into()]);
    });
    push(&|a| {
        a.user.extra.insert("k".into(), Vec::new());
    });
    // A boundary shift between two adjacent fields.
    push(&|a| {
        a.namespace = format!("{}x", a.namespace);
        a.verb = a.verb[..a.verb.len() - 1].to_owned();
    });
    push(&|a| {
        a.is_resource_request = false;
        a.path = "/apis".into();
    });
    let keys: Vec<Vec<u8>> = variants.iter().map(super::cache_key).collect();
    for (i, a) in keys.iter().enumerate() {
        for (j, b) in keys.iter().enumerate().skip(i + 1) {
            assert_ne!(a, b, "variants {i} and {j} share a key");
        }
    }
    assert_eq!(super::cache_key(&base), super::cache_key(&base.clone()));
}

/// docs/upstream-behaviour.md §8.5 selector mapping: a list's raw selectors become
/// requirements (`=`, `==`, `in` are `In`; `!=`, `notin` are `NotIn`; `exists`, `!`; one
/// value per field requirement; `>`/`<` left out), sorted as upstream parses them.
#[test]
fn list_and_watch_reviews_carry_selector_requirements() {
    let uri: http::Uri = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a,status.phase!%3DFailed&labelSelector=app%20in%20(web,api),!canary,tier,env!%3Dprod,x%3E5,v%3D%3D1&watch=1"
        .parse()
        .unwrap();
    let info = RequestInfo::from_parts(&http::Method::GET, &uri).unwrap();
    assert_eq!(info.verb, "watch");
    let attrs = Attributes::new(UserInfo::new("jane", ["dev"]), &info);
    let spec = serde_json::to_value(SubjectAccessReviewSpec::from_attributes(&attrs)).unwrap();
    assert_eq!(
        spec["resourceAttributes"],
        json!({
            "verb": "watch", "version": "v1", "resource": "pods",
            "fieldSelector": {"requirements": [
                {"key": "spec.nodeName", "operator": "In", "values": ["node-a"]},
                {"key": "status.phase", "operator": "NotIn", "values": ["Failed"]},
            ]},
            "labelSelector": {"requirements": [
                {"key": "app", "operator": "In", "values": ["api", "web"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "tier", "operator": "Exists"},
                {"key": "v", "operator": "In", "values": ["1"]},
            ]},
        })
    );
    // A selector that does not parse is left out, as upstream leaves out its requirements.
    let uri: http::Uri = "/api/v1/pods?labelSelector=a%3D%3D%3D&fieldSelector=x"
        .parse()
        .unwrap();
    let info = RequestInfo::from_parts(&http::Method::GET, &uri).unwrap();
    let attrs = Attributes::new(UserInfo::new("jane", ["dev"]), &info);
    assert!(attrs.field_selector.is_empty() && attrs.label_selector.is_empty());
    let spec = serde_json::to_value(SubjectAccessReviewSpec::from_attributes(&attrs)).unwrap();
    assert!(spec["resourceAttributes"].get("fieldSelector").is_none());
    // Different selectors are different cache entries.
    let a = Attributes::new(
        UserInfo::new("j", ["g"]),
        &RequestInfo::from_parts(
            &http::Method::GET,
            &"/api/v1/pods?labelSelector=a%3D1".parse().unwrap(),
        )
        .unwrap(),
    );
    let b = Attributes::new(
        UserInfo::new("j", ["g"]),
        &RequestInfo::from_parts(
            &http::Method::GET,
            &"/api/v1/pods?labelSelector=a%3D2".parse().unwrap(),
        )
        .unwrap(),
    );
    assert_ne!(cache_key(&a), cache_key(&b));
}
