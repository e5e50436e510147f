//! The audit log end to end: the demo's gateway started with `--audit-policy-file` and
//! `--audit-log-path`, real kubectl over TLS, and the log read back as `audit.k8s.io/v1`
//! events, field by field, for a proxied GET, a proxied watch, a forbidden request, an
//! impersonated one and a refused authentication.

pub mod kubectl_cli;
#[path = "../examples/support/mod.rs"]
pub mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use kubectl_cli::{scratch_dir, start_demo};
use serde_json::{Value, json};

/// `uri` with its query parameters sorted and kubectl's `timeout` left out: kubectl adds
/// `timeout=20s` and sorts the query of `get --raw`.
fn normalized(uri: &str) -> (String, Vec<String>) {
    let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
    let mut params: Vec<String> = query
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("timeout="))
        .map(str::to_owned)
        .collect();
    params.sort();
    (path.to_owned(), params)
}

/// The events of `log` for the request to `uri`, once `count` of them are there.
async fn events_for(log: &Path, uri: &str, count: usize) -> Vec<Value> {
    let wanted = normalized(uri);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let events: Vec<Value> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l)
                    .unwrap_or_else(|e| panic!("not a JSON event ({e}): {l}"))
            })
            .filter(|e| normalized(e["requestURI"].as_str().unwrap_or_default()) == wanted)
            .collect();
        if events.len() >= count {
            return events;
        }
        assert!(
            Instant::now() < deadline,
            "{count} events for {uri} not written within 10 s; the log has:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn stages(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["stage"].as_str().unwrap_or_default())
        .collect()
}

/// Checks what every event of a request carries, whatever its stage.
fn check_common(event: &Value, verb: &str, user: &str) {
    assert_eq!(event["kind"], "Event", "{event}");
    assert_eq!(event["apiVersion"], "audit.k8s.io/v1", "{event}");
    assert_eq!(event["level"], "Metadata", "{event}");
    assert_eq!(event["verb"], verb, "{event}");
    assert_eq!(event["user"]["username"], user, "{event}");
    assert_eq!(event["sourceIPs"], json!(["127.0.0.1"]), "{event}");
    let agent = event["userAgent"].as_str().unwrap_or_default();
    assert!(agent.starts_with("kubectl/v1."), "{event}");
    let id = event["auditID"].as_str().unwrap_or_default();
    assert!(uuid_like(id), "{event}");
    for key in ["requestReceivedTimestamp", "stageTimestamp"] {
        let t = event[key].as_str().unwrap_or_default();
        assert!(
            t.len() == 27 && t.ends_with('Z') && t.as_bytes()[19] == b'.',
            "{key} with microseconds: {event}"
        );
    }
}

fn uuid_like(id: &str) -> bool {
    id.len() == 36 && id.bytes().filter(|b| *b == b'-').count() == 4
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_records_who_did_what_as_kube_apiserver_does() {
    let dir = scratch_dir("audit");
    let (demo, kubectl) = start_demo(&dir, Default::default()).await;
    let log = dir.canonicalize().expect("dir").join("audit.log");

    // A proxied GET, by the admin (x509, system:masters): received, then complete.
    let nodes = "/apis/metrics.k8s.io/v1beta1/nodes";
    let (ok, _, stderr) = kubectl.run(&["get", "--raw", nodes, "-v=8"]).await;
    assert!(ok, "{stderr}");
    let events = events_for(&log, nodes, 2).await;
    assert_eq!(stages(&events), ["RequestReceived", "ResponseComplete"]);
    for e in &events {
        check_common(e, "list", "demo-admin");
        assert_eq!(
            e["user"]["groups"],
            json!(["system:masters", "system:authenticated"])
        );
        assert_eq!(
            e["objectRef"],
            json!({"resource": "nodes", "apiGroup": "metrics.k8s.io", "apiVersion": "v1beta1"})
        );
    }
    assert_eq!(events[0]["auditID"], events[1]["auditID"]);
    assert!(events[0].get("responseStatus").is_none(), "{}", events[0]);
    assert_eq!(
        events[1]["responseStatus"],
        json!({"metadata": {}, "code": 200})
    );
    assert_eq!(
        events[1]["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    // The ID in the log is the one the answer carried.
    let id = events[0]["auditID"].as_str().expect("id");
    assert!(
        stderr.contains(&format!("Audit-Id: {id}")),
        "kubectl saw another Audit-Id than {id}:\n{stderr}"
    );

    // A proxied watch: received, started when the stream opened, complete when the
    // extension server ended it (timeoutSeconds=1).
    let watch = "/apis/servicecatalog.example.io/v1beta1/namespaces/default/serviceinstances?watch=true&timeoutSeconds=1";
    kubectl.ok(&["get", "--raw", watch]).await;
    let events = events_for(&log, watch, 3).await;
    assert_eq!(
        stages(&events),
        ["RequestReceived", "ResponseStarted", "ResponseComplete"]
    );
    for e in &events {
        check_common(e, "watch", "demo-admin");
        assert_eq!(e["objectRef"]["namespace"], "default");
        assert_eq!(e["objectRef"]["resource"], "serviceinstances");
    }
    assert_eq!(events[1]["responseStatus"]["code"], 200);
    let started = events[1]["stageTimestamp"].as_str().expect("time");
    let complete = events[2]["stageTimestamp"].as_str().expect("time");
    assert!(complete > started, "the watch ran for a second");

    // A forbidden request: the decision and the authorizer's reason, and the Status.
    let pods = "/apis/metrics.k8s.io/v1beta1/namespaces/kube-system/pods";
    let (ok, _, stderr) = kubectl
        .run(&["--user=demo-viewer", "get", "--raw", pods])
        .await;
    assert!(!ok, "the viewer may not read pod metrics");
    let events = events_for(&log, pods, 2).await;
    let complete = &events[1];
    check_common(complete, "list", "demo-viewer");
    let status = &complete["responseStatus"];
    assert_eq!(status["code"], 403, "{complete}");
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(status["status"], "Failure");
    let message = status["message"].as_str().expect("message");
    assert!(
        message.starts_with(
            "pods.metrics.k8s.io is forbidden: User \"demo-viewer\" cannot list resource \"pods\" in API group \"metrics.k8s.io\" in the namespace \"kube-system\""
        ),
        "{message}"
    );
    assert!(stderr.contains(message), "kubectl saw: {stderr}");
    assert_eq!(
        status["details"],
        json!({"group": "metrics.k8s.io", "kind": "pods"})
    );
    assert_eq!(
        complete["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
    let reason = complete["annotations"]["authorization.k8s.io/reason"]
        .as_str()
        .expect("reason");
    if !reason.is_empty() {
        assert!(
            message.ends_with(&format!(": {reason}")),
            "{message} / {reason}"
        );
    }

    // Impersonation: the admin asks as bob of team, who may read node metrics.
    let (ok, _, stderr) = kubectl
        .run(&[
            "--as=bob",
            "--as-group=team",
            "get",
            "--raw",
            &format!("{nodes}?limit=5"),
        ])
        .await;
    assert!(ok, "{stderr}");
    let uri = format!("{nodes}?limit=5");
    let events = events_for(&log, &uri, 2).await;
    for e in &events {
        check_common(e, "list", "demo-admin");
    }
    assert!(events[0].get("impersonatedUser").is_none());
    assert_eq!(
        events[1]["impersonatedUser"],
        json!({"username": "bob", "groups": ["team", "system:authenticated"]})
    );
    assert_eq!(
        events[1]["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );

    // A refused authentication: one ResponseStarted event, no user, the 401 Status.
    let refused = "/apis/metrics.k8s.io/v1beta1/nodes?refused=1";
    let (ok, _, _) = kubectl
        .run(&[
            "--user=demo-token",
            "--token=not-a-token",
            "get",
            "--raw",
            refused,
        ])
        .await;
    assert!(!ok);
    let events = events_for(&log, refused, 1).await;
    assert_eq!(stages(&events), ["ResponseStarted"]);
    let e = &events[0];
    assert_eq!(e["user"], json!({}), "{e}");
    assert_eq!(e["verb"], "list");
    assert_eq!(
        e["responseStatus"],
        json!({"metadata": {}, "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
    );
    assert!(e.get("annotations").is_none(), "{e}");

    // An access review at Request level: what was asked, not what was answered.
    let ssar = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let answer = kubectl
        .ok(&["--user=demo-viewer", "auth", "can-i", "list", "nodes"])
        .await;
    assert_eq!(answer.trim(), "yes");
    let events = events_for(&log, ssar, 2).await;
    assert_eq!(events[1]["level"], "Request");
    assert!(events[0].get("requestObject").is_none(), "not yet decoded");
    let asked = &events[1]["requestObject"];
    assert_eq!(asked["kind"], "SelfSubjectAccessReview", "{}", events[1]);
    assert_eq!(
        asked["spec"]["resourceAttributes"],
        json!({"namespace": "default", "verb": "list", "resource": "nodes"})
    );
    assert_eq!(asked["status"], json!({"allowed": false}));
    assert!(events[1].get("responseObject").is_none(), "{}", events[1]);
    assert_eq!(
        events[1]["responseStatus"],
        json!({"metadata": {}, "code": 201})
    );

    // whoami at RequestResponse level: the answer too.
    let ssr = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
    kubectl.ok(&["--user=demo-viewer", "auth", "whoami"]).await;
    let events = events_for(&log, ssr, 2).await;
    assert_eq!(events[1]["level"], "RequestResponse");
    assert_eq!(events[1]["requestObject"]["kind"], "SelfSubjectReview");
    assert_eq!(
        events[1]["responseObject"]["status"]["userInfo"]["username"], "demo-viewer",
        "{}",
        events[1]
    );

    // The health checks the policy leaves out are not in the log.
    kubectl.ok(&["get", "--raw", "/readyz"]).await;
    kubectl.ok(&["get", "--raw", "/version"]).await;
    // (kubectl's dispatcher asks for /version too, before each command.)
    let deadline = Instant::now() + Duration::from_secs(10);
    let version = loop {
        let events = events_for(&log, "/version", 2).await;
        let ours: Vec<Value> = events
            .into_iter()
            .filter(|e| {
                e["userAgent"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("kubectl/v1.")
            })
            .collect();
        if ours.len() == 2 || Instant::now() > deadline {
            break ours;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(stages(&version), ["RequestReceived", "ResponseComplete"]);
    check_common(&version[1], "get", "demo-admin");
    assert!(
        version[1].get("objectRef").is_none(),
        "a non-resource request"
    );
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(!text.contains("\"/readyz\""), "level None is not written");

    demo.shutdown().await;
}

/// How the audit webhook of the test answers.
const ANSWER: u8 = 0;
const FAIL: u8 = 1;
const HANG: u8 = 2;

/// An audit webhook over TLS on a loopback port: the events of each `EventList` it
/// accepted, and how it answers (`ANSWER`, `FAIL` with a 500, `HANG`).
struct AuditWebhook {
    kubeconfig: std::path::PathBuf,
    lists: std::sync::Arc<std::sync::Mutex<Vec<Vec<Value>>>>,
    behaviour: std::sync::Arc<std::sync::atomic::AtomicU8>,
    calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl AuditWebhook {
    async fn start(dir: &Path) -> AuditWebhook {
        use http_body_util::BodyExt as _;
        use std::sync::atomic::Ordering;

        let ca = support::pki::Ca::new("audit-webhook-ca");
        let leaf = ca.server("audit-webhook", &["127.0.0.1"]);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let server = format!("https://{}/events", listener.local_addr().expect("addr"));
        let kubeconfig = dir.join("audit-webhook.kubeconfig");
        std::fs::create_dir_all(dir).expect("dir");
        std::fs::write(
            &kubeconfig,
            support::policy::webhook_kubeconfig(&server, ca.cert_pem.as_bytes()),
        )
        .expect("write the kubeconfig");
        let hook = AuditWebhook {
            kubeconfig,
            lists: Default::default(),
            behaviour: Default::default(),
            calls: Default::default(),
        };
        let (lists, behaviour, calls) = (
            hook.lists.clone(),
            hook.behaviour.clone(),
            hook.calls.clone(),
        );
        let service = tower::service_fn(move |req: http::Request<hyper::body::Incoming>| {
            let (lists, behaviour, calls) = (lists.clone(), behaviour.clone(), calls.clone());
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                let (parts, body) = req.into_parts();
                let bytes = body
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                let mut res = http::Response::new(kube_aggregator::Body::empty());
                match behaviour.load(Ordering::SeqCst) {
                    HANG => std::future::pending::<()>().await,
                    FAIL => *res.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR,
                    _ => {
                        assert_eq!(parts.method, http::Method::POST);
                        assert_eq!(parts.uri.path(), "/events");
                        let list: Value = serde_json::from_slice(&bytes).expect("JSON");
                        assert_eq!(list["kind"], "EventList", "{list}");
                        assert_eq!(list["apiVersion"], "audit.k8s.io/v1", "{list}");
                        let items = list["items"].as_array().cloned().unwrap_or_default();
                        lists.lock().unwrap().push(items);
                    }
                }
                Ok::<_, std::convert::Infallible>(res)
            }
        });
        let tls = kube_aggregator::server::server_config(
            leaf.cert_pem.as_bytes(),
            leaf.key_pem.as_bytes(),
            b"",
            true,
        )
        .expect("TLS");
        tokio::spawn(kube_aggregator::server::serve_tls(
            listener,
            tls,
            service,
            std::future::pending::<()>(),
        ));
        hook
    }

    fn set(&self, behaviour: u8) {
        self.behaviour
            .store(behaviour, std::sync::atomic::Ordering::SeqCst);
    }

    /// The events received so far for the request to `uri`.
    fn events_for(&self, uri: &str) -> Vec<Value> {
        let wanted = normalized(uri);
        self.lists
            .lock()
            .unwrap()
            .iter()
            .flatten()
            .filter(|e| normalized(e["requestURI"].as_str().unwrap_or_default()) == wanted)
            .cloned()
            .collect()
    }
}

/// The webhook backend end to end: kubectl through the demo's gateway started with
/// `--audit-webhook-config-file`. In batch mode the webhook gets `EventList`s with the
/// events the log has, and a hanging webhook delays no request; in blocking-strict mode
/// a webhook that fails refuses the request (500), and one that answers has every event
/// of a request before its answer ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_webhook_gets_event_lists_in_batches_or_holds_the_request() {
    let dir = scratch_dir("audit-webhook");
    let hook = AuditWebhook::start(&dir).await;
    let flag = |name: &str, value: &str| format!("--audit-webhook-{name}={value}");
    let config = flag("config-file", &hook.kubeconfig.display().to_string());
    let batch = [
        config.clone(),
        flag("batch-max-wait", "100ms"),
        flag("batch-throttle-enable", "false"),
    ];
    let options = support::demo::DemoOptions {
        extra_args: &batch,
        ..support::demo::DemoOptions::default()
    };
    let (demo, kubectl) = start_demo(&dir, options).await;
    let log = dir.canonicalize().expect("dir").join("audit.log");

    let nodes = "/apis/metrics.k8s.io/v1beta1/nodes";
    kubectl.ok(&["get", "--raw", nodes]).await;
    let logged = events_for(&log, nodes, 2).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while hook.events_for(nodes).len() < 2 {
        assert!(
            Instant::now() < deadline,
            "no events at the webhook in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sent = hook.events_for(nodes);
    assert_eq!(stages(&sent), ["RequestReceived", "ResponseComplete"]);
    assert_eq!(sent, logged, "the webhook and the log get the same events");

    // A webhook that hangs delays no request in batch mode.
    hook.set(HANG);
    let started = Instant::now();
    for _ in 0..3 {
        kubectl.ok(&["get", "--raw", nodes]).await;
    }
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "requests waited for a hanging webhook: {:?}",
        started.elapsed()
    );
    demo.shutdown().await;

    // blocking-strict: the request waits for the webhook, and fails if it fails.
    hook.set(FAIL);
    let strict = [
        config,
        flag("mode", "blocking-strict"),
        flag("initial-backoff", "10ms"),
    ];
    let options = support::demo::DemoOptions {
        extra_args: &strict,
        ..support::demo::DemoOptions::default()
    };
    let dir = scratch_dir("audit-webhook-strict");
    let (demo, kubectl) = start_demo(&dir, options).await;
    let calls = hook.calls.load(std::sync::atomic::Ordering::SeqCst);
    let (ok, _, stderr) = kubectl.run(&["get", "--raw", nodes]).await;
    assert!(!ok, "a request whose event the webhook refused went on");
    assert!(stderr.contains("failed to store audit event"), "{stderr}");
    assert!(
        hook.calls.load(std::sync::atomic::Ordering::SeqCst) >= calls + 5,
        "each event is tried five times"
    );

    hook.set(ANSWER);
    let before = hook.events_for(nodes).len();
    kubectl.ok(&["get", "--raw", nodes]).await;
    // No waiting here: the answer ended only once the webhook had both events.
    let sent = hook.events_for(nodes);
    assert_eq!(
        stages(&sent[before..]),
        ["RequestReceived", "ResponseComplete"]
    );
    demo.shutdown().await;
}
