//! The self reviews end to end through the layer: answers for the request's own user,
//! upstream's validation messages, rules and subject reviews, the protobuf bodies kubectl
//! 1.32 sends, and the refusals (wrong method, media type, size).

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::{Layer, ServiceExt};

use super::*;
use crate::authn::UserInfo;
use crate::authz::{
    AlwaysAllow, Attributes, Authorization, AuthorizationError, AuthorizeFuture, Authorizer,
    Decision, PrivilegedGroups, Rules, RulesFuture, Union,
};
use crate::body::Body;

/// Allows `list nodes` in metrics.k8s.io, denies `delete`, errs on `patch`, has no opinion
/// otherwise; records what it was asked.
#[derive(Clone, Default)]
struct Policy(Arc<Mutex<Vec<Attributes>>>);

impl Authorizer for Policy {
    fn authorize(&self, a: &Attributes) -> AuthorizeFuture {
        self.0.lock().unwrap().push(a.clone());
        let verdict = match a.verb.as_str() {
            "list" if a.resource == "nodes" => Ok(Authorization {
                decision: Decision::Allow,
                reason: "nodes are public".into(),
            }),
            "delete" => Ok(Authorization {
                decision: Decision::Deny,
                reason: "never".into(),
            }),
            "patch" => Err(AuthorizationError::new("policy unreachable")),
            _ => Ok(Authorization::new(Decision::NoOpinion)),
        };
        Box::pin(std::future::ready(verdict))
    }

    fn rules_for(&self, _: &UserInfo, namespace: &str) -> RulesFuture {
        let mut r = Rules::default();
        r.resource_rules.push(crate::authz::ResourceRule {
            verbs: vec!["get".into()],
            api_groups: vec![String::new()],
            resources: vec![format!("pods-in-{namespace}")],
            resource_names: Vec::new(),
        });
        Box::pin(std::future::ready(r))
    }
}

fn inner()
-> impl tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible, Future = impl Send>
+ Clone {
    tower::service_fn(|req: Request<Body>| async move {
        Ok::<_, Infallible>(Response::new(Body::full(format!(
            "inner {}",
            req.uri().path()
        ))))
    })
}

fn bob() -> UserInfo {
    let mut u = UserInfo::new("bob", ["team", "system:authenticated"]);
    u.uid = "b-1".into();
    u.extra
        .insert("scopes".into(), vec!["a".into(), "b".into()]);
    u
}

async fn post(
    authorizer: impl Authorizer,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> (StatusCode, String, Vec<u8>) {
    let svc = SelfReviewLayer::new(authorizer).layer(inner());
    let mut req = Request::post(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut req = req.body(Body::full(body.into())).unwrap();
    req.extensions_mut().insert(bob());
    let res = svc.oneshot(req).await.unwrap();
    let status = res.status();
    let ct = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = res.into_body().collect().await.unwrap().to_bytes().to_vec();
    (status, ct, body)
}

use bytes::Bytes;

const SSAR: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
const SSRR: &str = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
const SSR: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body).expect("JSON")
}

#[tokio::test]
async fn access_reviews_answer_for_the_requests_own_user() {
    let policy = Policy::default();
    let request = json!({"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview",
        "spec":{"resourceAttributes":{"namespace":"default","verb":"list","group":"metrics.k8s.io","resource":"nodes"}}});
    let (status, ct, body) = post(
        policy.clone(),
        SSAR,
        &[("content-type", "application/json")],
        request.to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(ct, "application/json");
    assert_eq!(
        std::str::from_utf8(&body).unwrap(),
        "{\"kind\":\"SelfSubjectAccessReview\",\"apiVersion\":\"authorization.k8s.io/v1\",\"metadata\":{\"creationTimestamp\":null},\"spec\":{\"resourceAttributes\":{\"namespace\":\"default\",\"verb\":\"list\",\"group\":\"metrics.k8s.io\",\"resource\":\"nodes\"}},\"status\":{\"allowed\":true,\"reason\":\"nodes are public\"}}\n"
    );
    let asked = policy.0.lock().unwrap().pop().unwrap();
    assert_eq!(
        asked.user,
        bob(),
        "the request's own user, uid, groups and extra"
    );
    assert_eq!(asked.api_version, "*", "an empty version is any version");
    assert!(asked.is_resource_request);
    assert_eq!(asked.path, "");

    for (verb, status_json) in [
        (
            "delete",
            json!({"allowed": false, "denied": true, "reason": "never"}),
        ),
        ("get", json!({"allowed": false})),
        (
            "patch",
            json!({"allowed": false, "evaluationError": "policy unreachable"}),
        ),
    ] {
        let request = json!({"spec":{"resourceAttributes":{"verb": verb, "resource": "pods"}}});
        let (status, _, body) = post(policy.clone(), SSAR, &[], request.to_string()).await;
        assert_eq!(status, StatusCode::CREATED, "{verb}");
        assert_eq!(json_of(&body)["status"], status_json, "{verb}");
    }
    let request = json!({"spec":{"nonResourceAttributes":{"path":"/healthz","verb":"get"}}});
    let (_, _, body) = post(policy.clone(), SSAR, &[], request.to_string()).await;
    assert_eq!(
        json_of(&body)["spec"],
        json!({"nonResourceAttributes":{"path":"/healthz","verb":"get"}})
    );
    let asked = policy.0.lock().unwrap().pop().unwrap();
    assert!(!asked.is_resource_request);
    assert_eq!(
        (asked.path.as_str(), asked.verb.as_str()),
        ("/healthz", "get")
    );
}

#[tokio::test]
async fn access_review_validation_and_selectors() {
    let policy = Policy::default();
    let (status, _, body) = post(policy.clone(), SSAR, &[], r#"{"spec":{}}"#).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        std::str::from_utf8(&body).unwrap(),
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\".authorization.k8s.io \\\"\\\" is invalid: spec.resourceAttributes: Invalid value: \\\"null\\\": exactly one of nonResourceAttributes or resourceAttributes must be specified\",\"reason\":\"Invalid\",\"details\":{\"group\":\"authorization.k8s.io\",\"causes\":[{\"reason\":\"FieldValueInvalid\",\"message\":\"Invalid value: \\\"null\\\": exactly one of nonResourceAttributes or resourceAttributes must be specified\",\"field\":\"spec.resourceAttributes\"}]},\"code\":422}\n"
    );
    let both = json!({"spec":{"resourceAttributes":{},"nonResourceAttributes":{"path":"/x"}}});
    let (status, _, body) = post(policy.clone(), SSAR, &[], both.to_string()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(json_of(&body)["message"].as_str().unwrap().contains("spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:\"/x\", Verb:\"\"}: cannot be specified in combination with resourceAttributes"));
    assert!(
        policy.0.lock().unwrap().is_empty(),
        "invalid reviews are not authorized"
    );

    let selectors = json!({"spec":{"resourceAttributes":{"verb":"list","resource":"pods",
        "fieldSelector":{"rawSelector":"spec.nodeName=n1"},
        "labelSelector":{"requirements":[
            {"key":"app","operator":"In","values":["web"]},
            {"key":"tier","operator":"Sometimes","values":["x"]}]}}}});
    let (_, _, body) = post(policy.clone(), SSAR, &[], selectors.to_string()).await;
    assert_eq!(
        json_of(&body)["status"]["evaluationError"],
        "spec.resourceAttributes.labelSelector partially ignored due to parse error"
    );
    let asked = policy.0.lock().unwrap().pop().unwrap();
    assert_eq!(asked.field_selector.len(), 1);
    assert_eq!(
        (
            asked.field_selector[0].key.as_str(),
            asked.field_selector[0].operator.as_str()
        ),
        ("spec.nodeName", "In")
    );
    assert_eq!(asked.label_selector.len(), 1);
    let broken = json!({"spec":{"resourceAttributes":{"verb":"patch","resource":"pods",
        "fieldSelector":{"rawSelector":"a"}}}});
    let (_, _, body) = post(policy.clone(), SSAR, &[], broken.to_string()).await;
    assert_eq!(
        json_of(&body)["status"]["evaluationError"],
        "policy unreachable; spec.resourceAttributes.fieldSelector ignored due to parse error"
    );
}

#[tokio::test]
async fn rules_and_subject_reviews() {
    let (status, _, body) = post(
        Policy::default(),
        SSRR,
        &[],
        r#"{"spec":{"namespace":"ns1"}}"#,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        std::str::from_utf8(&body).unwrap(),
        "{\"kind\":\"SelfSubjectRulesReview\",\"apiVersion\":\"authorization.k8s.io/v1\",\"metadata\":{\"creationTimestamp\":null},\"spec\":{},\"status\":{\"resourceRules\":[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods-in-ns1\"]}],\"nonResourceRules\":[],\"incomplete\":false}}\n"
    );
    let (status, _, body) = post(Policy::default(), SSRR, &[], r#"{"spec":{}}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(json_of(&body)["message"], "no namespace on request");
    // A union with a member that cannot list rules: incomplete, with its error.
    let union = Union::new()
        .push("privileged-groups", PrivilegedGroups::system_masters())
        .push("AlwaysAllow", AlwaysAllow)
        .push("Policy", Policy::default());
    let (_, _, body) = post(union, SSRR, &[], r#"{"spec":{"namespace":"default"}}"#).await;
    let status = &json_of(&body)["status"];
    assert_eq!(
        status["resourceRules"][0],
        json!({"verbs":["*"],"apiGroups":["*"],"resources":["*"]})
    );
    assert_eq!(
        status["nonResourceRules"],
        json!([{"verbs":["*"],"nonResourceURLs":["*"]}])
    );
    assert_eq!(status["incomplete"], false);

    let (status, _, body) = post(
        Policy::default(),
        SSR,
        &[],
        r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let review = json_of(&body);
    assert_eq!(review["kind"], "SelfSubjectReview");
    assert_eq!(
        review["status"],
        json!({"userInfo":{"username":"bob","uid":"b-1","groups":["team","system:authenticated"],"extra":{"scopes":["a","b"]}}})
    );
    let created = review["metadata"]["creationTimestamp"].as_str().unwrap();
    assert!(humantime::parse_rfc3339(created).is_ok(), "{created}");
}

#[tokio::test]
async fn protobuf_as_kubectl_1_32_sends_it() {
    let policy = Policy::default();
    let pb = "application/vnd.kubernetes.protobuf";
    let headers = [
        ("content-type", pb),
        (
            "accept",
            "application/vnd.kubernetes.protobuf,application/json",
        ),
    ];
    let body = proto::tests::client_access_review(Some(("default", "list", "nodes")), None);
    let (status, ct, answer) = post(policy.clone(), SSAR, &headers, body).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(ct, pb);
    let (v, k, raw) = proto::unwrap_envelope(&answer).unwrap();
    assert_eq!(
        (v.as_str(), k.as_str()),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview")
    );
    let echoed = proto::decode_access_review(&raw).unwrap();
    assert_eq!(
        echoed.resource_attributes.as_ref().unwrap().resource,
        "nodes"
    );
    // status: allowed (1) true, reason (2).
    assert!(raw.windows(2).any(|w| w == [0x08, 0x01]), "allowed is true");
    assert!(raw.windows(16).any(|w| w == b"nodes are public"));
    // The same review as JSON when JSON is preferred.
    let headers = [
        ("content-type", pb),
        (
            "accept",
            "application/json;q=0.9,application/vnd.kubernetes.protobuf;q=0.5",
        ),
    ];
    let body = proto::tests::client_access_review(Some(("default", "delete", "nodes")), None);
    let (_, ct, answer) = post(policy.clone(), SSAR, &headers, body).await;
    assert_eq!(ct, "application/json");
    assert_eq!(
        json_of(&answer)["status"],
        json!({"allowed": false, "denied": true, "reason": "never"})
    );
    // whoami in protobuf: the user's name, groups and extra in the answer.
    let ssr = b"k8s\0\x0a\x2d\x0a\x18authentication.k8s.io/v1\x12\x11SelfSubjectReview\x12\x02\x0a\x00\x1a\x00\x22\x00";
    let (status, ct, answer) = post(
        policy,
        SSR,
        &[("content-type", pb), ("accept", pb)],
        &ssr[..],
    )
    .await;
    assert_eq!((status, ct.as_str()), (StatusCode::CREATED, pb));
    for needle in [&b"bob"[..], b"b-1", b"team", b"scopes"] {
        assert!(answer.windows(needle.len()).any(|w| w == needle));
    }
}

#[tokio::test]
async fn other_requests_and_refusals() {
    let svc = SelfReviewLayer::new(Policy::default()).layer(inner());
    let res = svc
        .clone()
        .oneshot(Request::get("/api/v1/pods").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(
        res.into_body().collect().await.unwrap().to_bytes(),
        "inner /api/v1/pods"
    );
    // Names, namespaces and other versions are not the collections served here.
    for path in [
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews/x",
        "/apis/authorization.k8s.io/v1beta1/selfsubjectaccessreviews",
        "/apis/authorization.k8s.io/v1/namespaces/a/localsubjectaccessreviews",
    ] {
        let res = svc
            .clone()
            .oneshot(Request::post(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert!(
            String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec())
                .unwrap()
                .starts_with("inner"),
            "{path}"
        );
    }
    let mut get = Request::get(SSAR).body(Body::empty()).unwrap();
    get.extensions_mut().insert(bob());
    let res = svc.clone().oneshot(get).await.unwrap();
    assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
    let (status, _, body) = post(
        Policy::default(),
        SSAR,
        &[("content-type", "text/plain")],
        "x",
    )
    .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(json_of(&body)["reason"], "UnsupportedMediaType");
    let (status, _, _) = post(Policy::default(), SSR, &[("accept", "text/html")], "{}").await;
    assert_eq!(status, StatusCode::NOT_ACCEPTABLE);
    let (status, _, body) = post(Policy::default(), SSAR, &[], "{not json").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        json_of(&body)["message"]
            .as_str()
            .unwrap()
            .starts_with("json parse error")
    );
    let (status, _, body) = post(
        Policy::default(),
        SSAR,
        &[],
        r#"{"apiVersion":"v1","kind":"Pod"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        json_of(&body)["message"],
        "the API version in the data (v1) does not match the expected API version (authorization.k8s.io/v1)"
    );
    let (status, _, _) = post(
        Policy::default(),
        SSAR,
        &[("content-type", "application/vnd.kubernetes.protobuf")],
        "k8s\0\x0a",
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, ct, body) = post(
        Policy::default(),
        SSR,
        &[("accept", "application/yaml")],
        "{}",
    )
    .await;
    assert_eq!(
        (status, ct.as_str()),
        (StatusCode::CREATED, "application/yaml")
    );
    assert!(
        std::str::from_utf8(&body)
            .unwrap()
            .starts_with("apiVersion: authentication.k8s.io/v1\nkind: SelfSubjectReview\n")
    );
}
