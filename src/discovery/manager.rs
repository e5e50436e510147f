//! The discovery manager: fetches each remote Service's discovery off the request path
//! and publishes the aggregated document (kube-aggregator
//! [`pkg/apiserver/handler_discovery.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/handler_discovery.go)).
//!
//! The state is per Service (several APIServices on one Service share one fetch) and per
//! APIService (its entry, kept `Stale` with its last good resources while fetches fail).
//! One mutex guards it; fetches run outside it, so `sync` from the registry never waits
//! on a backend.

mod sync;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use arc_swap::ArcSwap;

use super::config::DiscoveryConfig;
use super::document::{AggregatedDocument, DocumentBuilder, VersionEntry};
use super::fetch::{Fetched, Job, fetch};
use super::target::{GroupVersion, ServiceKey, Target};
use super::v2::{ApiResourceDiscovery, ApiVersionDiscovery, Freshness};
use crate::refresh::{self, Notify};
use crate::rt::Timer;

/// A fetch result as seen by one group-version: `None` when the fetch did not cover it,
/// `Err` when it failed for it.
type PerGroupVersion = dyn Fn(&GroupVersion) -> Option<Result<ApiVersionDiscovery, ()>>;

/// One APIService as the manager follows it.
struct TargetState {
    target: Target,
    /// Resources of the last successful fetch, kept (marked Stale) while fetches fail.
    last_good: Option<Vec<ApiResourceDiscovery>>,
}

/// One Service's fetch schedule and cache, shared by the APIServices on it.
struct ServiceState {
    /// When the next fetch may start.
    due: Instant,
    /// Failures in a row: the backoff's exponent; 0 after a success.
    failures: u32,
    /// A fetch is running: no second one starts.
    in_flight: bool,
    /// Fetched at least once, whatever the outcome; untried Services skip the worker limit.
    tried: bool,
    /// The last aggregated document of the Service and its `Etag` (legacy fallback
    /// results are never cached per Service: one Service may serve several versions).
    cached: Option<(Option<String>, HashMap<GroupVersion, ApiVersionDiscovery>)>,
}

/// Everything the manager knows, under one mutex that no fetch holds.
struct State {
    /// The generation of the last [`TargetSet`] applied; older sets are ignored.
    generation: Option<u64>,
    targets: HashMap<String, TargetState>,
    services: HashMap<ServiceKey, ServiceState>,
    /// The document's entries, rebuilt into a new published document on each change.
    builder: DocumentBuilder,
    /// The priorities of the host's own group-versions (local APIServices).
    local: HashMap<GroupVersion, (i32, i32)>,
    /// Services known at the first sync and not tried yet; `None` before the first sync.
    initial: Option<HashSet<ServiceKey>>,
}

/// What every clone of a [`DiscoveryManager`] shares; the request path reads only the
/// two `ArcSwap`s.
struct Shared {
    config: DiscoveryConfig,
    timer: Timer,
    state: Mutex<State>,
    /// The published document.
    document: ArcSwap<AggregatedDocument>,
    local: ArcSwap<HashMap<GroupVersion, (i32, i32)>>,
    synced: AtomicBool,
    running: AtomicBool,
    /// Set when the run loop has work to look at; wakes it and the readiness waiters.
    notify: Notify,
    /// Documents built and published (`aggregator_discovery_aggregation_count_total`).
    aggregations: std::sync::atomic::AtomicU64,
}

/// Keeps the aggregated discovery document of the remote APIServices current.
///
/// Fed with [`TargetSet`](super::TargetSet)s (by [`Registry::feed`](crate::registry::Registry::feed)),
/// it keeps one entry per APIService, `Stale` and empty until its Service's first fetch
/// completes; [`DiscoveryManager::run`] fetches each Service (not each APIService) with
/// `GET /apis` and the v2 `Accept` as `system:kube-aggregator` in `system:masters`,
/// with `If-None-Match` once it has an `Etag`, and falls back to each group-version's
/// legacy `APIResourceList` when the answer is not a v2 document (404, 406, a legacy
/// list). A failed fetch marks its group-versions `Stale` and keeps their last good
/// resources. Successes are refreshed every minute, failures retried with backoff;
/// deleted APIServices leave the document in the same call that learns of it. All
/// waiting goes through the injected [`Timer`]; nothing here needs a runtime.
///
/// The request path reads [`DiscoveryManager::document`]: one lock-free load, never a
/// wait on a backend.
#[derive(Clone)]
pub struct DiscoveryManager {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for DiscoveryManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscoveryManager")
            .field("config", &self.shared.config)
            .field("synced", &self.has_synced())
            .finish_non_exhaustive()
    }
}

impl DiscoveryManager {
    /// A manager with no APIServices yet.
    pub fn new(timer: Timer, config: DiscoveryConfig) -> DiscoveryManager {
        let mut builder = DocumentBuilder::new();
        let document = ArcSwap::from_pointee(builder.build());
        DiscoveryManager {
            shared: Arc::new(Shared {
                config,
                timer,
                state: Mutex::new(State {
                    generation: None,
                    targets: HashMap::new(),
                    services: HashMap::new(),
                    builder,
                    local: HashMap::new(),
                    initial: None,
                }),
                document,
                local: ArcSwap::from_pointee(HashMap::new()),
                synced: AtomicBool::new(false),
                running: AtomicBool::new(false),
                notify: Notify::default(),
                aggregations: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// The last published document: one lock-free load.
    pub fn document(&self) -> Arc<AggregatedDocument> {
        self.shared.document.load_full()
    }

    /// The priorities of a group-version the host serves (a local APIService).
    pub fn local_priority(&self, group: &str, version: &str) -> Option<(i32, i32)> {
        self.shared
            .local
            .load()
            .get(&(group.to_owned(), version.to_owned()))
            .copied()
    }

    /// True once every Service known at the first sync has been fetched once, whatever
    /// the outcome (upstream's `apiservice-discovery-controller` post-start hook). False
    /// before the first sync.
    pub fn has_synced(&self) -> bool {
        self.shared.synced.load(Ordering::Acquire)
    }

    /// Completes when [`DiscoveryManager::has_synced`] turns true.
    pub fn synced(&self) -> Synced {
        Synced {
            shared: self.shared.clone(),
        }
    }

    /// True while [`DiscoveryManager::run`] is being polled somewhere.
    pub fn is_running(&self) -> bool {
        self.shared.running.load(Ordering::Acquire)
    }

    /// The configuration.
    pub fn config(&self) -> &DiscoveryConfig {
        &self.shared.config
    }

    /// Tells the run loop (and `synced` waiters) to look again.
    fn wake(&self) {
        self.shared.notify.wake();
    }

    /// Builds the document from the entries and publishes it (one swap).
    fn publish(&self, st: &mut State) {
        self.shared.document.store(Arc::new(st.builder.build()));
        self.shared
            .aggregations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many times the document was aggregated (built from the entries and published),
    /// upstream's `aggregator_discovery_aggregation_count_total`.
    pub fn aggregation_count(&self) -> u64 {
        self.shared
            .aggregations
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs forever: fetches every Service when it appears, then on its schedule. Spawn
    /// it on the host's executor; without it every remote group-version stays `Stale`.
    pub async fn run(self) {
        self.shared.running.store(true, Ordering::Release);
        let _running = RunningGuard(self.shared.clone());
        let shared = &self.shared;
        let start = |now, spawn: &mut dyn FnMut(refresh::Fetch<(ServiceKey, Fetched)>)| {
            let mut st = lock(&shared.state);
            let in_flight = st.services.values().filter(|s| s.in_flight).count();
            let free = shared.config.workers.max(1).saturating_sub(in_flight);
            let items = st
                .services
                .iter()
                .filter(|(_, s)| !s.in_flight)
                .map(|(k, s)| (k.clone(), s.due, s.tried))
                .collect();
            refresh::start_due(items, now, free, |key| {
                let Some(job) = job_for(&st, &key) else {
                    return false;
                };
                if let Some(s) = st.services.get_mut(&key) {
                    s.in_flight = true;
                }
                let (timer, config) = (shared.timer.clone(), shared.config.clone());
                spawn(Box::pin(async move {
                    let fetched = fetch(&job, &timer, &config).await;
                    (job.service, fetched)
                }));
                true
            })
        };
        let apply = |(key, fetched): (ServiceKey, Fetched)| self.apply(&key, fetched);
        refresh::run(&shared.timer, &shared.notify, start, apply).await;
    }

    /// Records one fetch result and republishes.
    fn apply(&self, key: &ServiceKey, fetched: Fetched) {
        let now = self.shared.timer.now();
        let config = &self.shared.config;
        let mut st = lock(&self.shared.state);
        let st = &mut *st;
        let Some(service) = st.services.get_mut(key) else {
            return; // every APIService of this Service went away meanwhile
        };
        service.in_flight = false;
        service.tried = true;
        let mut failed = false;
        let per_gv: Box<PerGroupVersion> = match fetched {
            Fetched::NotModified => {
                let cached = service.cached.as_ref().map(|(_, m)| m.clone());
                Box::new(move |gv| {
                    Some(Ok(cached
                        .as_ref()
                        .and_then(|m| m.get(gv).cloned())
                        .unwrap_or_default()))
                })
            }
            Fetched::Aggregated { etag, versions } => {
                service.cached = Some((etag, versions.clone()));
                Box::new(move |gv| Some(Ok(versions.get(gv).cloned().unwrap_or_default())))
            }
            Fetched::Legacy(results) => {
                failed = results.values().any(Result::is_err);
                Box::new(move |gv| {
                    results.get(gv).map(|r| match r {
                        Ok(resources) => Ok(ApiVersionDiscovery {
                            version: gv.1.clone(),
                            resources: resources.clone(),
                            freshness: None,
                        }),
                        Err(()) => Err(()),
                    })
                })
            }
            Fetched::Failed => {
                failed = true;
                Box::new(|_| Some(Err(())))
            }
        };
        if failed {
            let delay = config
                .backoff_base
                .saturating_mul(1u32 << service.failures.min(20));
            service.failures = service.failures.saturating_add(1);
            service.due = now + delay.min(config.backoff_max);
        } else {
            service.failures = 0;
            service.due = now + config.refresh_period;
        }
        let mut changed = false;
        for t in st.targets.values_mut().filter(|t| t.target.service == *key) {
            let gv = (t.target.group.clone(), t.target.version.clone());
            let entry = match per_gv(&gv) {
                // A version added while the fetch was in flight waits for the next one.
                None => continue,
                Some(Ok(mut found)) => {
                    found.version = t.target.version.clone();
                    found.freshness = Some(Freshness::Current);
                    t.last_good = Some(found.resources.clone());
                    found
                }
                Some(Err(())) => ApiVersionDiscovery {
                    version: t.target.version.clone(),
                    resources: t.last_good.clone().unwrap_or_default(),
                    freshness: Some(Freshness::Stale),
                },
            };
            changed |= st.builder.set(
                &t.target.group,
                VersionEntry {
                    discovery: entry,
                    group_priority_minimum: t.target.group_priority_minimum,
                    version_priority: t.target.version_priority,
                },
            );
        }
        drop(per_gv);
        if let Some(initial) = &mut st.initial {
            initial.remove(key);
        }
        if changed {
            self.publish(st);
        }
        self.check_synced(st);
    }

    /// Marks the manager synced once every Service of the first sync has been tried.
    fn check_synced(&self, st: &State) {
        if st.initial.as_ref().is_some_and(HashSet::is_empty)
            && !self.shared.synced.swap(true, Ordering::AcqRel)
        {
            tracing::info!("discovery: every APIService known at start has been fetched once");
            self.shared.notify.wake();
        }
    }
}

/// Clears [`Shared::running`] when the run loop is dropped.
struct RunningGuard(Arc<Shared>);

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Release);
    }
}

/// Future of [`DiscoveryManager::synced`].
pub struct Synced {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Synced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Synced")
    }
}

impl Future for Synced {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.shared.synced.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        self.shared.notify.register(cx.waker());
        if self.shared.synced.load(Ordering::Acquire) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// The fetch of Service `key`: the fetcher of its first APIService by name, the cached
/// `Etag`, and every group-version served by the Service. `None` when no APIService
/// points at it any more.
fn job_for(st: &State, key: &ServiceKey) -> Option<Job> {
    let mut targets: Vec<&Target> = st
        .targets
        .values()
        .map(|t| &t.target)
        .filter(|t| t.service == *key)
        .collect();
    targets.sort_by(|a, b| a.name.cmp(&b.name));
    let first = targets.first()?;
    let etag = st
        .services
        .get(key)
        .and_then(|s| s.cached.as_ref())
        .and_then(|(e, _)| e.clone());
    Some(Job {
        service: key.clone(),
        fetcher: first.fetcher.clone(),
        etag,
        group_versions: targets
            .iter()
            .map(|t| (t.group.clone(), t.version.clone()))
            .collect(),
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `aggregator_discovery_aggregation_count_total` of one [`DiscoveryManager`], as a
/// `prometheus-client` collector (`registry.register_collector(Box::new(...))`).
#[derive(Debug, Clone)]
pub struct AggregationCount(pub DiscoveryManager);

impl prometheus_client::collector::Collector for AggregationCount {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder<'_>,
    ) -> std::fmt::Result {
        use prometheus_client::encoding::EncodeMetric as _;
        let count =
            prometheus_client::metrics::counter::ConstCounter::new(self.0.aggregation_count());
        count.encode(encoder.encode_descriptor(
            "aggregator_discovery_aggregation_count",
            "Counter of number of times discovery was aggregated",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?)
    }
}
