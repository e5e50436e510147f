//! The OpenAPI manager: downloads each remote APIService's specs off the request path
//! (kube-aggregator
//! [`pkg/controllers/openapi/controller.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/controllers/openapi/controller.go)
//! and
//! [`pkg/controllers/openapiv3/controller.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/controllers/openapiv3/controller.go))
//! and publishes what the request path serves.

mod download;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use arc_swap::ArcSwap;
use bytes::Bytes;
use serde_json::{Value, json};

use super::metrics::{OpenApiMetrics, Reason};
use super::snapshot::{OpenApiConfig, OpenApiSnapshot, V2Document, V3Document, V3Entry};
use super::{merge, v3};
use crate::discovery::{Target, TargetSet, TargetSink, sha512_hex};
use crate::refresh::{self, Notify};
use crate::rt::Timer;

use download::{Downloaded, V2Result, V3Result, download};

/// The spec that heads the merge when the host has none.
fn base_spec() -> Value {
    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "unversioned"}, "paths": {}, "definitions": {}})
}

/// One APIService's download schedule and last good specs.
struct Entry {
    target: Target,
    /// When the next download may start.
    due: Instant,
    /// Failures in a row: the backoff's exponent; 0 after a success.
    failures: u32,
    /// A download is running: no second one starts.
    in_flight: bool,
    /// Downloaded at least once; untried APIServices skip the worker limit.
    tried: bool,
    /// The v2 spec, filtered to the APIService's group-version; `None` for no spec (404).
    v2: Option<Arc<Value>>,
    /// The backend's `Etag` for `v2`, sent back as `If-None-Match`.
    v2_etag: Option<String>,
    /// Who serves the APIService's v3 key, once known.
    v3: Option<V3Entry>,
}

/// What every clone of an [`OpenApiManager`] shares; the request path reads only
/// `snapshot`.
struct Shared {
    config: OpenApiConfig,
    timer: Timer,
    state: Mutex<HashMap<String, Entry>>,
    generation: Mutex<Option<u64>>,
    snapshot: ArcSwap<OpenApiSnapshot>,
    /// Wakes the run loop when the set of APIServices changes.
    notify: Notify,
    metrics: OpenApiMetrics,
}

/// Keeps the remote APIServices' OpenAPI specs.
///
/// For each remote APIService (fed by [`Registry::feed`](crate::registry::Registry::feed)),
/// [`OpenApiManager::run`] downloads `GET /openapi/v2` (JSON, as `system:aggregator`, with
/// `If-None-Match` when the backend gave an `Etag`; 404 means "no spec") and keeps it
/// filtered to `/apis/<group>/<version>/`, and `GET /openapi/v3`, keeping only the
/// APIService's own `apis/<group>/<version>` key (a backend cannot claim `version`, `apis`
/// or another group's key). An APIService whose `/openapi/v3` is 404 gets its v2 spec
/// converted and served by the aggregator. Downloads wait for the APIService to be
/// `Available` (upstream's go through the gated proxy handler); failures keep the last
/// good spec and retry with backoff; successes are refreshed every minute.
#[derive(Clone)]
pub struct OpenApiManager {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for OpenApiManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenApiManager")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl OpenApiManager {
    /// A manager with no APIServices yet.
    pub fn new(timer: Timer, config: OpenApiConfig) -> OpenApiManager {
        let base = base_spec();
        let started = Instant::now();
        let merged_v2 = Arc::new(V2Document::new(&merge::merge_all([&base])));
        let metrics = OpenApiMetrics::default();
        metrics.regenerated(
            &[("*".to_owned(), Reason::Startup)],
            started.elapsed().as_secs_f64(),
        );
        OpenApiManager {
            shared: Arc::new(Shared {
                config,
                timer,
                state: Mutex::new(HashMap::new()),
                generation: Mutex::new(None),
                snapshot: ArcSwap::from_pointee(OpenApiSnapshot {
                    remote_v2: Vec::new(),
                    merged_v2,
                    v3: BTreeMap::new(),
                }),
                notify: Notify::default(),
                metrics,
            }),
        }
    }

    /// The last published snapshot: one lock-free load.
    pub fn snapshot(&self) -> Arc<OpenApiSnapshot> {
        self.shared.snapshot.load_full()
    }

    /// The configuration.
    pub fn config(&self) -> &OpenApiConfig {
        &self.shared.config
    }

    /// Its regeneration metrics (`aggregator_openapi_v2_regeneration_*`).
    pub fn metrics(&self) -> &OpenApiMetrics {
        &self.shared.metrics
    }

    /// Tells the run loop to look again.
    fn wake(&self) {
        self.shared.notify.wake();
    }

    /// Merges the entries' specs in upstream's order (group priority, then name) and
    /// publishes the snapshot (one swap); a regeneration of the v2 document caused by
    /// `causes`, when there are any, is counted.
    fn publish(&self, entries: &HashMap<String, Entry>, causes: &[(String, Reason)]) {
        let started = Instant::now();
        let mut group_priority: HashMap<&str, i32> = HashMap::new();
        for e in entries.values() {
            let p = group_priority
                .entry(e.target.group.as_str())
                .or_insert(i32::MIN);
            *p = (*p).max(e.target.group_priority_minimum);
        }
        // Upstream's order: by the group's highest priority, then by name (within one
        // group, upstream compares one APIService's versionPriority with itself, so only
        // names decide).
        let mut with_spec: Vec<&Entry> = entries.values().filter(|e| e.v2.is_some()).collect();
        with_spec.sort_by(|a, b| {
            let pa = group_priority.get(a.target.group.as_str());
            let pb = group_priority.get(b.target.group.as_str());
            pb.cmp(&pa).then_with(|| a.target.name.cmp(&b.target.name))
        });
        let remote_v2: Vec<Arc<Value>> = with_spec.iter().filter_map(|e| e.v2.clone()).collect();
        let base = base_spec();
        let merged = merge::merge_all(std::iter::once(&base).chain(remote_v2.iter().map(|v| &**v)));
        let v3 = entries
            .values()
            .filter_map(|e| Some((gv_key(&e.target), e.v3.clone()?)))
            .collect();
        self.shared.snapshot.store(Arc::new(OpenApiSnapshot {
            remote_v2,
            merged_v2: Arc::new(V2Document::new(&merged)),
            v3,
        }));
        if !causes.is_empty() {
            let seconds = started.elapsed().as_secs_f64();
            self.shared.metrics.regenerated(causes, seconds);
        }
    }

    /// Runs forever: downloads every APIService's specs when it appears or becomes
    /// available, then on its schedule. Spawn it on the host's executor.
    pub async fn run(self) {
        let shared = &self.shared;
        let start = |now, spawn: &mut dyn FnMut(refresh::Fetch<(String, Downloaded)>)| {
            let mut st = lock(&shared.state);
            let in_flight = st.values().filter(|e| e.in_flight).count();
            let free = shared.config.workers.max(1).saturating_sub(in_flight);
            // Downloads wait for the APIService to be available.
            let items = st
                .iter()
                .filter(|(_, e)| !e.in_flight && e.target.available)
                .map(|(name, e)| (name.clone(), e.due, e.tried))
                .collect();
            refresh::start_due(items, now, free, |name| {
                let Some(e) = st.get_mut(&name) else {
                    return false;
                };
                e.in_flight = true;
                let (target, etag) = (e.target.clone(), e.v2_etag.clone());
                let (timer, config) = (shared.timer.clone(), shared.config.clone());
                spawn(Box::pin(async move {
                    (name, download(&target, etag, &timer, &config).await)
                }));
                true
            })
        };
        let apply = |(name, downloaded): (String, Downloaded)| self.apply(&name, downloaded);
        refresh::run(&shared.timer, &shared.notify, start, apply).await;
    }

    /// Records one download of `name` (keeping the last good spec on failure), schedules
    /// the next, and republishes when anything changed.
    fn apply(&self, name: &str, d: Downloaded) {
        let now = self.shared.timer.now();
        let config = &self.shared.config;
        let mut st = lock(&self.shared.state);
        let Some(e) = st.get_mut(name) else { return };
        e.in_flight = false;
        e.tried = true;
        let before = (e.v2.clone(), e.v3.as_ref().map(v3_identity));
        let mut failed = false;
        match d.v2 {
            V2Result::NotModified => {}
            V2Result::Found(spec, etag) => {
                let prefix = format!("{}/", e.target.group_version_path());
                let filtered = merge::filter_by_path_prefixes(&spec, &[prefix.as_str()]);
                if e.v2.as_deref() != Some(&filtered) {
                    e.v2 = Some(Arc::new(filtered));
                }
                e.v2_etag = etag;
            }
            V2Result::NotFound => {
                e.v2 = None;
                e.v2_etag = None;
            }
            V2Result::Failed => failed = true,
        }
        match d.v3 {
            V3Result::Root(url) => {
                e.v3 = url.map(|url| V3Entry::Remote {
                    apiservice: e.target.name.clone(),
                    url,
                })
            }
            V3Result::NotFound => {
                e.v3 = e.v2.as_deref().map(|spec| {
                    let converted = v3::convert_v2_to_v3(spec);
                    let json = Bytes::from(serde_json::to_vec(&converted).unwrap_or_default());
                    let hash = sha512_hex(&json);
                    match &e.v3 {
                        Some(V3Entry::Converted(old)) if old.hash == hash => {
                            V3Entry::Converted(old.clone())
                        }
                        _ => V3Entry::Converted(Arc::new(V3Document {
                            json,
                            hash,
                            last_modified: SystemTime::now(),
                        })),
                    }
                })
            }
            V3Result::Failed => failed = true,
        }
        if failed {
            let delay = config
                .backoff_base
                .saturating_mul(1u32 << e.failures.min(20));
            e.failures = e.failures.saturating_add(1);
            e.due = now + delay.min(config.backoff_max);
        } else {
            e.failures = 0;
            e.due = now + config.refresh_period;
        }
        let after = (e.v2.clone(), e.v3.as_ref().map(v3_identity));
        let v2_changed = before.0.as_ref().map(Arc::as_ptr) != after.0.as_ref().map(Arc::as_ptr);
        let changed = v2_changed || before.1 != after.1;
        if changed {
            let reason = if before.0.is_none() {
                Reason::Add
            } else {
                Reason::Update
            };
            let causes = if v2_changed {
                vec![(name.to_owned(), reason)]
            } else {
                Vec::new()
            };
            self.publish(&st, &causes);
        }
    }
}

fn v3_identity(e: &V3Entry) -> String {
    match e {
        V3Entry::Remote { url, .. } => format!("remote {url}"),
        V3Entry::Converted(d) => format!("converted {}", d.hash),
    }
}

/// The v3 root key of a target: `apis/<group>/<version>`, or `api/<version>`.
pub(crate) fn gv_key(t: &Target) -> String {
    t.group_version_path().trim_start_matches('/').to_owned()
}

impl TargetSink for OpenApiManager {
    /// New APIServices are downloaded at once (when available); deleted ones leave the
    /// published specs before this returns; one that turns available is downloaded again.
    fn sync(&self, set: &TargetSet) {
        {
            let mut g = lock(&self.shared.generation);
            if g.is_some_and(|g| g >= set.generation) {
                return;
            }
            *g = Some(set.generation);
        }
        let now = self.shared.timer.now();
        let mut st = lock(&self.shared.state);
        let before = st.len();
        let wanted: HashMap<&str, &Target> =
            set.remote.iter().map(|t| (t.name.as_str(), t)).collect();
        // What leaves the merged v2 document: the APIServices removed, those replaced.
        let mut causes: Vec<(String, Reason)> = Vec::new();
        st.retain(|name, e| {
            let keep = wanted.contains_key(name.as_str());
            if !keep && e.v2.is_some() {
                causes.push((name.clone(), Reason::Delete));
            }
            keep
        });
        let mut changed = st.len() != before;
        for t in &set.remote {
            match st.get_mut(&t.name) {
                Some(e) if e.target.same_spec(t) => {
                    if t.available && !e.target.available {
                        e.due = now;
                    }
                    e.target = t.clone();
                }
                Some(e) => {
                    changed |= e.v2.is_some() || e.v3.is_some();
                    if e.v2.is_some() {
                        causes.push((t.name.clone(), Reason::Update));
                    }
                    *e = new_entry(t, now);
                }
                None => {
                    st.insert(t.name.clone(), new_entry(t, now));
                }
            }
        }
        if changed {
            self.publish(&st, &causes);
        }
        drop(st);
        self.wake();
    }
}

fn new_entry(t: &Target, now: Instant) -> Entry {
    Entry {
        target: t.clone(),
        due: now,
        failures: 0,
        in_flight: false,
        tried: false,
        v2: None,
        v2_etag: None,
        v3: None,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
