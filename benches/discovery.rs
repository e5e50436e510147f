//! Criterion benches of discovery: `GET /apis` as aggregated discovery v2 against the
//! legacy `APIGroupList` in the same group, both through the stack of
//! `Aggregator::builder` (200 APIServices, one of them black-holed),
//! and one APIService update rebuilding the document against a rebuild from scratch
//! (see `benches/README.md`).

use std::convert::Infallible;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use http::{Request, Response};
use kube_aggregator::apiservice::ApiService;
use kube_aggregator::authn::UserInfo;
use kube_aggregator::authz::AlwaysAllow;
use kube_aggregator::availability::StaticServiceResolver;
use kube_aggregator::body::BoxError;
use kube_aggregator::discovery::v2::{ApiVersionDiscovery, Freshness};
use kube_aggregator::discovery::{DocumentBuilder, V2_JSON, VersionEntry};
use kube_aggregator::source::ApiServiceEvent;
use kube_aggregator::transport::InMemoryTransport;
use kube_aggregator::{Aggregator, Body};
use tower::{Layer, ServiceExt};

const COUNT: usize = 200;

fn apiservice(i: usize, service: &str) -> ApiService {
    ApiService::remote(&format!("group{i}.example.com"), "v1", "bench", service)
        .priorities(100 + (i as i32 % 7), 15)
        .insecure_skip_tls_verify()
}

/// Each healthy backend answers its discovery with three resources; `hole` never answers.
fn transport() -> InMemoryTransport {
    let t = InMemoryTransport::new();
    t.insert(
        "hole.bench.svc",
        tower::service_fn(|_req: Request<Body>| {
            std::future::pending::<Result<Response<Body>, BoxError>>()
        }),
    );
    for i in 1..COUNT {
        let body = format!(
            r#"{{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{{}},"items":[{{"metadata":{{"name":"group{i}.example.com"}},"versions":[{{"version":"v1","resources":[{{"resource":"widgets","responseKind":{{"group":"group{i}.example.com","version":"v1","kind":"Widget"}},"scope":"Namespaced","singularResource":"widget","verbs":["get","list","watch"]}},{{"resource":"gadgets","responseKind":{{"group":"group{i}.example.com","version":"v1","kind":"Gadget"}},"scope":"Cluster","singularResource":"gadget","verbs":["get","list"]}},{{"resource":"things","responseKind":{{"group":"group{i}.example.com","version":"v1","kind":"Thing"}},"scope":"Namespaced","singularResource":"thing","verbs":["get"]}}],"freshness":"Current"}}]}}]}}"#
        );
        t.insert(
            format!("svc{i}.bench.svc"),
            tower::service_fn(move |_req: Request<Body>| {
                let body = body.clone();
                async move {
                    let mut res = Response::new(Body::full(body));
                    res.headers_mut()
                        .insert(http::header::CONTENT_TYPE, V2_JSON.parse().unwrap());
                    Ok::<_, BoxError>(res)
                }
            }),
        );
    }
    t
}

fn request(accept: &'static str) -> Request<Body> {
    let mut req = Request::get("/apis")
        .header(http::header::ACCEPT, accept)
        .body(Body::empty())
        .unwrap();
    req.extensions_mut().insert(UserInfo {
        name: "bench".into(),
        ..UserInfo::default()
    });
    req
}

fn get_apis(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut resolver = StaticServiceResolver::new();
    resolver
        .insert("bench", "hole", 443, "10.0.0.1:443")
        .unwrap();
    for i in 1..COUNT {
        resolver
            .insert("bench", &format!("svc{i}"), 443, "10.0.0.2:443")
            .unwrap();
    }
    // The host put the caller into the request (no authenticator); AlwaysAllow.
    let (aggregator, worker) = Aggregator::builder(transport())
        .resolver(resolver)
        .authorizer(AlwaysAllow)
        .build()
        .unwrap();
    let mut services = vec![apiservice(0, "hole")];
    services.extend((1..COUNT).map(|i| apiservice(i, &format!("svc{i}"))));
    aggregator
        .registry()
        .apply(ApiServiceEvent::Resynced(services))
        .unwrap();
    let runner = rt.spawn(worker);
    let manager = aggregator.discovery().clone();
    // Every healthy Service fetched; the black hole stays Stale (its fetch hangs).
    rt.block_on(async {
        loop {
            let doc = manager.document();
            let current = doc
                .groups()
                .iter()
                .filter(|g| g.versions()[0].discovery.freshness == Some(Freshness::Current))
                .count();
            if current == COUNT {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let inner = tower::service_fn(|_req: Request<Body>| async {
        let mut res = Response::new(Body::full("404 page not found\n"));
        *res.status_mut() = http::StatusCode::NOT_FOUND;
        Ok::<_, Infallible>(res)
    });
    let svc = aggregator.layer(inner);
    let call = |accept: &'static str| {
        let svc = svc.clone();
        async move {
            let res = svc.oneshot(request(accept)).await.unwrap();
            http_body_util::BodyExt::collect(res.into_body())
                .await
                .unwrap()
                .to_bytes()
        }
    };
    let v2_len = rt.block_on(call(V2_JSON)).len();
    let legacy_len = rt.block_on(call("application/json")).len();
    assert!(v2_len > legacy_len, "{v2_len} vs {legacy_len}");

    let mut group = c.benchmark_group("discovery_get");
    group.bench_function("baseline_legacy_apis", |b| {
        b.iter(|| black_box(rt.block_on(call("application/json"))))
    });
    group.bench_function("aggregated_v2_apis", |b| {
        b.iter(|| black_box(rt.block_on(call(V2_JSON))))
    });
    group.finish();

    // Tail latency of single requests, which criterion's means do not show.
    for (name, accept) in [("legacy", "application/json"), ("v2", V2_JSON)] {
        let mut samples: Vec<Duration> = (0..5000)
            .map(|_| {
                let t = Instant::now();
                black_box(rt.block_on(call(accept)));
                t.elapsed()
            })
            .collect();
        samples.sort();
        let pct = |p: usize| samples[samples.len() * p / 100];
        println!(
            "discovery_get/{name}: p50 {:?} p99 {:?} max {:?} ({COUNT} APIServices, one black-holed)",
            pct(50),
            pct(99),
            samples[samples.len() - 1]
        );
    }
    runner.abort();
}

fn entry(i: usize, freshness: Freshness) -> VersionEntry {
    VersionEntry {
        discovery: ApiVersionDiscovery {
            version: "v1".into(),
            resources: serde_json::from_str(&format!(
                r#"[{{"resource":"widgets","responseKind":{{"group":"group{i}.example.com","version":"v1","kind":"Widget"}},"scope":"Namespaced","singularResource":"widget","verbs":["get","list","watch"]}}]"#
            ))
            .unwrap(),
            freshness: Some(freshness),
        },
        group_priority_minimum: 100 + (i as i32 % 7),
        version_priority: 15,
    }
}

fn update(c: &mut Criterion) {
    let mut builder = DocumentBuilder::new();
    for i in 0..COUNT {
        builder.set(
            &format!("group{i}.example.com"),
            entry(i, Freshness::Current),
        );
    }
    black_box(builder.build());
    let mut group = c.benchmark_group("discovery_update");
    group.bench_function("baseline_rebuild_from_scratch", |b| {
        b.iter_batched(
            || {
                (0..COUNT)
                    .map(|i| {
                        (
                            format!("group{i}.example.com"),
                            entry(i, Freshness::Current),
                        )
                    })
                    .collect::<Vec<_>>()
            },
            |entries| {
                let mut fresh = DocumentBuilder::new();
                for (g, e) in entries {
                    fresh.set(&g, e);
                }
                black_box(fresh.build())
            },
            BatchSize::SmallInput,
        )
    });
    let mut flip = false;
    group.bench_function("one_apiservice_changed", |b| {
        b.iter_batched(
            || {
                flip = !flip;
                entry(
                    17,
                    if flip {
                        Freshness::Stale
                    } else {
                        Freshness::Current
                    },
                )
            },
            |e| {
                builder.set("group17.example.com", e);
                black_box(builder.build())
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, get_apis, update);
criterion_main!(benches);
