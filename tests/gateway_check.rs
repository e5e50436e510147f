//! `gateway check`, the preflight, end to end: the demo's extension servers over
//! loopback mTLS, the gateway's own flags, and one APIService deliberately broken (its
//! Service points at a port nothing listens on). The report names each APIService, OK or
//! the cause with what to change, and says whether all passed (the exit status).

pub mod kubectl_cli;
#[path = "../examples/support/mod.rs"]
pub mod support;

use std::time::Duration;

use support::demo::{DemoOptions, ExtraApiService};
use support::flags::GatewayOptions;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_check_reports_every_apiservice_and_the_broken_one() {
    let dir = std::env::temp_dir().join(format!("kube-aggregator-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Bound and never listening: connections to it are refused, and no other listener
    // can take the port while the test runs.
    let closed = tokio::net::TcpSocket::new_v4().expect("socket");
    closed
        .bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    let dead = closed.local_addr().expect("address");
    let broken = ExtraApiService {
        file: "broken.yaml".into(),
        manifest: "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: v1.broken.example.io}\nspec:\n  service: {namespace: broken, name: gone, port: 443}\n  group: broken.example.io\n  version: v1\n  insecureSkipTLSVerify: true\n  groupPriorityMinimum: 1000\n  versionPriority: 15\n".into(),
        endpoint: format!("- namespace: broken\n  name: gone\n  port: 443\n  address: \"{dead}\"\n"),
    };
    let demo = support::demo::start_with_options(
        &dir,
        Duration::from_secs(30),
        DemoOptions {
            custom_metrics_over_mtls: true,
            extra: std::slice::from_ref(&broken),
            ..DemoOptions::default()
        },
    )
    .await
    .expect("the demo starts");

    let opts = GatewayOptions::parse(demo.gateway_args.clone()).expect("the demo's flags");
    let (report, ok) = support::gateway::check(&opts)
        .await
        .unwrap_or_else(|e| panic!("gateway check: {}", e.0));
    assert!(!ok, "the broken APIService passed:\n{report}");
    let lines: Vec<&str> = report.lines().collect();
    for name in [
        "v1beta1.metrics.k8s.io",
        "v1beta1.custom.metrics.k8s.io",
        "v1beta2.custom.metrics.k8s.io",
        "v1beta1.external.metrics.k8s.io",
        "v1beta1.servicecatalog.example.io",
    ] {
        assert!(
            lines.contains(&format!("OK    {name}").as_str()),
            "{name} not OK:\n{report}"
        );
    }
    let failed = lines
        .iter()
        .find(|l| l.starts_with("FAIL  v1.broken.example.io: "))
        .unwrap_or_else(|| panic!("no FAIL line:\n{report}"));
    assert!(
        failed.starts_with(
            "FAIL  v1.broken.example.io: ConnectionRefused: failing or missing response from "
        ),
        "{failed}"
    );
    assert!(
        failed.contains(&format!("nothing listens at {dead}; check that the extension server runs and that spec.service.port reaches its port")),
        "{failed}"
    );
    assert_eq!(lines.last(), Some(&"5 of 6 APIServices passed"), "{report}");
    // The demo's proxy client certificate is fine: no warning.
    assert!(!report.contains("warning:"), "{report}");

    // The running gateway found the same: kubectl shows the cause and the fix.
    let cache = dir.join("kube-cache");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let yaml = loop {
        let yaml = kubectl_cli::kubectl(
            &demo.kubeconfig,
            &cache,
            &["get", "apiservice", "v1.broken.example.io", "-o", "yaml"],
        )
        .await;
        if yaml.contains("status: \"False\"") || std::time::Instant::now() > deadline {
            break yaml;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for words in [
        "reason: FailedDiscoveryCheck",
        "status: \"False\"",
        "type: Available",
        &format!("nothing listens at {dead}"),
    ] {
        assert!(yaml.contains(words), "{words:?} not in\n{yaml}");
    }
    let described = kubectl_cli::kubectl(
        &demo.kubeconfig,
        &cache,
        &["describe", "apiservice", "v1.broken.example.io"],
    )
    .await;
    assert!(
        described.contains("FailedDiscoveryCheck") && described.contains("connection refused"),
        "{described}"
    );

    // Fixed (the APIService removed): all pass.
    std::fs::remove_file(dir.join("apiservices/broken.yaml")).expect("remove the broken one");
    let (report, ok) = support::gateway::check(&opts)
        .await
        .unwrap_or_else(|e| panic!("gateway check: {}", e.0));
    assert!(ok, "{report}");
    assert_eq!(
        report.lines().last(),
        Some("5 of 5 APIServices passed"),
        "{report}"
    );
    demo.shutdown().await;
    drop(closed);
    let _ = std::fs::remove_dir_all(&dir);
}
