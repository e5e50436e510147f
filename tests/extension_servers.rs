//! The custom-metrics adapter and the service-catalog CRUD server behind the demo's TLS
//! gateway, end to end: the real `kubectl` (get --raw with label selectors, apply with
//! validation on, get, get -w, patch, replace, delete, explain), HPA-shaped requests sent
//! byte for byte (to the adapter in the gateway's process, and behind loopback mTLS), and
//! the catalog surviving a restart.
//!
//! Fails (never skips) when `kubectl` is not on `PATH`.

pub mod kubectl_cli;
#[path = "../examples/support/mod.rs"]
pub mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use kubectl_cli::{Kubectl, item_strings, scratch_dir, start_demo};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls_pki_types::pem::PemObject;
use serde_json::Value;
use support::crud::Seen;
use tokio::io::AsyncReadExt;

/// A client of the gateway presenting the demo admin's certificate, one connection per
/// request, sending the request target exactly as given.
struct RawClient {
    config: Arc<rustls::ClientConfig>,
    addr: std::net::SocketAddr,
}

impl RawClient {
    fn new(dir: &Path, addr: std::net::SocketAddr) -> RawClient {
        let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&read("ca.crt")) {
            roots.add(c.unwrap()).unwrap();
        }
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(&read("admin.crt"))
                .map(Result::unwrap)
                .collect();
        let key = PrivateKeyDer::from_pem_slice(&read("admin.key")).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)
            .unwrap();
        RawClient {
            config: Arc::new(config),
            addr,
        }
    }

    async fn get(&self, target: &str) -> (StatusCode, Bytes) {
        let tcp = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let tls = tokio_rustls::TlsConnector::from(self.config.clone())
            .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
            .await
            .unwrap();
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        let req = Request::builder()
            .method(Method::GET)
            .uri(target)
            .header("host", self.addr.to_string())
            .header("accept", "application/json")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let res = send.send_request(req).await.unwrap();
        let status = res.status();
        (status, res.into_body().collect().await.unwrap().to_bytes())
    }
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            i["describedObject"]["name"]
                .as_str()
                .or(i["metricName"].as_str())
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_and_external_metrics_through_the_gateway() {
    let dir = scratch_dir("custom-metrics");
    let (demo, kc) = start_demo(&dir, Default::default()).await;

    // kubectl get --raw with label selectors; kubectl re-encodes the query Go's way.
    let raw = kc.ok(&["get", "--raw", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_requests_per_second?labelSelector=app=frontend"]).await;
    let list: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(list["kind"], "MetricValueList", "{raw}");
    assert_eq!(list["apiVersion"], "custom.metrics.k8s.io/v1beta2");
    assert_eq!(
        names(&list),
        ["frontend-7d9c8b6f4-2xkqp", "frontend-7d9c8b6f4-9mz4t"]
    );
    assert_eq!(list["items"][0]["describedObject"]["apiVersion"], "/v1");
    assert_eq!(list["items"][0]["windowSeconds"], 60);
    let seen = demo.adapter.log().last().unwrap().clone();
    assert_eq!(
        seen.target,
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/http_requests_per_second?labelSelector=app%3Dfrontend&timeout=20s"
    );
    assert_eq!(seen.user, "demo-admin");
    // In the gateway's process: no socket between them, the same authentication.
    assert_eq!(seen.remote_addr, None);

    // metricLabelSelector picks series by the metric's labels and comes back in the answer.
    let raw = kc.ok(&["get", "--raw", "/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/pods/*/http_requests_per_second?labelSelector=app%3Dbackend&metricLabelSelector=method%3DPOST"]).await;
    let list: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(names(&list), ["backend-5b7f9c8d6-q8wlr"]);
    assert_eq!(list["items"][0]["metricName"], "http_requests_per_second");
    assert_eq!(
        list["items"][0]["selector"],
        serde_json::json!({"matchLabels": {"method": "POST"}})
    );

    // External metrics with a set-based selector.
    let raw = kc.ok(&["get", "--raw", "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready?labelSelector=queue+in+(orders,payments)"]).await;
    let list: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(list["kind"], "ExternalMetricValueList");
    let queues = item_strings(&list, "/metricLabels/queue");
    assert_eq!(queues, ["orders", "payments"]);

    // Unknown metrics: 404 Status with custom-metrics-apiserver's wording.
    kc.fails_with(&["get", "--raw", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/services/frontend/no_such_metric"], "the server could not find the metric no_such_metric for services").await;

    // The values move: a new sample is what the next read sees.
    assert_eq!(
        demo.adapter
            .series()
            .record("requests_per_second", "default", "frontend", 4_250),
        1
    );
    let raw = kc.ok(&["get", "--raw", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/services/frontend/requests_per_second"]).await;
    let list: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(list["items"][0]["value"], "4250m", "{raw}");

    hpa_requests_are_relayed_byte_for_byte(&dir, &demo).await;

    demo.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// An HPA's requests, as client-go's custom and external metrics clients build them
/// (k8s.io/metrics pkg/client): the adapter receives exactly the target sent and the
/// client gets exactly the bytes the adapter answered.
async fn hpa_requests_are_relayed_byte_for_byte(dir: &Path, demo: &support::demo::Demo) {
    let client = RawClient::new(dir, demo.gateway.local_addr);
    let table = [
        // Pods metric: every pod the HPA's scale target selects.
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/http_requests_per_second?labelSelector=app%3Dfrontend%2Cpod-template-hash%3D7d9c8b6f4",
        // Pods metric with a metric selector (keys sorted, as url.Values.Encode writes them).
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/http_requests_per_second?labelSelector=app%3Dfrontend&metricLabelSelector=method%3DGET",
        // Object metrics.
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/services/frontend/requests_per_second",
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/deployments.apps/frontend/http_requests_per_second",
        // An Object metric on a Namespace.
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/metrics/queue_messages_ready",
        // Root-scoped objects.
        "/apis/custom.metrics.k8s.io/v1beta2/nodes/%2A/node_load1?labelSelector=topology.kubernetes.io%2Fzone%3Dzone-2",
        "/apis/custom.metrics.k8s.io/v1beta1/nodes/node-a/node_load1",
        // External metrics, one with an escaped name.
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready?labelSelector=queue%3Dorders",
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/pubsub.googleapis.com%7Csubscription%7Cnum_undelivered_messages?labelSelector=resource.labels.subscription_id%3Dorders-sub",
        // A miss is relayed as it was answered.
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/frontend-7d9c8b6f4-2xkqp/http_requests_per_second?metricLabelSelector=method%3DDELETE",
    ];
    for target in table {
        let (status, body) = client.get(target).await;
        let seen = demo.adapter.log().last().unwrap().clone();
        assert_eq!(seen.target, target, "what the adapter received");
        assert_eq!(status, seen.status, "{target}");
        assert_eq!(body, seen.body, "{target}: relayed byte for byte");
        if status == StatusCode::OK {
            let list: Value = serde_json::from_slice(&body).unwrap();
            assert!(
                !list["items"].as_array().unwrap().is_empty(),
                "{target}: {list}"
            );
        }
    }
    let (status, body) = client.get(table[9]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        String::from_utf8_lossy(&body).contains("with selector method=DELETE"),
        "{body:?}"
    );
    let (_, body) = client.get(table[8]).await;
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        list["items"][0]["metricName"],
        "pubsub.googleapis.com|subscription|num_undelivered_messages"
    );
}

/// The same adapter behind loopback mTLS (`--custom-metrics-over-mtls`): the same answers,
/// byte for byte, over a socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adapter_over_loopback_mtls() {
    let dir = scratch_dir("custom-metrics-mtls");
    let options = support::demo::DemoOptions {
        custom_metrics_over_mtls: true,
        ..support::demo::DemoOptions::default()
    };
    let demo = support::demo::start_with_options(&dir, Duration::from_secs(30), options)
        .await
        .expect("the demo starts");
    let raw = Kubectl::beside(&demo.kubeconfig).ok(&["get", "--raw", "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready?labelSelector=queue%3Dorders"]).await;
    let list: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(list["kind"], "ExternalMetricValueList", "{raw}");
    let seen = demo.adapter.log().last().unwrap().clone();
    assert_eq!(seen.user, "demo-admin");
    assert!(
        seen.remote_addr.is_some_and(|a| a.ip().is_loopback()),
        "{seen:?}"
    );
    hpa_requests_are_relayed_byte_for_byte(&dir, &demo).await;
    demo.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reads a child's stdout until `want` appears (at most 20 s); returns what was read.
async fn read_until(out: &mut tokio::process::ChildStdout, want: &str) -> String {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !String::from_utf8_lossy(&seen).contains(want) {
        let mut buf = [0u8; 4096];
        match tokio::time::timeout_at(deadline, out.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&buf[..n]),
            _ => panic!(
                "{want:?} not in kubectl's output: {}",
                String::from_utf8_lossy(&seen)
            ),
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

const INSTANCE: &str = "apiVersion: servicecatalog.example.io/v1beta1
kind: ServiceInstance
metadata:
  name: db
  namespace: default
  labels:
    app: shop
spec:
  clusterServiceClassExternalName: postgres
  clusterServicePlanExternalName: small
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_crud_watch_and_explain_on_the_service_catalog() {
    let dir = scratch_dir("catalog");
    let (demo, kc) = start_demo(&dir, Default::default()).await;
    let manifest = dir.join("instance.yaml");
    std::fs::write(&manifest, INSTANCE).unwrap();
    let file = manifest.to_str().unwrap();
    let catalog = || demo.crud.log();
    // The last request the catalog saw that `pred` accepts.
    let last_seen = |pred: &dyn Fn(&Seen) -> bool| {
        let seen = catalog().into_iter().rev().find(|s| pred(s));
        seen.expect("a request of that kind")
    };

    // apply creates (GET 404, then POST with fieldValidation=Strict: the OpenAPI v3 PATCH
    // declares the parameter, so kubectl leaves validation to the server).
    assert_eq!(
        kc.ok(&["apply", "-f", file]).await.trim(),
        "serviceinstance.servicecatalog.example.io/db created"
    );
    let post = last_seen(&|s| s.method == Method::POST);
    assert!(post.target.contains("fieldValidation=Strict"), "{post:?}");

    // A field the schema lacks: 400 from the server, naming it.
    std::fs::write(
        dir.join("bad.yaml"),
        INSTANCE.replace("name: db", "name: bad").replace(
            "  clusterServicePlanExternalName: small",
            "  clusterServicePlanExternalName: small\n  bogus: 1",
        ),
    )
    .unwrap();
    kc.fails_with(&["apply", "-f", dir.join("bad.yaml").to_str().unwrap()], "ServiceInstance in version \"v1beta1\" cannot be handled as a ServiceInstance: strict decoding error: unknown field \"spec.bogus\"").await;

    // get: the Table with the kind's own columns.
    let out = kc.ok(&["get", "serviceinstances", "-o", "wide"]).await;
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "CLASS", "PLAN", "AGE", "EXTERNAL-ID"],
        "{out}"
    );
    assert!(out.lines().nth(1).unwrap().starts_with("db "), "{out}");
    let get =
        last_seen(&|s| s.method == Method::GET && s.target.contains("serviceinstances?limit=500"));
    assert!(
        get.accept.contains("as=Table;v=v1;g=meta.k8s.io"),
        "{get:?}"
    );

    // get -w: a change made after the watch started arrives.
    let mut watch = tokio::process::Command::new("kubectl")
        .arg(format!("--kubeconfig={}", kc.kubeconfig.display()))
        .arg(format!("--cache-dir={}", kc.cache.display()))
        .args(["get", "serviceinstances", "-w", "--no-headers"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl on PATH");
    let mut out = watch.stdout.take().unwrap();
    read_until(&mut out, "small").await;
    // Strategic merge patch is kubectl patch's default; this server accepts it.
    let patched = kc
        .ok(&[
            "patch",
            "serviceinstance",
            "db",
            "-p",
            r#"{"spec":{"clusterServicePlanExternalName":"large"}}"#,
        ])
        .await;
    assert_eq!(
        patched.trim(),
        "serviceinstance.servicecatalog.example.io/db patched"
    );
    let patch = last_seen(&|s| s.method == Method::PATCH);
    assert_eq!(patch.content_type, "application/strategic-merge-patch+json");
    let seen = read_until(&mut out, "large").await;
    assert!(seen.contains("postgres"), "{seen}");
    let w = catalog()
        .into_iter()
        .find(|s| s.target.contains("watch=true"))
        .unwrap();
    assert!(w.target.contains("resourceVersion="), "{w:?}");
    drop(watch);

    // Merge and JSON patch; generation counts spec changes.
    kc.ok(&[
        "patch",
        "serviceinstance",
        "db",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"tier":"data"}}}"#,
    ])
    .await;
    kc.ok(&[
        "patch",
        "serviceinstance",
        "db",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/spec/externalID","value":"ext-1"}]"#,
    ])
    .await;
    let object: Value =
        serde_json::from_str(&kc.ok(&["get", "inst", "db", "-o", "json"]).await).unwrap();
    assert_eq!(object["metadata"]["generation"], 3, "{object}");
    assert_eq!(object["metadata"]["labels"]["tier"], "data");
    assert_eq!(object["spec"]["externalID"], "ext-1");

    // A stale resourceVersion: 409 Conflict with upstream's message.
    let mut stale = object.clone();
    stale["metadata"]["resourceVersion"] = "1".into();
    stale["spec"]["clusterServicePlanExternalName"] = "medium".into();
    std::fs::write(dir.join("stale.json"), stale.to_string()).unwrap();
    kc.fails_with(&["replace", "-f", dir.join("stale.json").to_str().unwrap()], "Operation cannot be fulfilled on serviceinstances.servicecatalog.example.io \"db\": the object has been modified; please apply your changes to the latest version and try again").await;

    // apply again updates through a patch carrying the last-applied annotation.
    std::fs::write(&manifest, INSTANCE.replace("small", "medium")).unwrap();
    assert_eq!(
        kc.ok(&["apply", "-f", file]).await.trim(),
        "serviceinstance.servicecatalog.example.io/db configured"
    );
    let out = kc
        .ok(&[
            "get",
            "inst",
            "db",
            "-o",
            "jsonpath={.spec.clusterServicePlanExternalName} {.metadata.labels.tier}",
        ])
        .await;
    assert_eq!(out, "medium data");

    // explain, from the OpenAPI v3 document.
    let explained = kc.ok(&["explain", "serviceinstances.spec"]).await;
    assert!(
        explained.contains("KIND:       ServiceInstance"),
        "{explained}"
    );
    assert!(
        explained.contains("clusterServicePlanExternalName\t<string> -required-"),
        "{explained}"
    );
    let explained = kc
        .ok(&["explain", "clusterservicebrokers.spec.relistBehavior"])
        .await;
    assert!(explained.contains("ENUM:"), "{explained}");

    // The cluster-scoped kind, label selectors and delete.
    std::fs::write(dir.join("broker.yaml"), "apiVersion: servicecatalog.example.io/v1beta1\nkind: ClusterServiceBroker\nmetadata:\n  name: ups\n  labels: {env: dev}\nspec:\n  url: https://broker.example.com\n").unwrap();
    kc.ok(&["apply", "-f", dir.join("broker.yaml").to_str().unwrap()])
        .await;
    let out = kc.ok(&["get", "csb", "-l", "env=dev", "-o", "name"]).await;
    assert_eq!(
        out.trim(),
        "clusterservicebroker.servicecatalog.example.io/ups"
    );
    assert_eq!(
        kc.ok(&["get", "csb", "-l", "env=prod", "-o", "name"])
            .await
            .trim(),
        ""
    );
    assert_eq!(
        kc.ok(&["delete", "inst", "db"]).await.trim(),
        "serviceinstance.servicecatalog.example.io \"db\" deleted"
    );
    kc.fails_with(
        &["get", "inst", "db"],
        "serviceinstances.servicecatalog.example.io \"db\" not found",
    )
    .await;

    // The catalog persists across a restart; a watch from before it gets 410 Expired.
    let before = demo.crud.store().current();
    demo.shutdown().await;
    let (demo, kc) = start_demo(&dir, Default::default()).await;
    assert_eq!(
        kc.ok(&["get", "csb", "-o", "name"]).await.trim(),
        "clusterservicebroker.servicecatalog.example.io/ups"
    );
    assert_eq!(demo.crud.store().current(), before);
    let raw = kc.ok(&["get", "--raw", "/apis/servicecatalog.example.io/v1beta1/clusterservicebrokers?watch=true&resourceVersion=1"]).await;
    let event: Value = serde_json::from_str(raw.trim()).unwrap();
    assert_eq!(event["type"], "ERROR", "{raw}");
    assert_eq!(event["object"]["code"], 410);
    assert_eq!(event["object"]["reason"], "Expired");
    assert_eq!(
        event["object"]["message"],
        format!("too old resource version: 1 ({before})")
    );
    kc.ok(&["delete", "csb", "ups"]).await;

    demo.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
