//! The real `kubectl` against the demo's tenants: `--server https://<gateway>/clusters/<a>`
//! and `/clusters/<b>` see different `api-resources` and APIServices, the SubjectAccessReview
//! decides by tenant, a tenant added to `--tenant-dir` while the gateway runs is served
//! and one removed is gone; and the custom-metrics adapter, in the gateway's process,
//! answering `kubectl get --raw` through the same stack, in and out of a tenant.
//!
//! Fails (never skips) when `kubectl` is not on `PATH`.

pub mod kubectl_cli;
#[path = "../examples/support/mod.rs"]
pub mod support;

use kubectl_cli::{Kubectl, scratch_dir, start_demo};
use std::time::Duration;

/// The `APIVERSION` column of `kubectl api-resources`, deduplicated and sorted.
fn api_versions(table: &str) -> Vec<String> {
    let mut versions: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|l| {
            l.split_whitespace()
                .find(|c| c.contains('/') || *c == "v1")
                .map(str::to_owned)
        })
        .collect();
    versions.sort();
    versions.dedup();
    versions
}

/// Runs `kubectl` until it succeeds (a change to `--tenant-dir` is read every 2 s),
/// for at most 20 s.
async fn eventually(kubectl: &Kubectl, args: &[&str]) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (ok, stdout, stderr) = kubectl.run(args).await;
        if ok {
            return stdout;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "kubectl {args:?} kept failing: {stderr}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_each_tenant_apart() {
    let dir = scratch_dir("tenants");
    let (demo, kc) = start_demo(&dir, Default::default()).await;
    let server = format!("https://{}", demo.gateway.local_addr);
    let team = |t: &str| format!("--server={server}/clusters/{t}");

    // Each tenant's api-resources: the host's core API, the APIService API, and only its
    // own aggregated groups.
    let a = api_versions(&kc.ok(&[&team("team-a"), "api-resources"]).await);
    assert_eq!(
        a,
        [
            "apiregistration.k8s.io/v1",
            "external.metrics.k8s.io/v1beta1",
            "metrics.k8s.io/v1beta1",
            "v1"
        ],
        "team-a"
    );
    let b = api_versions(&kc.ok(&[&team("team-b"), "api-resources"]).await);
    assert_eq!(
        b,
        [
            "apiregistration.k8s.io/v1",
            "servicecatalog.example.io/v1beta1",
            "v1"
        ],
        "team-b"
    );
    let root = api_versions(&kc.ok(&["api-resources"]).await);
    assert!(
        root.contains(&"metrics.k8s.io/v1beta1".to_owned())
            && root.contains(&"servicecatalog.example.io/v1beta1".to_owned()),
        "{root:?}"
    );

    // Each tenant's APIServices, checked by the one availability controller.
    let apiservices = kc.ok(&["--context=team-a", "get", "apiservices"]).await;
    let rows: Vec<Vec<&str>> = apiservices
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 4, "{apiservices}");
    assert!(rows.iter().all(|r| r[2] == "True"), "{apiservices}");
    let apiservices = kc
        .ok(&["--context=team-b", "get", "apiservices", "-o", "name"])
        .await;
    assert_eq!(
        apiservices.trim(),
        "apiservice.apiregistration.k8s.io/v1beta1.servicecatalog.example.io"
    );

    // A tenant's APIs work as the cluster's: top through team-a, the catalog through team-b.
    let top = kc.ok(&["--context=team-a", "top", "nodes"]).await;
    assert!(top.contains("node-a"), "{top}");
    kc.fails_with(
        &["--context=team-a", "get", "serviceinstances"],
        "the server doesn't have a resource type \"serviceinstances\"",
    )
    .await;

    // The review carries the tenant: demo-viewer may read everything in team-b only.
    let listed = kc
        .ok(&[
            "--context=team-b",
            "--user=demo-viewer",
            "get",
            "serviceinstances",
            "-A",
        ])
        .await;
    assert!(listed.is_empty(), "{listed}");
    kc.fails_with(
        &["--user=demo-viewer", "get", "serviceinstances", "-A"],
        "User \"demo-viewer\" cannot list resource \"serviceinstances\"",
    )
    .await;
    let can = kc
        .ok(&[
            "--context=team-b",
            "auth",
            "can-i",
            "list",
            "serviceinstances.servicecatalog.example.io",
            "--as=demo-viewer",
        ])
        .await;
    assert_eq!(can.trim(), "yes");

    // The in-process adapter through the same stack: outside any tenant, and in team-a
    // (--raw takes the whole path), where it sees the tenant in X-Kubernetes-Cluster.
    let metric =
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/metrics/queue_messages_ready";
    for (path, cluster) in [
        (metric.to_owned(), ""),
        (format!("/clusters/team-a{metric}"), "team-a"),
    ] {
        let raw = kc.ok(&["get", "--raw", &path]).await;
        let list: serde_json::Value = serde_json::from_str(&raw).unwrap();
        assert_eq!(list["kind"], "MetricValueList", "{raw}");
        let seen = demo.adapter.log().last().unwrap().clone();
        assert_eq!(seen.target, format!("{metric}?timeout=20s"));
        assert_eq!(
            (seen.user.as_str(), seen.cluster.as_str()),
            ("demo-admin", cluster)
        );
        assert_eq!(seen.remote_addr, None, "in process: no socket");
    }
    // team-b has no metrics: the host answers, the adapter is not asked.
    let before = demo.adapter.log().len();
    kc.fails_with(
        &["get", "--raw", &format!("/clusters/team-b{metric}")],
        "NotFound",
    )
    .await;
    assert_eq!(demo.adapter.log().len(), before);

    // A tenant that is not there; one added and removed while the gateway runs.
    kc.fails_with(
        &["get", "--raw", "/clusters/team-c/apis"],
        "Error from server (NotFound): clusters \"team-c\" not found",
    )
    .await;
    let tenants = kc.kubeconfig.with_file_name("tenants");
    let team_c = tenants.join("team-c");
    std::fs::create_dir_all(&team_c).unwrap();
    for entry in std::fs::read_dir(tenants.join("team-b")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), team_c.join(entry.file_name())).unwrap();
    }
    let c = eventually(&kc, &[&team("team-c"), "get", "serviceinstances", "-A"]).await;
    assert!(c.is_empty(), "{c}");
    std::fs::remove_dir_all(&team_c).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, _, err) = kc.run(&["get", "--raw", "/clusters/team-c/apis"]).await;
        if err.contains("clusters \"team-c\" not found") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "team-c is still served"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    demo.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
