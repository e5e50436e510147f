//! `ApiServiceWatch` against the scripted API server: APIServices created, changed and
//! deleted in the cluster reach the routing table within a second, and a watch that is
//! cut and finds its `resourceVersion` expired (410 Gone) lists anew without losing or
//! duplicating an APIService.

pub mod support;

use std::time::{Duration, Instant};

use kube_aggregator::registry::Registry;
use kube_aggregator::transport::InMemoryTransport;
use kube_aggregator_kube::ApiServiceWatch;
use support::ScriptedApiServer;

/// Within this, a change in the cluster is in the routing table.
const WITHIN: Duration = Duration::from_secs(1);
/// The adapter's Service, `monitoring/adapter`.
const ADAPTER: (&str, &str) = ("monitoring", "adapter");

/// The routing table's APIServices and where each routes, sorted by name.
fn routes(registry: &Registry) -> Vec<(String, String)> {
    let mut routes: Vec<(String, String)> = registry
        .snapshot()
        .routes()
        .map(|r| {
            let service = r
                .apiservice
                .spec
                .service
                .as_ref()
                .map_or(String::new(), |s| format!("{}/{}", s.namespace, s.name));
            (r.apiservice.metadata.name.clone(), service)
        })
        .collect();
    routes.sort();
    routes
}

/// Waits until the routing table is `expected`, at most [`WITHIN`]; how long it took.
async fn until(registry: &Registry, expected: &[(&str, &str)]) -> Duration {
    until_within(registry, WITHIN, expected).await
}

/// Waits until the routing table is `expected`, at most `within`.
async fn until_within(
    registry: &Registry,
    within: Duration,
    expected: &[(&str, &str)],
) -> Duration {
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(n, s)| ((*n).to_owned(), (*s).to_owned()))
        .collect();
    let table = "the routing table";
    support::until_equal(table, within, &expected, || routes(registry)).await
}

fn start_registry(server: &ScriptedApiServer) -> Registry {
    let registry = Registry::new(InMemoryTransport::new());
    tokio::spawn(registry.clone().run(ApiServiceWatch::new(server.client())));
    registry
}

#[tokio::test]
async fn created_changed_and_deleted_apiservices_reach_the_routing_table() {
    let server = ScriptedApiServer::start().await;
    server.apply(
        "metrics.k8s.io",
        "v1beta1",
        ("kube-system", "metrics-server"),
    );
    let registry = start_registry(&server);
    until(
        &registry,
        &[("v1beta1.metrics.k8s.io", "kube-system/metrics-server")],
    )
    .await;

    server.apply("custom.metrics.k8s.io", "v1beta2", ADAPTER);
    until(
        &registry,
        &[
            ("v1beta1.metrics.k8s.io", "kube-system/metrics-server"),
            ("v1beta2.custom.metrics.k8s.io", "monitoring/adapter"),
        ],
    )
    .await;

    // Changed: the metrics server moved.
    server.apply(
        "metrics.k8s.io",
        "v1beta1",
        ("monitoring", "metrics-server"),
    );
    until(
        &registry,
        &[
            ("v1beta1.metrics.k8s.io", "monitoring/metrics-server"),
            ("v1beta2.custom.metrics.k8s.io", "monitoring/adapter"),
        ],
    )
    .await;

    server.delete("v1beta2.custom.metrics.k8s.io");
    until(
        &registry,
        &[("v1beta1.metrics.k8s.io", "monitoring/metrics-server")],
    )
    .await;

    // A bookmark moves the watch's revision and changes nothing.
    server.bookmark();
    server.apply("external.metrics.k8s.io", "v1beta1", ADAPTER);
    until(
        &registry,
        &[
            ("v1beta1.external.metrics.k8s.io", "monitoring/adapter"),
            ("v1beta1.metrics.k8s.io", "monitoring/metrics-server"),
        ],
    )
    .await;
    // One list, one watch: every change came over the watch.
    let lists = server
        .requests()
        .iter()
        .filter(|r| !r.contains("watch=true"))
        .count();
    assert_eq!(lists, 1, "{:?}", server.requests());
}

#[tokio::test]
async fn a_cut_watch_whose_revision_expired_relists_without_losing_or_duplicating() {
    let server = ScriptedApiServer::start().await;
    server.apply(
        "metrics.k8s.io",
        "v1beta1",
        ("kube-system", "metrics-server"),
    );
    server.apply("custom.metrics.k8s.io", "v1beta1", ADAPTER);
    let registry = start_registry(&server);
    until(
        &registry,
        &[
            ("v1beta1.custom.metrics.k8s.io", "monitoring/adapter"),
            ("v1beta1.metrics.k8s.io", "kube-system/metrics-server"),
        ],
    )
    .await;
    let watching = Instant::now();
    while server.open_watches() == 0 {
        assert!(watching.elapsed() < WITHIN, "no watch opened");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // While the watch is down, one APIService is deleted, one added, one changed, and
    // the history is compacted past the watch's revision: the next watch gets 410.
    server.cut_watches();
    server.delete("v1beta1.custom.metrics.k8s.io");
    server.apply("external.metrics.k8s.io", "v1beta1", ADAPTER);
    server.apply(
        "metrics.k8s.io",
        "v1beta1",
        ("monitoring", "metrics-server"),
    );
    server.compact();

    // kube-runtime's backoff waits before the relist; the set comes whole.
    until_within(
        &registry,
        Duration::from_secs(10),
        &[
            ("v1beta1.external.metrics.k8s.io", "monitoring/adapter"),
            ("v1beta1.metrics.k8s.io", "monitoring/metrics-server"),
        ],
    )
    .await;
    let requests = server.requests();
    let lists = requests
        .iter()
        .filter(|r| !r.contains("watch=true"))
        .count();
    assert_eq!(
        lists, 2,
        "one list at the start, one after the 410: {requests:?}"
    );

    // And the new watch carries on from the relist.
    server.apply("custom.metrics.k8s.io", "v1beta2", ADAPTER);
    until(
        &registry,
        &[
            ("v1beta1.external.metrics.k8s.io", "monitoring/adapter"),
            ("v1beta1.metrics.k8s.io", "monitoring/metrics-server"),
            ("v1beta2.custom.metrics.k8s.io", "monitoring/adapter"),
        ],
    )
    .await;
}
