//! End to end with the real `kubectl`: a TLS gateway embedding the aggregator, the sample
//! metrics server behind it over mTLS, and the commands the README shows.
//!
//! Fails (never skips) when `kubectl` is not on `PATH`.

pub mod kubectl_cli;
#[path = "../examples/support/mod.rs"]
pub mod support;

use kubectl_cli::{item_strings, kubectl, rows, run_kubectl, scratch_dir};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reaches_the_extension_server_through_the_aggregator() {
    let dir = scratch_dir("kubectl");
    let demo = support::demo::start(&dir, Duration::from_secs(30))
        .await
        .expect("demo starts and the APIService becomes Available");
    let kc = demo.kubeconfig.clone();
    let cache = dir.join("kube-cache");

    // The raw document came from the extension server, through the proxy.
    let raw = kubectl(
        &kc,
        &cache,
        &["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes"],
    )
    .await;
    let list: serde_json::Value = serde_json::from_str(&raw).expect("NodeMetricsList JSON");
    assert_eq!(list["kind"], "NodeMetricsList");
    assert_eq!(list["apiVersion"], "metrics.k8s.io/v1beta1");
    assert_eq!(item_strings(&list, "/metadata/name"), ["node-a", "node-b"]);
    assert_eq!(list["items"][0]["usage"]["cpu"], "612345678n");

    // kubectl top nodes: metrics through the aggregator, joined with the gateway's nodes.
    let top = rows(&kubectl(&kc, &cache, &["top", "nodes"]).await);
    assert_eq!(
        top[0],
        ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
    );
    assert_eq!(top[1], ["node-a", "613m", "15%", "5120Mi", "32%"]);
    assert_eq!(top[2], ["node-b", "1834m", "22%", "12288Mi", "38%"]);

    let pods = rows(&kubectl(&kc, &cache, &["top", "pods", "-A"]).await);
    assert_eq!(
        pods[0],
        ["NAMESPACE", "NAME", "CPU(cores)", "MEMORY(bytes)"]
    );
    assert!(
        pods.contains(&vec![
            "kube-system".into(),
            "coredns-6f6b679f8f-x2k9d".into(),
            "4m".into(),
            "16Mi".into()
        ]),
        "{pods:?}"
    );
    assert_eq!(pods.len(), 5, "{pods:?}");

    let versions = kubectl(&kc, &cache, &["api-versions"]).await;
    assert!(
        versions.lines().any(|l| l == "metrics.k8s.io/v1beta1"),
        "{versions}"
    );
    assert!(
        versions.lines().any(|l| l == "apiregistration.k8s.io/v1"),
        "{versions}"
    );

    let apiservices = rows(&kubectl(&kc, &cache, &["get", "apiservices"]).await);
    assert_eq!(apiservices[0], ["NAME", "SERVICE", "AVAILABLE", "AGE"]);
    let row = apiservices
        .iter()
        .find(|r| r[0] == "v1beta1.metrics.k8s.io")
        .expect("the APIService is listed");
    assert_eq!(&row[1..3], ["kube-system/metrics-server", "True"]);

    // The gateway's /metrics: upstream's names, types and labels, Prometheus text 0.0.4.
    let exposition = kubectl(&kc, &cache, &["get", "--raw", "/metrics"]).await;
    for line in [
        "# HELP aggregator_unavailable_apiservice [ALPHA] Gauge of APIServices which are marked as unavailable broken down by APIService name.",
        "# TYPE aggregator_unavailable_apiservice gauge",
        "aggregator_unavailable_apiservice{name=\"v1beta1.metrics.k8s.io\"} 0",
        "# HELP aggregator_unavailable_apiservice_total [ALPHA] Counter of APIServices which are marked as unavailable broken down by APIService name and reason.",
        "# TYPE aggregator_unavailable_apiservice_total counter",
    ] {
        assert!(
            exposition.lines().any(|l| l == line),
            "{line:?} in\n{exposition}"
        );
    }

    // The unprivileged user: the demo policy (a SubjectAccessReview webhook) lets it read
    // core nodes but not metrics, and kubectl prints the upstream Forbidden wording.
    let (ok, _, stderr) = run_kubectl(&kc, &cache, &["--user=demo-viewer", "top", "nodes"]).await;
    assert!(!ok);
    assert!(
        stderr.contains(r#"Error from server (Forbidden): nodes.metrics.k8s.io is forbidden: User "demo-viewer" cannot list resource "nodes" in API group "metrics.k8s.io" at the cluster scope"#),
        "{stderr}"
    );
    let nodes = rows(&kubectl(&kc, &cache, &["--user=demo-viewer", "get", "nodes"]).await);
    assert_eq!(nodes.len(), 3, "{nodes:?}");

    // A bearer-token user from the gateway's --token-auth-file; a wrong token is 401 even
    // though anonymous requests are enabled (fail on error).
    let pods = rows(
        &kubectl(
            &kc,
            &cache,
            &["--user=demo-token", "top", "pods", "-n", "kube-system"],
        )
        .await,
    );
    assert_eq!(pods.len(), 3, "{pods:?}");
    // kubectl words a 401 met during discovery differently from one on a plain request;
    // both are what it prints against kube-apiserver.
    let wrong = ["--user=demo-token", "--token=wrong", "top", "nodes"];
    let (ok, _, stderr) = run_kubectl(&kc, &cache, &wrong).await;
    assert!(!ok);
    assert!(
        stderr.contains("error: You must be logged in to the server"),
        "{stderr}"
    );
    let raw = [
        "--user=demo-token",
        "--token=wrong",
        "get",
        "--raw",
        "/apis/metrics.k8s.io/v1beta1/nodes",
    ];
    let (ok, _, stderr) = run_kubectl(&kc, &cache, &raw).await;
    assert!(!ok);
    assert!(
        stderr.contains("error: You must be logged in to the server (Unauthorized)"),
        "{stderr}"
    );

    // Impersonation: demo-admin (system:masters) may impersonate; the request then runs
    // as bob in group team, which the policy lets read metrics, and reaches the metrics
    // server as bob (X-Remote-User bob, X-Remote-Group team and system:authenticated).
    let before = support::metrics_server::callers().len();
    let top = rows(
        &kubectl(
            &kc,
            &cache,
            &["--as=bob", "--as-group=team", "top", "nodes"],
        )
        .await,
    );
    assert_eq!(top[1][0], "node-a", "{top:?}");
    let callers = support::metrics_server::callers();
    let bob = callers[before..]
        .iter()
        .find(|u| u.name == "bob")
        .expect("the metrics server saw bob");
    assert_eq!(bob.groups, ["team", "system:authenticated"]);
    assert!(
        callers[before..].iter().all(|u| u.name == "bob"),
        "nothing reached the backend as the administrator: {:?}",
        &callers[before..]
    );
    // Without the group, bob may not list metrics: the authorization is bob's.
    let as_bob = [
        "--as=bob",
        "get",
        "--raw",
        "/apis/metrics.k8s.io/v1beta1/nodes",
    ];
    let (ok, _, stderr) = run_kubectl(&kc, &cache, &as_bob).await;
    assert!(!ok);
    assert!(
        stderr.contains(r#"Error from server (Forbidden): nodes.metrics.k8s.io is forbidden: User "bob" cannot list resource "nodes" in API group "metrics.k8s.io" at the cluster scope"#),
        "{stderr}"
    );
    // demo-viewer may not impersonate: upstream's wording, and nothing reaches a backend.
    let before = support::metrics_server::callers().len();
    let viewer_as_bob = [
        "--user=demo-viewer",
        "--as=bob",
        "get",
        "--raw",
        "/apis/metrics.k8s.io/v1beta1/nodes",
    ];
    let (ok, _, stderr) = run_kubectl(&kc, &cache, &viewer_as_bob).await;
    assert!(!ok);
    assert!(
        stderr.contains(r#"Error from server (Forbidden): users "bob" is forbidden: User "demo-viewer" cannot impersonate resource "users" in API group "" at the cluster scope"#),
        "{stderr}"
    );
    assert_eq!(support::metrics_server::callers().len(), before);

    // kubectl auth can-i (SelfSubjectAccessReview, protobuf on the wire): yes and no, with
    // exit codes 0 and 1.
    let can = ["auth", "can-i", "list", "nodes.metrics.k8s.io"];
    assert_eq!(kubectl(&kc, &cache, &can).await, "yes\n");
    let viewer_can = [
        "--user=demo-viewer",
        "auth",
        "can-i",
        "list",
        "nodes.metrics.k8s.io",
    ];
    let (ok, stdout, _) = run_kubectl(&kc, &cache, &viewer_can).await;
    assert!(!ok, "no is exit code 1");
    assert_eq!(stdout, "no\n");
    let viewer_nodes = ["--user=demo-viewer", "auth", "can-i", "list", "nodes"];
    assert_eq!(kubectl(&kc, &cache, &viewer_nodes).await, "yes\n");
    let team = [
        "--as=bob",
        "--as-group=team",
        "auth",
        "can-i",
        "get",
        "pods.metrics.k8s.io",
        "-n",
        "kube-system",
    ];
    assert_eq!(kubectl(&kc, &cache, &team).await, "yes\n");
    // --list: a webhook cannot list rules, so the list is incomplete, as kube-apiserver says.
    let (ok, stdout, stderr) = run_kubectl(&kc, &cache, &["auth", "can-i", "--list"]).await;
    assert!(ok, "{stderr}");
    assert_eq!(
        rows(&stdout)[0],
        [
            "Resources",
            "Non-Resource",
            "URLs",
            "Resource",
            "Names",
            "Verbs"
        ]
    );
    assert!(
        stderr.contains("Warning: the list may be incomplete: webhook authorizer does not support user rule resolution"),
        "{stderr}"
    );

    // kubectl auth whoami (SelfSubjectReview): the user after impersonation.
    let whoami = rows(
        &kubectl(
            &kc,
            &cache,
            &["auth", "whoami", "--as=bob", "--as-group=team"],
        )
        .await,
    );
    assert_eq!(whoami[0], ["ATTRIBUTE", "VALUE"]);
    assert_eq!(whoami[1], ["Username", "bob"]);
    assert_eq!(whoami[2], ["Groups", "[team", "system:authenticated]"]);
    assert_eq!(whoami.len(), 3, "{whoami:?}");
    let whoami = rows(&kubectl(&kc, &cache, &["--user=demo-token", "auth", "whoami"]).await);
    assert_eq!(whoami[1], ["Username", "demo-token-user"]);
    assert_eq!(whoami[2], ["UID", "demo-token-uid"]);
    assert_eq!(
        whoami[3],
        ["Groups", "[system:masters", "system:authenticated]"]
    );

    demo.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The gateway's command line: `--help` prints the usage and succeeds; a bad flag or an
/// unreadable file is one line and exit code 2, as kube-apiserver.
#[test]
fn gateway_command_line() {
    use std::process::ExitCode;
    let run = |args: &[&str]| support::gateway::main_from_args(args.iter().map(|a| a.to_string()));
    assert_eq!(run(&["--help"]), ExitCode::SUCCESS);
    assert_eq!(run(&["--bogus"]), ExitCode::from(2));
    assert_eq!(
        run(&[
            "--tls-cert-file=/nonexistent.crt",
            "--tls-private-key-file=/nonexistent.key"
        ]),
        ExitCode::from(2)
    );
    assert!(support::flags::usage().starts_with("Usage:\n  gateway [flags]"));
}
