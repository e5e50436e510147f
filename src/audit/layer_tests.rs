//! The audit layers in kube-apiserver's order (failed-authentication audit, authentication,
//! audit, impersonation, authorization) around a handler: the events each kind of request
//! gets, field by field, as upstream's filter writes them.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::{Layer, ServiceExt};

use super::*;
use crate::authn::{AuthenticationLayer, BearerToken, ConnectionInfo, TokenFileAuthenticator};
use crate::authz::{
    Attributes, Authorization, AuthorizationError, AuthorizationLayer, AuthorizeFuture, Authorizer,
    Decision,
};
use crate::impersonation::ImpersonationLayer;

/// alice may do anything; bob is denied with a reason; carol's requests cannot be decided.
struct Rules;

impl Authorizer for Rules {
    fn authorize(&self, attrs: &Attributes) -> AuthorizeFuture {
        let decision = match attrs.user.name.as_str() {
            "alice" => Ok(Authorization {
                decision: Decision::Allow,
                reason: "alice may".into(),
            }),
            "carol" => Err(AuthorizationError::new("the webhook is down")),
            "bob" if attrs.verb == "get" && attrs.resource == "widgets" => {
                Ok(Authorization::new(Decision::Allow))
            }
            _ => Ok(Authorization {
                decision: Decision::Deny,
                reason: "no rule allows it".into(),
            }),
        };
        Box::pin(std::future::ready(decision))
    }
}

type Events = Arc<Mutex<Vec<Value>>>;

const EVERYTHING: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n";

/// The stack with `policy` and a sink that keeps every event as parsed JSON (or refuses
/// them all when `refuse`); the handler answers 200 `ok`, or streams what `watch` sends.
fn stack(
    policy: &str,
    refuse: bool,
    watch: Option<tokio::sync::mpsc::Receiver<Bytes>>,
) -> (impl crate::body::Handles<Infallible>, Events) {
    let events: Events = Arc::default();
    let kept = events.clone();
    let audit = AuditLayer::new(
        Policy::from_bytes(policy.as_bytes()).unwrap(),
        move |event: &Event| {
            kept.lock()
                .unwrap()
                .push(serde_json::from_slice(&event.to_json_line()).unwrap());
            !refuse
        },
    );
    let tokens = TokenFileAuthenticator::from_csv(
        "alice-token,alice,1,\"admins\"\nbob-token,bob,2\ncarol-token,carol,3\n",
    )
    .unwrap();
    let watch = Arc::new(Mutex::new(watch));
    let handler = tower::service_fn(move |_req: Request<Body>| {
        let watch = watch.lock().unwrap().take();
        async move {
            let body = match watch {
                None => Body::full("ok"),
                Some(rx) => Body::new(http_body_util::StreamBody::new(
                    futures_util::stream::unfold(rx, |mut rx| async move {
                        let chunk = rx.recv().await?;
                        Some((Ok::<_, Infallible>(http_body::Frame::data(chunk)), rx))
                    }),
                )),
            };
            Ok::<_, Infallible>(Response::new(body))
        }
    });
    let service = tower::ServiceBuilder::new()
        .layer(audit.failed_authentication())
        .layer(AuthenticationLayer::new(BearerToken::new(tokens)))
        .layer(audit)
        .layer(ImpersonationLayer::new(Rules))
        .layer(AuthorizationLayer::new(Rules))
        .service(handler);
    (service, events)
}

fn request(uri: &str, token: &str) -> Request<Body> {
    let mut req = Request::get(uri)
        .header("authorization", format!("Bearer {token}"))
        .header("user-agent", "kubectl/v1.32.0 (linux/amd64)")
        .header("x-forwarded-for", "192.0.2.10")
        .body(Body::empty())
        .unwrap();
    req.extensions_mut()
        .insert(crate::audit::AuditId("audit-1".parse().unwrap()));
    req.extensions_mut().insert(ConnectionInfo {
        remote_addr: Some("127.0.0.1:50000".parse().unwrap()),
        ..ConnectionInfo::default()
    });
    req
}

async fn body_of(res: Response<Body>) -> Bytes {
    http_body_util::BodyExt::collect(res.into_body())
        .await
        .unwrap()
        .to_bytes()
}

/// Sends a GET of `uri` with `token` through a fresh stack of `policy`, whose sink
/// refuses every event when `refuse`; the answer and the events.
async fn sent(policy: &str, refuse: bool, uri: &str, token: &str) -> (Response<Body>, Events) {
    let (svc, events) = stack(policy, refuse, None);
    (svc.oneshot(request(uri, token)).await.unwrap(), events)
}

/// Sends `req` through a fresh stack auditing everything, checks the answer's status and
/// reads its body; returns the events and the second one (`ResponseComplete`).
async fn completed(req: Request<Body>, status: StatusCode) -> (Events, Value) {
    let (svc, events) = stack(EVERYTHING, false, None);
    let res = svc.oneshot(req).await.unwrap();
    assert_eq!(res.status(), status);
    body_of(res).await;
    let complete = events.lock().unwrap()[1].clone();
    (events, complete)
}

fn stages(events: &Events) -> Vec<String> {
    events
        .lock()
        .unwrap()
        .iter()
        .map(|e| e["stage"].as_str().unwrap().to_owned())
        .collect()
}

/// Drops the timestamps (checked apart) so events compare whole.
fn without_timestamps(mut event: Value) -> Value {
    let map = event.as_object_mut().unwrap();
    for key in ["requestReceivedTimestamp", "stageTimestamp"] {
        let t = map.remove(key).unwrap();
        let t = t.as_str().unwrap();
        assert!(
            t.len() == 27 && t.ends_with('Z') && t.as_bytes()[19] == b'.',
            "{key} {t} has microseconds in UTC"
        );
    }
    event
}

#[tokio::test]
async fn a_proxied_get_is_received_then_complete_with_the_decision() {
    let (res, events) = sent(
        EVERYTHING,
        false,
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web-1?pretty=1",
        "alice-token",
    )
    .await;
    assert_eq!(res.status(), StatusCode::OK);
    // The last event waits for the body.
    assert_eq!(stages(&events), ["RequestReceived"]);
    assert_eq!(body_of(res).await, "ok");
    let events = events.lock().unwrap().clone();
    let [received, complete] = <[Value; 2]>::try_from(events).unwrap();
    assert_eq!(
        received["requestReceivedTimestamp"],
        received["stageTimestamp"]
    );
    assert_eq!(
        received["requestReceivedTimestamp"],
        complete["requestReceivedTimestamp"]
    );
    let common = json!({
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": "audit-1",
        "requestURI": "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web-1?pretty=1",
        "verb": "get",
        "user": {"username": "alice", "uid": "1", "groups": ["admins", "system:authenticated"]},
        "sourceIPs": ["192.0.2.10", "127.0.0.1"],
        "userAgent": "kubectl/v1.32.0 (linux/amd64)",
        "objectRef": {
            "resource": "pods",
            "namespace": "default",
            "name": "web-1",
            "apiGroup": "metrics.k8s.io",
            "apiVersion": "v1beta1"
        },
    });
    let mut want = common.clone();
    want["stage"] = "RequestReceived".into();
    assert_eq!(without_timestamps(received), want);
    let mut want = common;
    want["stage"] = "ResponseComplete".into();
    want["responseStatus"] = json!({"metadata": {}, "code": 200});
    want["annotations"] = json!({
        "authorization.k8s.io/decision": "allow",
        "authorization.k8s.io/reason": "alice may"
    });
    assert_eq!(without_timestamps(complete), want);
}

#[tokio::test]
async fn a_forbidden_request_records_the_status_and_the_reason() {
    // bob may get widgets: the empty reason of an allow is written, as upstream writes it.
    let req = request("/apis/example.com/v1/widgets/w", "bob-token");
    let (_, complete) = completed(req, StatusCode::OK).await;
    assert_eq!(complete["annotations"]["authorization.k8s.io/reason"], "");

    let mut req = request("/apis/example.com/v1/namespaces/ns/widgets/w", "bob-token");
    *req.method_mut() = http::Method::DELETE;
    let (events, complete) = completed(req, StatusCode::FORBIDDEN).await;
    assert_eq!(stages(&events), ["RequestReceived", "ResponseComplete"]);
    assert_eq!(complete["verb"], "delete");
    assert_eq!(
        complete["responseStatus"],
        json!({
            "metadata": {},
            "status": "Failure",
            "message": "widgets.example.com \"w\" is forbidden: User \"bob\" cannot delete resource \"widgets\" in API group \"example.com\" in the namespace \"ns\": no rule allows it",
            "reason": "Forbidden",
            "details": {"name": "w", "group": "example.com", "kind": "widgets"},
            "code": 403
        })
    );
    assert_eq!(
        complete["annotations"],
        json!({
            "authorization.k8s.io/decision": "forbid",
            "authorization.k8s.io/reason": "no rule allows it"
        })
    );

    // An authorizer that cannot decide: the reason only, and the plain 500's code.
    let req = request("/apis/example.com/v1/widgets", "carol-token");
    let (_, complete) = completed(req, StatusCode::INTERNAL_SERVER_ERROR).await;
    assert_eq!(
        complete["responseStatus"],
        json!({"metadata": {}, "code": 500})
    );
    assert_eq!(
        complete["annotations"],
        json!({"authorization.k8s.io/reason": "internal error"})
    );
}

#[tokio::test]
async fn a_refused_authentication_is_one_response_started_event_without_a_user() {
    let (res, events) = sent(
        EVERYTHING,
        false,
        "/apis/example.com/v1/widgets",
        "wrong-token",
    )
    .await;
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert!(
        res.extensions()
            .get::<crate::authn::Unauthenticated>()
            .is_none()
    );
    body_of(res).await;
    let events = events.lock().unwrap().clone();
    let [started] = <[Value; 1]>::try_from(events).unwrap();
    assert_eq!(
        without_timestamps(started),
        json!({
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": "audit-1",
            "stage": "ResponseStarted",
            "requestURI": "/apis/example.com/v1/widgets",
            "verb": "list",
            "user": {},
            "sourceIPs": ["192.0.2.10", "127.0.0.1"],
            "userAgent": "kubectl/v1.32.0 (linux/amd64)",
            "objectRef": {"resource": "widgets", "apiGroup": "example.com", "apiVersion": "v1"},
            "responseStatus": {
                "metadata": {},
                "status": "Failure",
                "message": "Unauthorized",
                "reason": "Unauthorized",
                "code": 401
            }
        })
    );

    // A policy that audits only known users writes nothing for it.
    let users = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  userGroups: [system:authenticated]\n";
    let (res, events) = sent(users, false, "/apis/example.com/v1/widgets", "wrong-token").await;
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert!(events.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_watch_is_received_started_and_complete_only_when_it_ends() {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let (svc, events) = stack(EVERYTHING, false, Some(rx));
    let res = svc
        .oneshot(request(
            "/apis/example.com/v1/widgets?watch=true",
            "alice-token",
        ))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(stages(&events), ["RequestReceived", "ResponseStarted"]);
    let started = events.lock().unwrap()[1].clone();
    assert_eq!(started["verb"], "watch");
    assert_eq!(
        started["responseStatus"],
        json!({"metadata": {}, "code": 200})
    );
    assert_eq!(
        started["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    let reading = tokio::spawn(body_of(res));
    tx.send(Bytes::from_static(b"{\"type\":\"ADDED\"}\n"))
        .await
        .unwrap();
    tokio::task::yield_now().await;
    assert_eq!(stages(&events).len(), 2, "the watch is still open");
    drop(tx);
    assert_eq!(reading.await.unwrap(), "{\"type\":\"ADDED\"}\n");
    assert_eq!(
        stages(&events),
        ["RequestReceived", "ResponseStarted", "ResponseComplete"]
    );
}

#[tokio::test]
async fn an_impersonated_request_records_both_users() {
    let mut req = request("/apis/example.com/v1/widgets", "alice-token");
    req.headers_mut()
        .insert("impersonate-user", "dave".parse().unwrap());
    req.headers_mut()
        .insert("impersonate-group", "devs".parse().unwrap());
    // dave may not list widgets: the event still says who asked and as whom.
    let (events, complete) = completed(req, StatusCode::FORBIDDEN).await;
    assert_eq!(complete["user"]["username"], "alice");
    assert_eq!(
        complete["impersonatedUser"],
        json!({"username": "dave", "groups": ["devs", "system:authenticated"]})
    );
    assert_eq!(
        complete["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
    // RequestReceived was written before impersonation ran.
    let received = events.lock().unwrap()[0].clone();
    assert!(received.get("impersonatedUser").is_none());
}

#[tokio::test]
async fn the_policy_chooses_the_level_and_the_stages() {
    let policy = concat!(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n",
        "- level: None\n  resources: [{group: example.com, resources: [secrets]}]\n",
        "- level: RequestResponse\n  verbs: [get]\n  omitStages: [ResponseComplete]\n",
        "- level: Metadata\n",
    );
    let (svc, events) = stack(policy, false, None);
    let res = svc
        .clone()
        .oneshot(request("/apis/example.com/v1/secrets", "alice-token"))
        .await
        .unwrap();
    body_of(res).await;
    assert!(events.lock().unwrap().is_empty(), "level None");
    let res = svc
        .clone()
        .oneshot(request("/apis/example.com/v1/widgets/w", "alice-token"))
        .await
        .unwrap();
    body_of(res).await;
    assert!(events.lock().unwrap().is_empty(), "both stages omitted");
    let res = svc
        .oneshot(request("/apis/example.com/v1/widgets", "alice-token"))
        .await
        .unwrap();
    body_of(res).await;
    assert_eq!(stages(&events), ["ResponseComplete"]);
    assert_eq!(events.lock().unwrap()[0]["level"], "Metadata");
}

#[tokio::test]
async fn a_request_given_up_is_complete_and_closed_early() {
    let (svc, events) = stack(EVERYTHING, false, None);
    // The client goes away once the request is received: the future is dropped.
    let mut svc = svc;
    let ready = svc.ready().await.unwrap();
    let future = ready.call(request("/apis/example.com/v1/widgets", "alice-token"));
    drop(future);
    assert_eq!(stages(&events), ["RequestReceived", "ResponseComplete"]);
    assert_eq!(
        events.lock().unwrap()[1]["responseStatus"],
        json!({"metadata": {}, "status": "Success", "message": "Connection closed early", "code": 200})
    );
}

#[tokio::test]
async fn a_sink_that_refuses_the_first_event_fails_the_request() {
    let (res, events) = sent(
        EVERYTHING,
        true,
        "/apis/example.com/v1/widgets",
        "alice-token",
    )
    .await;
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        body_of(res).await,
        "Internal Server Error: \"/apis/example.com/v1/widgets\": failed to store audit event\n"
    );
    assert_eq!(stages(&events), ["RequestReceived"]);
}

#[tokio::test]
async fn off_audits_nothing_and_passes_answers_through() {
    let off = AuditLayer::off();
    assert!(!off.is_on());
    let svc = tower::ServiceBuilder::new()
        .layer(off.failed_authentication())
        .layer(off)
        .service(tower::service_fn(|_req: Request<Body>| async {
            Ok::<_, Infallible>(Response::new(Body::full("ok")))
        }));
    let res = svc
        .oneshot(request("/apis/example.com/v1/widgets", "x"))
        .await
        .unwrap();
    assert_eq!(body_of(res).await, "ok");
}

#[tokio::test]
async fn bodies_are_recorded_at_the_levels_that_carry_them() {
    let object = json!({
        "kind": "Widget",
        "metadata": {"name": "w", "managedFields": [{"manager": "kubectl"}]}
    });
    let list = json!({"kind": "WidgetList", "items": [object.clone()]});
    for (level, omit, with_request, with_response) in [
        ("Metadata", false, false, false),
        ("Request", false, true, false),
        ("RequestResponse", false, true, true),
        ("RequestResponse", true, true, true),
    ] {
        let events: Events = Arc::default();
        let kept = events.clone();
        let policy = format!(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitManagedFields: {omit}\nrules:\n- level: {level}\n"
        );
        let audit = AuditLayer::new(
            Policy::from_bytes(policy.as_bytes()).unwrap(),
            move |event: &Event| {
                kept.lock()
                    .unwrap()
                    .push(serde_json::from_slice(&event.to_json_line()).unwrap());
                true
            },
        );
        let (sent, answered) = (object.clone(), list.clone());
        let handler = tower::service_fn(move |req: Request<Body>| {
            let (sent, answered) = (sent.clone(), answered.clone());
            async move {
                let context = req.extensions().get::<AuditContext>().unwrap();
                assert_eq!(context.records_request_object(), with_request);
                assert_eq!(context.records_response_object(), with_response);
                context.log_request_object(sent);
                context.log_response_object(answered);
                Ok::<_, Infallible>(Response::new(Body::full("{}")))
            }
        });
        let mut req = request("/apis/example.com/v1/widgets", "x");
        req.extensions_mut()
            .insert(crate::authn::UserInfo::new("alice", ["admins"]));
        let res = audit.layer(handler).oneshot(req).await.unwrap();
        body_of(res).await;
        let complete = events.lock().unwrap()[1].clone();
        let managed = |v: &Value| v.to_string().contains("managedFields");
        match complete.get("requestObject") {
            Some(o) => {
                assert!(with_request, "{level}: {complete}");
                assert_eq!(o["metadata"]["name"], "w");
                assert_eq!(managed(o), !omit, "{level} omit {omit}: {o}");
            }
            None => assert!(!with_request, "{level}: {complete}"),
        }
        match complete.get("responseObject") {
            Some(o) => {
                assert!(with_response, "{level}: {complete}");
                assert_eq!(o["items"][0]["metadata"]["name"], "w");
                assert_eq!(managed(o), !omit, "{level} omit {omit}: {o}");
            }
            None => assert!(!with_response, "{level}: {complete}"),
        }
        // The request was received before any body was decoded.
        assert!(events.lock().unwrap()[0].get("requestObject").is_none());
    }
}

#[tokio::test]
async fn a_blocking_sink_holds_the_request_until_each_event_is_kept() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::sync::Semaphore;

    let gate = Arc::new(Semaphore::new(0));
    let kept: Events = Arc::default();
    let (sink_gate, sink_kept) = (gate.clone(), kept.clone());
    let audit = AuditLayer::new(
        Policy::from_bytes(EVERYTHING.as_bytes()).unwrap(),
        move |event: &Event| {
            let (gate, kept) = (sink_gate.clone(), sink_kept.clone());
            let value: Value = serde_json::from_slice(&event.to_json_line()).unwrap();
            Processed::Waiting(Box::pin(async move {
                gate.acquire().await.unwrap().forget();
                kept.lock().unwrap().push(value);
                true
            }))
        },
    );
    let called = Arc::new(AtomicBool::new(false));
    // The handler's future is what must wait; calling the service does nothing yet.
    let handler = || {
        let seen = called.clone();
        tower::service_fn(move |_req: Request<Body>| {
            let seen = seen.clone();
            async move {
                seen.store(true, Ordering::SeqCst);
                Ok::<_, Infallible>(Response::new(Body::full("ok")))
            }
        })
    };
    let mut req = request("/apis/example.com/v1/widgets", "x");
    req.extensions_mut()
        .insert(crate::authn::UserInfo::new("alice", ["admins"]));
    let call = tokio::spawn(audit.layer(handler()).oneshot(req));
    let settle = || tokio::time::sleep(std::time::Duration::from_millis(20));
    settle().await;
    assert!(
        !called.load(Ordering::SeqCst),
        "RequestReceived not kept yet"
    );
    gate.add_permits(1);
    let res = call.await.unwrap().unwrap();
    assert!(called.load(Ordering::SeqCst));
    assert_eq!(stages(&kept), ["RequestReceived"]);
    // The body ends only once ResponseComplete is kept, and does not say it has ended
    // before (a server would finish the response without polling again).
    let mut body = res.into_body();
    let data = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(data, "ok");
    assert!(
        !http_body::Body::is_end_stream(&body),
        "the end is not announced before ResponseComplete is kept"
    );
    let end = tokio::spawn(async move { body.frame().await.is_none() });
    settle().await;
    assert!(!end.is_finished(), "the body waits for the sink");
    gate.add_permits(1);
    assert!(end.await.unwrap());
    assert_eq!(stages(&kept), ["RequestReceived", "ResponseComplete"]);

    // A blocking sink that loses the first event refuses the request, unserved.
    let refusing = AuditLayer::new(
        Policy::from_bytes(EVERYTHING.as_bytes()).unwrap(),
        |_: &Event| Processed::Waiting(Box::pin(async { false })),
    );
    called.store(false, Ordering::SeqCst);
    let mut req = request("/apis/example.com/v1/widgets", "x");
    req.extensions_mut()
        .insert(crate::authn::UserInfo::new("alice", ["admins"]));
    let res = refusing.layer(handler()).oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert!(!called.load(Ordering::SeqCst));
}

#[tokio::test]
async fn levels_events_and_refused_requests_are_counted() {
    const SOME: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: [\"/healthz\"]\n- level: Request\n";
    let metrics = Arc::new(AuditMetrics::default());
    let refuse = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let refusing = refuse.clone();
    let audit = AuditLayer::new(
        Policy::from_bytes(SOME.as_bytes()).unwrap(),
        move |_: &Event| !refusing.load(std::sync::atomic::Ordering::SeqCst),
    )
    .with_metrics(metrics.clone());
    assert!(Arc::ptr_eq(audit.metrics().unwrap(), &metrics));
    let handler = tower::service_fn(|_req: Request<Body>| async {
        Ok::<_, Infallible>(Response::new(Body::full("ok")))
    });
    let service = audit.layer(handler);
    let alice = |uri: &str| {
        let mut req = request(uri, "x");
        req.extensions_mut()
            .insert(crate::authn::UserInfo::new("alice", ["admins"]));
        req
    };
    for uri in ["/healthz", "/apis/example.com/v1/widgets", "/apis"] {
        let res = service.clone().oneshot(alice(uri)).await.unwrap();
        assert_eq!(body_of(res).await, "ok");
    }
    refuse.store(true, std::sync::atomic::Ordering::SeqCst);
    let res = service.clone().oneshot(alice("/apis")).await.unwrap();
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);

    let text = metrics.render();
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("{name} in\n{text}"))
            .to_owned()
    };
    // Two events for each of the two audited requests, one for the refused one.
    assert_eq!(value("apiserver_audit_event_total"), "5");
    assert_eq!(value("apiserver_audit_level_total{level=\"None\"}"), "1");
    assert_eq!(value("apiserver_audit_level_total{level=\"Request\"}"), "3");
    assert_eq!(value("apiserver_audit_requests_rejected_total"), "1");
    assert!(
        text.contains("# HELP apiserver_audit_event Counter of audit events generated and sent to the audit backend.\n"),
        "{text}"
    );
    // Nothing was lost by a sink: no plugin has an error count.
    assert!(!text.contains("apiserver_audit_error_total"), "{text}");
}
