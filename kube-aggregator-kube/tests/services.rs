//! `KubeServiceResolver` against the scripted API server: the ClusterIP and
//! EndpointSlice routings of upstream's resolvers, the availability controller's reasons
//! when a Service cannot be reached, and changes in the cluster followed without an API
//! call on the request path.

pub mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kube_aggregator::apiservice::ServiceReference;
use kube_aggregator::availability::{ResolveError, ServiceEndpoints, ServiceResolver};
use kube_aggregator_kube::KubeServiceResolver;
use support::ScriptedApiServer;

const NS: &str = "kube-system";

fn metrics_server(port: Option<i32>) -> ServiceReference {
    ServiceReference {
        namespace: NS.into(),
        name: "metrics-server".into(),
        port,
    }
}

/// Creates or replaces the EndpointSlice `name` of the metrics server: port `https`
/// 4443, `endpoints` as `(address, ready)`.
fn slice(server: &ScriptedApiServer, name: &str, endpoints: &[(&str, bool)]) {
    server.endpoint_slice(NS, name, "metrics-server", ("https", 4443), endpoints);
}

/// Resolves `service` until `accept` takes the result, at most a second.
async fn eventually<T: std::fmt::Debug>(
    resolver: &KubeServiceResolver,
    service: &ServiceReference,
    accept: impl Fn(&Result<http::uri::Authority, ResolveError>) -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        let result = resolver.resolve(service).await;
        if let Some(t) = accept(&result) {
            return t;
        }
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "after a second: {result:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn cluster_ip_routing_with_the_availability_controllers_reasons() {
    let server = ScriptedApiServer::start().await;
    server.service(NS, "metrics-server", "10.96.0.7", &[(443, "https")]);
    slice(&server, "metrics-server-abc", &[("10.0.1.5", true)]);
    let resolver = KubeServiceResolver::cluster_ip(server.client());
    // Asked before the first list is in: it waits for it rather than saying "not present".
    assert_eq!(
        resolver.resolve(&metrics_server(None)).await.unwrap(),
        "10.96.0.7:443"
    );
    let requests = server.requests().len();

    let err = resolver
        .resolve(&metrics_server(Some(8443)))
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "ServicePortError");
    assert_eq!(
        err.to_string(),
        r#"service/metrics-server in "kube-system" is not listening on port 8443"#
    );
    let absent = ServiceReference {
        name: "absent".into(),
        ..metrics_server(None)
    };
    let err = resolver.resolve(&absent).await.unwrap_err();
    assert_eq!(err.reason(), "ServiceNotFound");
    assert_eq!(
        err.to_string(),
        r#"service/absent in "kube-system" is not present"#
    );

    // The endpoint goes unready: MissingEndpoints, with the port's name.
    slice(&server, "metrics-server-abc", &[("10.0.1.5", false)]);
    let err = eventually(&resolver, &metrics_server(None), |r| r.clone().err()).await;
    assert_eq!(err.reason(), "MissingEndpoints");
    assert_eq!(
        err.to_string(),
        r#"endpointslices for service/metrics-server in "kube-system" have no addresses with port name "https""#
    );
    // Its slice is deleted: EndpointsNotFound.
    server.remove(
        "/apis/discovery.k8s.io/v1/endpointslices",
        "kube-system/metrics-server-abc",
    );
    let err = eventually(&resolver, &metrics_server(None), |r| match r {
        Err(e) if e.reason() == "EndpointsNotFound" => Some(e.clone()),
        _ => None,
    })
    .await;
    assert_eq!(
        err.to_string(),
        r#"cannot find endpointslices for service/metrics-server in "kube-system""#
    );
    // Back, ready: resolves again.
    slice(&server, "metrics-server-xyz", &[("10.0.1.6", true)]);
    eventually(&resolver, &metrics_server(None), |r| r.clone().ok()).await;

    // Every answer came from the watches: no request of the resolver's own since the start
    // (the server saw only watch traffic: none at all beyond the lists and watches).
    let asked: Vec<String> = server.requests()[requests..]
        .iter()
        .filter(|r| !r.contains("watch=true"))
        .cloned()
        .collect();
    assert!(asked.is_empty(), "{asked:?}");
}

#[tokio::test]
async fn a_headless_service_cannot_be_routed_to_by_cluster_ip() {
    let server = ScriptedApiServer::start().await;
    server.service(NS, "metrics-server", "None", &[(443, "https")]);
    slice(&server, "metrics-server-abc", &[("10.0.1.5", true)]);
    let cluster_ip = KubeServiceResolver::cluster_ip(server.client());
    let err = cluster_ip.resolve(&metrics_server(None)).await.unwrap_err();
    assert_eq!(err.reason(), "FailedDiscoveryCheck");
    assert_eq!(
        err.to_string(),
        r#"service/metrics-server in "kube-system" cannot be routed to: cannot route to service with ClusterIP "None""#
    );
    // By its endpoints it can.
    let endpoints = KubeServiceResolver::endpoint_slices(server.client());
    assert_eq!(
        endpoints.resolve(&metrics_server(None)).await.unwrap(),
        "10.0.1.5:4443"
    );
}

#[tokio::test]
async fn endpoint_routing_spreads_over_ready_endpoints_only_and_follows_changes() {
    let server = ScriptedApiServer::start().await;
    server.service(NS, "metrics-server", "10.96.0.7", &[(443, "https")]);
    slice(
        &server,
        "metrics-server-abc",
        &[("10.0.1.1", true), ("10.0.1.2", false), ("10.0.1.3", true)],
    );
    let resolver = KubeServiceResolver::endpoint_slices(server.client());
    resolver.ready().await;
    let mut seen = BTreeSet::new();
    for _ in 0..200 {
        seen.insert(
            resolver
                .resolve(&metrics_server(None))
                .await
                .unwrap()
                .to_string(),
        );
    }
    // The Service port's name picks the slice's port; the unready endpoint never comes.
    assert_eq!(
        seen,
        BTreeSet::from(["10.0.1.1:4443".to_owned(), "10.0.1.3:4443".to_owned()])
    );

    // One endpoint dies (the EndpointSlice controller marks it unready): no request goes
    // to it once the change is in.
    slice(
        &server,
        "metrics-server-abc",
        &[("10.0.1.1", true), ("10.0.1.2", false), ("10.0.1.3", false)],
    );
    eventually(&resolver, &metrics_server(None), |_| {
        let all: BTreeSet<String> = (0..50)
            .map(|_| {
                futures_util::FutureExt::now_or_never(resolver.resolve(&metrics_server(None)))
                    .expect("answered from memory")
                    .unwrap()
                    .to_string()
            })
            .collect();
        (all == BTreeSet::from(["10.0.1.1:4443".to_owned()])).then_some(())
    })
    .await;

    // No ready endpoint at all: the availability controller's reason.
    slice(&server, "metrics-server-abc", &[("10.0.1.1", false)]);
    let err = eventually(&resolver, &metrics_server(None), |r| r.clone().err()).await;
    assert_eq!(err.reason(), "MissingEndpoints");
}

#[tokio::test]
async fn resolve_endpoints_gives_every_ready_endpoint_of_every_slice() {
    let server = ScriptedApiServer::start().await;
    server.service(NS, "metrics-server", "10.96.0.7", &[(443, "https")]);
    slice(
        &server,
        "metrics-server-abc",
        &[("10.0.1.1", true), ("10.0.1.2", false)],
    );
    // Another slice of the same Service, with its own target port.
    server.endpoint_slice(
        NS,
        "metrics-server-def",
        "metrics-server",
        ("https", 4444),
        &[("10.0.1.3", true)],
    );
    let by_endpoints = KubeServiceResolver::endpoint_slices(server.client());
    let by_cluster_ip = KubeServiceResolver::cluster_ip(server.client());
    by_endpoints.ready().await;
    by_cluster_ip.ready().await;

    let all = by_endpoints
        .resolve_endpoints(&metrics_server(None))
        .await
        .unwrap();
    let addresses: Vec<String> = all.as_slice().iter().map(ToString::to_string).collect();
    assert_eq!(addresses, ["10.0.1.1:4443", "10.0.1.3:4444"]);

    // By ClusterIP, the one address.
    let one = by_cluster_ip
        .resolve_endpoints(&metrics_server(None))
        .await
        .unwrap();
    assert_eq!(one, ServiceEndpoints::One("10.96.0.7:443".parse().unwrap()));
}
