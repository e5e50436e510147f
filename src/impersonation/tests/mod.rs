//! Upstream's `TestImpersonationFilter` table (k8s.io/apiserver
//! `pkg/endpoints/filters/impersonation/impersonation_test.go`), its authorizer ported rule
//! for rule, plus the exact answers and the order of checks.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use tower::{Layer, ServiceExt};

use super::*;
use crate::authz::{
    Attributes, Authorization, AuthorizationError, AuthorizeFuture, Authorizer, Decision,
};
use crate::body::Body;

/// The test authorizer of upstream's table.
#[derive(Clone, Default)]
struct Upstream {
    asked: Arc<Mutex<Vec<Attributes>>>,
}

impl Authorizer for Upstream {
    fn authorize(&self, a: &Attributes) -> AuthorizeFuture {
        self.asked.lock().unwrap().push(a.clone());
        let verdict = decide(a);
        Box::pin(std::future::ready(verdict))
    }
}

fn decide(a: &Attributes) -> Result<Authorization, AuthorizationError> {
    let allow = Ok(Authorization::new(Decision::Allow));
    let g = &a.user.groups;
    let g0 = |s: &str| g.first().is_some_and(|x| x == s);
    let g1 = |s: &str| g.get(1).is_some_and(|x| x == s);
    let imp = a.verb == "impersonate";
    let auth = a.api_group == "authentication.k8s.io";
    // Impersonating the extra key `subresource` of group authentication.k8s.io.
    let extra = |subresource: &str| {
        imp && a.resource == "userextras" && a.subresource == subresource && auth
    };
    match a.user.name.as_str() {
        "system:admin" => return allow,
        "tester" => return Err(AuthorizationError::new("works on my machine")),
        "deny-me" => {
            return Ok(Authorization {
                decision: Decision::NoOpinion,
                reason: "denied".into(),
            });
        }
        _ => {}
    }
    let rules = [
        g0("wheel") && imp && a.resource == "users",
        g0("sa-impersonater") && imp && a.resource == "serviceaccounts",
        g0("regular-impersonater") && imp && a.resource == "users",
        g1("group-impersonater") && imp && a.resource == "groups",
        g1("extra-setter-scopes") && imp && a.resource == "userextras" && a.subresource == "scopes",
        g1("escaped-scopes") || g1("almost-escaped-scopes"),
        g1("extra-setter-particular-scopes") && extra("scopes") && a.name == "scope-a",
        g1("extra-setter-project") && extra("project"),
        g0("everything-impersonater") && imp && a.resource == "users" && a.api_group.is_empty(),
        g0("everything-impersonater")
            && imp
            && a.resource == "uids"
            && a.name == "some-uid"
            && auth,
        g0("everything-impersonater") && imp && a.resource == "groups" && a.api_group.is_empty(),
        g0("everything-impersonater") && extra("scopes"),
    ];
    if rules.iter().any(|r| *r) {
        return allow;
    }
    Ok(Authorization {
        decision: Decision::NoOpinion,
        reason: "deny by default".into(),
    })
}

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo::new(name, groups.iter().copied())
}

mod cases;

use cases::{Case, cases};

/// What the handler saw: the user and whether any `Impersonate-*` header was left.
type Seen = Arc<Mutex<Option<(UserInfo, bool)>>>;

fn handler(seen: Seen) -> impl crate::body::Handles<Infallible> {
    tower::service_fn(move |req: Request<Body>| {
        let seen = seen.clone();
        async move {
            let leftover = req
                .headers()
                .keys()
                .any(|k| k.as_str().starts_with("impersonate-"));
            let user = req
                .extensions()
                .get::<UserInfo>()
                .cloned()
                .unwrap_or_default();
            *seen.lock().unwrap() = Some((user, leftover));
            Ok::<_, Infallible>(Response::new(Body::empty()))
        }
    })
}

fn request(case: &Case) -> Request<Body> {
    let mut req = Request::get("/api/v1/namespaces/default/pods");
    if !case.impersonate_user.is_empty() {
        req = req.header("Impersonate-User", case.impersonate_user);
    }
    for g in case.groups {
        req = req.header("Impersonate-Group", *g);
    }
    for (k, values) in case.extras {
        for v in *values {
            req = req.header(format!("Impersonate-Extra-{k}"), *v);
        }
    }
    if !case.uid.is_empty() {
        req = req.header("Impersonate-Uid", case.uid);
    }
    let mut req = req.body(Body::empty()).unwrap();
    req.extensions_mut().insert(case.user.clone());
    req
}

#[tokio::test]
async fn upstream_impersonation_table() {
    for case in cases() {
        let seen: Seen = Arc::default();
        let svc = ImpersonationLayer::new(Upstream::default()).layer(handler(seen.clone()));
        let res = svc.oneshot(request(&case)).await.unwrap();
        assert_eq!(res.status(), case.code, "{}", case.name);
        let got = seen.lock().unwrap().take();
        match (&case.expected, got) {
            (Some(want), Some((got, leftover))) => {
                assert_eq!(&got, want, "{}", case.name);
                assert!(
                    !leftover,
                    "{}: Impersonate-* headers reached the handler",
                    case.name
                );
            }
            (None, None) => {}
            (want, got) => panic!("{}: expected {want:?}, handler saw {got:?}", case.name),
        }
    }
}

async fn answer(user: UserInfo, headers: &[(&str, &str)]) -> (StatusCode, String, Vec<Attributes>) {
    let authorizer = Upstream::default();
    let seen: Seen = Arc::default();
    let svc = ImpersonationLayer::new(authorizer.clone()).layer(handler(seen));
    let mut req = Request::get("/apis/metrics.k8s.io/v1beta1/nodes");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut req = req.body(Body::empty()).unwrap();
    req.extensions_mut().insert(user);
    let res = svc.oneshot(req).await.unwrap();
    let status = res.status();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    let asked = authorizer.asked.lock().unwrap().clone();
    (status, String::from_utf8(body.to_vec()).unwrap(), asked)
}

#[tokio::test]
async fn denials_are_upstreams_forbidden_statuses() {
    let alice = || user("alice", &[]);
    for (headers, body) in [
        (
            &[("Impersonate-User", "bob")][..],
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"users \"bob\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope: deny by default","reason":"Forbidden","details":{"name":"bob","kind":"users"},"code":403}"#,
        ),
        (
            &[("Impersonate-User", "system:serviceaccount:foo:default")][..],
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"serviceaccounts \"default\" is forbidden: User \"alice\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"foo\": deny by default","reason":"Forbidden","details":{"name":"default","kind":"serviceaccounts"},"code":403}"#,
        ),
    ] {
        let (status, got, _) = answer(alice(), headers).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(got, format!("{body}\n"));
    }
    // The user is allowed; the group, then the extra, then the UID is the first denial.
    let wheel = || user("dev", &["wheel"]);
    let (_, got, _) = answer(
        wheel(),
        &[
            ("Impersonate-User", "x"),
            ("Impersonate-Group", "system:masters"),
        ],
    )
    .await;
    assert!(got.contains(r#""message":"groups \"system:masters\" is forbidden: User \"dev\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope: deny by default","reason":"Forbidden","details":{"name":"system:masters","kind":"groups"}"#), "{got}");
    let (_, got, _) = answer(
        wheel(),
        &[
            ("Impersonate-User", "x"),
            ("Impersonate-Extra-Scopes", "scope-a"),
        ],
    )
    .await;
    assert!(got.contains(r#""message":"userextras.authentication.k8s.io \"scope-a\" is forbidden: User \"dev\" cannot impersonate resource \"userextras/scopes\" in API group \"authentication.k8s.io\" at the cluster scope: deny by default","reason":"Forbidden","details":{"name":"scope-a","group":"authentication.k8s.io","kind":"userextras"}"#), "{got}");
    let (_, got, _) = answer(
        wheel(),
        &[("Impersonate-User", "x"), ("Impersonate-Uid", "some-uid")],
    )
    .await;
    assert!(got.contains(r#""message":"uids.authentication.k8s.io \"some-uid\" is forbidden: User \"dev\" cannot impersonate resource \"uids\" in API group \"authentication.k8s.io\" at the cluster scope: deny by default""#), "{got}");
    // An authorizer error is a denial whose message shows no reason.
    let (status, got, _) = answer(user("tester", &[]), &[("Impersonate-User", "bob")]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(got.contains(r#""message":"users \"bob\" is forbidden: User \"tester\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope","#), "{got}");
}

#[tokio::test]
async fn checks_run_in_upstreams_order_and_stop_at_the_first_denial() {
    let (status, _, asked) = answer(
        user("dev", &["everything-impersonater"]),
        &[
            ("Impersonate-Uid", "some-uid"),
            ("Impersonate-Extra-Scopes", "scope-a"),
            ("Impersonate-Group", "g1"),
            ("Impersonate-User", "tester"),
            ("Impersonate-Group", "g2"),
            ("Impersonate-Extra-Project", "p"),
        ],
    )
    .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "extra `project` is not allowed"
    );
    let expected = [
        ["users", "", "tester", ""],
        ["groups", "", "g1", ""],
        ["groups", "", "g2", ""],
        ["userextras", "scopes", "scope-a", "v1"],
        ["userextras", "project", "p", "v1"],
    ];
    let order: Vec<[&str; 4]> = asked
        .iter()
        .map(|a| [&a.resource, &a.subresource, &a.name, &a.api_version].map(String::as_str))
        .collect();
    assert_eq!(
        order, expected,
        "the UID is never asked once an extra was denied"
    );
    for a in &asked {
        assert_eq!(a.verb, "impersonate");
        assert!(a.is_resource_request);
        assert_eq!(a.user.name, "dev", "the requester is asked about");
    }
}

#[tokio::test]
async fn bad_requests_and_the_missing_user() {
    let (status, body, asked) =
        answer(user("x", &[]), &[("Impersonate-Group", "some-group")]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"requested [{Group  some-group    }] without impersonating a user\",\"reason\":\"BadRequest\",\"code\":400}\n"
    );
    assert!(asked.is_empty());
    let (_, body, _) = answer(
        user("x", &[]),
        &[
            ("Impersonate-Extra-Scopes", "a"),
            ("Impersonate-Uid", "u"),
            ("Impersonate-User", ""),
        ],
    )
    .await;
    assert!(
        body.contains(r#"requested [{UserExtra  a  authentication.k8s.io/v1  scopes} {UID  u  authentication.k8s.io/v1  }] without impersonating a user"#),
        "{body}"
    );
    // Only an empty Impersonate-User: not impersonation, nothing checked, headers untouched.
    let seen: Seen = Arc::default();
    let svc = ImpersonationLayer::new(Upstream::default()).layer(handler(seen.clone()));
    let mut req = Request::get("/")
        .header("Impersonate-User", "")
        .body(Body::empty())
        .unwrap();
    req.extensions_mut().insert(user("x", &["g"]));
    assert_eq!(svc.oneshot(req).await.unwrap().status(), StatusCode::OK);
    let (u, leftover) = seen.lock().unwrap().take().unwrap();
    assert_eq!(u, user("x", &["g"]));
    assert!(leftover);
    // No authenticated user: 500.
    let svc = ImpersonationLayer::new(Upstream::default()).layer(handler(Seen::default()));
    let req = Request::get("/x")
        .header("Impersonate-User", "bob")
        .body(Body::empty())
        .unwrap();
    let res = svc.oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let body = res.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(
        body,
        "Internal Server Error: \"/x\": no user found for request\n"
    );
    // A value that is not UTF-8.
    let mut req = Request::get("/x").body(Body::empty()).unwrap();
    req.headers_mut().insert(
        "impersonate-user",
        http::HeaderValue::from_bytes(b"b\xffb").unwrap(),
    );
    req.extensions_mut().insert(user("admin", &[]));
    let svc = ImpersonationLayer::new(Upstream::default()).layer(handler(Seen::default()));
    assert_eq!(
        svc.oneshot(req).await.unwrap().status(),
        StatusCode::BAD_REQUEST
    );
}
