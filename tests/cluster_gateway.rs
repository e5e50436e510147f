//! The gateway example in a cluster (`--kubeconfig`), against the scripted API server of
//! `kube-aggregator-kube`: its APIServices come from the cluster's API, its Services from
//! the cluster's Services and EndpointSlices, and `gateway check` reports each with the
//! reason upstream's availability controller would write: a missing Service, a headless
//! Service by ClusterIP, and the same Service by its endpoints
//! (`--enable-aggregator-routing`).

#[path = "../kube-aggregator-kube/tests/support/mod.rs"]
pub mod scripted;
#[path = "../examples/support/mod.rs"]
pub mod support;

use scripted::ScriptedApiServer;
use support::flags::GatewayOptions;

/// `gateway check --kubeconfig=<the scripted server> <extra>`'s report.
async fn check(server: &ScriptedApiServer, dir: &std::path::Path, extra: &[&str]) -> String {
    let serving = support::pki::Ca::new("gateway-ca").server("gateway", &["localhost"]);
    let (cert, key) = (dir.join("gateway.crt"), dir.join("gateway.key"));
    let kubeconfig = server.kubeconfig(dir);
    std::fs::write(&cert, &serving.cert_pem).expect("write");
    std::fs::write(&key, &serving.key_pem).expect("write");
    let mut args = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--tls-cert-file={}", cert.display()),
        format!("--tls-private-key-file={}", key.display()),
        "--discovery-check-timeout=2s".to_owned(),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    let opts = GatewayOptions::parse(args).expect("flags");
    let (report, ok) = support::gateway::check(&opts)
        .await
        .unwrap_or_else(|e| panic!("gateway check: {}", e.0));
    assert!(!ok, "{report}");
    report
}

fn line<'a>(report: &'a str, name: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.starts_with(&format!("FAIL  {name}: ")))
        .unwrap_or_else(|| panic!("no FAIL line for {name}:\n{report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_takes_apiservices_and_services_from_the_cluster() {
    let dir = std::env::temp_dir().join(format!("kube-aggregator-cluster-{}", std::process::id()));
    // Bound and never listening: connections to it are refused.
    let closed = tokio::net::TcpSocket::new_v4().expect("socket");
    closed
        .bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    let dead = closed.local_addr().expect("address");

    let server = ScriptedApiServer::start().await;
    server.apply("broken.example.io", "v1", ("broken", "gone"));
    server.apply("headless.example.io", "v1", ("headless", "api"));
    server.service("headless", "api", "None", &[(443, "https")]);
    server.endpoint_slice(
        "headless",
        "api-x1",
        "api",
        ("https", i32::from(dead.port())),
        &[("127.0.0.1", true)],
    );

    // By ClusterIP (kube-apiserver's default).
    let report = check(&server, &dir, &[]).await;
    assert_eq!(
        line(&report, "v1.broken.example.io"),
        r#"FAIL  v1.broken.example.io: ServiceNotFound: service/gone in "broken" is not present"#
    );
    let headless = line(&report, "v1.headless.example.io");
    assert!(
        headless.contains(r#"cannot route to service with ClusterIP "None""#),
        "{headless}"
    );
    assert!(report.ends_with("0 of 2 APIServices passed\n"), "{report}");

    // By endpoints: the headless Service's one endpoint is dialled, and refuses.
    let report = check(&server, &dir, &["--enable-aggregator-routing"]).await;
    let headless = line(&report, "v1.headless.example.io");
    assert!(
        headless.starts_with("FAIL  v1.headless.example.io: ConnectionRefused: "),
        "{headless}"
    );
    assert!(
        headless.contains(&format!("nothing listens at {dead}")),
        "{headless}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The stored `Available` condition of `name`: status, reason, message.
fn stored(server: &ScriptedApiServer, name: &str) -> Option<(String, String, String)> {
    let object = server.object("/apis/apiregistration.k8s.io/v1/apiservices", name)?;
    let conditions = object["status"]["conditions"].as_array()?.clone();
    let available = conditions.iter().find(|c| c["type"] == "Available")?;
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    Some((
        text(&available["status"]),
        text(&available["reason"]),
        text(&available["message"]),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_leads_and_writes_apiservice_status_back_to_the_cluster() {
    let dir = std::env::temp_dir().join(format!(
        "kube-aggregator-cluster-status-{}",
        std::process::id()
    ));
    let server = ScriptedApiServer::start().await;
    server.apply("broken.example.io", "v1", ("broken", "gone"));
    let serving = support::pki::Ca::new("gateway-ca").server("gateway", &["localhost"]);
    let (cert, key) = (dir.join("gateway.crt"), dir.join("gateway.key"));
    let kubeconfig = server.kubeconfig(&dir);
    std::fs::write(&cert, &serving.cert_pem).expect("write");
    std::fs::write(&key, &serving.key_pem).expect("write");
    let opts = GatewayOptions::parse([
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--tls-cert-file={}", cert.display()),
        format!("--tls-private-key-file={}", key.display()),
        "--leader-elect-lease-duration=2s".to_owned(),
        "--leader-elect-renew-deadline=1s".to_owned(),
        "--leader-elect-retry-period=200ms".to_owned(),
        "--leader-elect-resource-namespace=kube-system".to_owned(),
    ])
    .expect("flags");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let (_gateway, _serving) =
        support::gateway::start(opts, Some(listener), std::future::pending())
            .await
            .unwrap_or_else(|e| panic!("the gateway starts: {}", e.0));

    // The availability controller finds the Service missing; the leader writes it.
    let expected = Some((
        "False".to_owned(),
        "ServiceNotFound".to_owned(),
        r#"service/gone in "broken" is not present"#.to_owned(),
    ));
    let start = std::time::Instant::now();
    while stored(&server, "v1.broken.example.io") != expected {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "the stored condition is {:?}; requests: {:?}",
            stored(&server, "v1.broken.example.io"),
            server.requests()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let lease = server
        .object(
            "/apis/coordination.k8s.io/v1/leases",
            "kube-system/kube-aggregator",
        )
        .expect("the Lease");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 2);
    assert!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .is_some_and(|h| h.contains('_')),
        "{lease}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The flags `examples/deploy/deployment.yaml` gives the gateway are all known, valid
/// and mean what the manifests rely on.
#[test]
fn the_deployments_flags_parse() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/deploy/deployment.yaml"
    );
    let text = std::fs::read_to_string(path).expect("the manifest");
    let deployment: serde_json::Value = serde_yaml_ng::from_str(&text).expect("YAML");
    let args: Vec<String> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string").to_owned())
        .collect();
    let opts = GatewayOptions::parse(args).unwrap_or_else(|e| panic!("{path}: {e:?}"));
    assert!(opts.leader_elect);
    assert!(opts.enable_aggregator_routing);
    assert_eq!(opts.leader_elect_resource_namespace, "kube-aggregator");
    assert_eq!(opts.authorization_mode, ["Webhook"]);
    assert_eq!(opts.kubeconfig, None, "in a pod: the service account");
}
