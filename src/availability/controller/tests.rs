//! The controller's own tests: overlapping checks, and start-up beside a black hole.

mod checks {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::super::*;
    use crate::apiservice::ApiService;
    use crate::availability::{ResolveError, ResolveFuture};
    use crate::source::ApiServiceEvent;
    use crate::testing::NoTransport;

    /// Answers "no such Service" after a short delay, counting how many lookups overlap.
    #[derive(Default)]
    struct SlowResolver {
        now: AtomicUsize,
        max: AtomicUsize,
    }

    impl ServiceResolver for Arc<SlowResolver> {
        fn resolve(&self, service: &ServiceReference) -> ResolveFuture {
            let this = self.clone();
            let (namespace, name) = (service.namespace.clone(), service.name.clone());
            Box::pin(async move {
                let n = this.now.fetch_add(1, Ordering::SeqCst) + 1;
                this.max.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                this.now.fetch_sub(1, Ordering::SeqCst);
                Err(ResolveError::ServiceNotFound { namespace, name })
            })
        }
    }

    /// Twelve APIServices coming due at once are checked five at a time, as upstream's
    /// five workers, and every one of them gets its condition.
    #[tokio::test]
    async fn checks_run_five_at_a_time() {
        let registry = Registry::new(NoTransport);
        let services: Vec<ApiService> = (0..12)
            .map(|i| {
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": format!("v1.g{i}.example.com")},
                    "spec": {"service": {"namespace": "ns", "name": format!("svc{i}")}, "group": format!("g{i}.example.com"),
                             "version": "v1", "insecureSkipTLSVerify": true, "groupPriorityMinimum": 100, "versionPriority": 10}
                }))
                .unwrap()
            })
            .collect();
        registry.apply(ApiServiceEvent::Resynced(services)).unwrap();
        let resolver = Arc::new(SlowResolver::default());
        let controller = AvailabilityController::new(
            registry.clone(),
            resolver.clone(),
            Timer::tokio(),
            AvailabilityConfig {
                resync_period: Duration::from_secs(60),
                backoff_base: Duration::from_secs(60),
                ..AvailabilityConfig::default()
            },
            Arc::new(AvailabilityMetrics::default()),
        );
        let task = tokio::spawn(controller.run());
        let all_checked = async {
            loop {
                let table = registry.snapshot_owned();
                if table.routes().all(|r| {
                    r.apiservice
                        .available_condition()
                        .is_some_and(|c| c.reason == "ServiceNotFound")
                }) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), all_checked)
            .await
            .expect("every APIService is checked");
        task.abort();
        let max = resolver.max.load(Ordering::SeqCst);
        assert!((2..=WORKERS).contains(&max), "{max} lookups overlapped");
    }
}

mod startup {
    use super::super::*;
    use crate::apiservice::ApiService;
    use crate::availability::StaticServiceResolver;
    use crate::body::{Body, BoxError};
    use crate::source::ApiServiceEvent;
    use crate::transport::InMemoryTransport;

    fn remote(i: usize, service: &str) -> ApiService {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("v1.g{i}.example.com")},
            "spec": {"service": {"namespace": "ns", "name": service}, "group": format!("g{i}.example.com"),
                     "version": "v1", "insecureSkipTLSVerify": true, "groupPriorityMinimum": 100, "versionPriority": 10}
        }))
        .unwrap()
    }

    /// A black-holed APIService (its backend never answers) holds one worker for its 5 s
    /// probe timeout; the eleven others are Available well within 1 s of start.
    #[tokio::test]
    async fn a_black_hole_does_not_delay_the_others_first_check() {
        let transport = InMemoryTransport::new();
        transport.insert(
            "hole.ns.svc",
            tower::service_fn(|_req: http::Request<Body>| {
                std::future::pending::<Result<http::Response<Body>, BoxError>>()
            }),
        );
        transport.insert(
            "ok.ns.svc",
            tower::service_fn(|_req: http::Request<Body>| async {
                Ok::<_, BoxError>(http::Response::new(Body::empty()))
            }),
        );
        let registry = Registry::new(transport);
        let mut services = vec![remote(0, "hole")];
        services.extend((1..12).map(|i| remote(i, "ok")));
        registry.apply(ApiServiceEvent::Resynced(services)).unwrap();
        let mut resolver = StaticServiceResolver::new();
        resolver.insert("ns", "hole", 443, "10.0.0.1:443").unwrap();
        resolver.insert("ns", "ok", 443, "10.0.0.2:443").unwrap();
        let controller = AvailabilityController::new(
            registry.clone(),
            resolver,
            Timer::tokio(),
            AvailabilityConfig::default(),
            Arc::new(AvailabilityMetrics::default()),
        );
        let start = std::time::Instant::now();
        let task = tokio::spawn(controller.run());
        loop {
            let table = registry.snapshot_owned();
            let others_available = (1..12).all(|i| {
                table
                    .get(&format!("v1.g{i}.example.com"))
                    .is_some_and(|r| r.is_available())
            });
            if others_available {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(1),
                "the others waited on the black hole"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let hole = registry.snapshot_owned();
        assert!(
            hole.get("v1.g0.example.com")
                .is_some_and(|r| r.apiservice.available_condition().is_none()),
            "still probing"
        );
        task.abort();
    }
}
