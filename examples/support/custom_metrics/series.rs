//! The adapter's in-memory data: the objects metrics describe and their series.
//!
//! prometheus-adapter answers from Prometheus; this sample keeps the series itself. Each
//! series is one time series as Prometheus would hold it: a metric name, the object it
//! describes and the metric's own labels (`method="GET"`). [`Series::scrape`] takes a new
//! sample of every series, which the adapter calls every scrape interval, so the values an
//! HPA reads move over time; [`Series::record`] sets one sample directly.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::support::selector::LabelSelector;

/// Labels, sorted by key.
pub type Labels = BTreeMap<String, String>;

/// What a custom metric can describe: a resource the adapter's REST mapper knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// `GroupResource.String()`: `pods`, `deployments.apps`.
    pub group_resource: &'static str,
    /// The singular name the mapper also accepts (`pod`).
    pub singular: &'static str,
    /// The kind in `describedObject`.
    pub kind: &'static str,
    /// `describedObject.apiVersion`, as custom-metrics-apiserver's `helpers.ReferenceFor`
    /// writes it: `<group>/<version>`, so `/v1` for the core group (an upstream quirk).
    pub api_version: &'static str,
    /// Whether objects of it live in a namespace.
    pub namespaced: bool,
}

/// The resources the adapter maps.
pub const RESOURCES: [Resource; 5] = [
    Resource {
        group_resource: "pods",
        singular: "pod",
        kind: "Pod",
        api_version: "/v1",
        namespaced: true,
    },
    Resource {
        group_resource: "services",
        singular: "service",
        kind: "Service",
        api_version: "/v1",
        namespaced: true,
    },
    Resource {
        group_resource: "deployments.apps",
        singular: "deployment.apps",
        kind: "Deployment",
        api_version: "apps/v1",
        namespaced: true,
    },
    Resource {
        group_resource: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        api_version: "/v1",
        namespaced: false,
    },
    Resource {
        group_resource: "nodes",
        singular: "node",
        kind: "Node",
        api_version: "/v1",
        namespaced: false,
    },
];

/// The resource a path names, by plural or singular (`pods`, `pod`, `deployments.apps`).
pub fn resource(name: &str) -> Option<Resource> {
    RESOURCES
        .iter()
        .find(|r| r.group_resource == name || r.singular == name)
        .copied()
}

/// An object some metric describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// Its resource.
    pub resource: Resource,
    /// Its namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its labels, what `labelSelector` selects on.
    pub labels: Labels,
}

/// One sample: a value in thousandths and when it was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// The value times 1000 (Kubernetes quantities are decimal; `1500` is `1500m`).
    pub milli: i64,
    /// When it was taken.
    pub timestamp: SystemTime,
}

impl Sample {
    /// The canonical quantity: `3` for whole numbers, `1500m` otherwise.
    pub fn quantity(&self) -> String {
        if self.milli % 1000 == 0 {
            (self.milli / 1000).to_string()
        } else {
            format!("{}m", self.milli)
        }
    }
}

/// A custom-metric series: `metric{labels}` describing `object`, and how it moves.
#[derive(Debug, Clone)]
pub struct CustomSeries {
    /// The metric name as the API spells it (`http_requests_per_second`).
    pub metric: String,
    /// The described object.
    pub object: Object,
    /// The metric's own labels, what `metricLabelSelector` selects on.
    pub labels: Labels,
    /// The window of a rate, in seconds; `None` for a gauge.
    pub window_seconds: Option<i64>,
    /// The latest sample.
    pub sample: Sample,
    wave: Wave,
}

/// An external-metric series: `metric{labels}` in a namespace.
#[derive(Debug, Clone)]
pub struct ExternalSeries {
    /// The metric name (`queue_messages_ready`).
    pub metric: String,
    /// The namespace the metric is offered in.
    pub namespace: String,
    /// Its labels, what the external API's `labelSelector` selects on.
    pub labels: Labels,
    /// The window of a rate, in seconds; `None` for a gauge.
    pub window_seconds: Option<i64>,
    /// The latest sample.
    pub sample: Sample,
    wave: Wave,
}

/// How a series moves: `base` plus a triangle wave of `amplitude` over `period` scrapes.
#[derive(Debug, Clone, Copy)]
struct Wave {
    base: i64,
    amplitude: i64,
    period: u64,
}

impl Wave {
    /// A wave around `base`, `amplitude` either side, repeating every `period` ticks.
    const fn new(base: i64, amplitude: i64, period: u64) -> Wave {
        Wave {
            base,
            amplitude,
            period,
        }
    }

    fn at(self, tick: u64) -> i64 {
        let phase = (tick % self.period) as i64;
        let half = (self.period / 2).max(1) as i64;
        let ramp = if phase <= half {
            phase
        } else {
            2 * half - phase
        };
        self.base + self.amplitude * ramp / half
    }
}

/// The adapter's series, shared by the request handlers and the scraper.
#[derive(Debug, Clone, Default)]
pub struct Series {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    custom: Vec<CustomSeries>,
    external: Vec<ExternalSeries>,
    tick: u64,
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

impl Series {
    /// The sample data: pods, a Service and a Deployment in `default`, the namespace
    /// itself, two nodes, and three external metrics, one with a Stackdriver-style name
    /// whose `|` a client escapes in the path.
    pub fn sample_data() -> Series {
        let series = Series::default();
        let now = SystemTime::now();
        {
            let mut inner = series.lock();
            let mut custom = |metric: &str, object: Object, l: &[(&str, &str)], window, wave| {
                let sample = Sample {
                    milli: Wave::at(wave, 0),
                    timestamp: now,
                };
                inner.custom.push(CustomSeries {
                    metric: metric.to_owned(),
                    object,
                    labels: labels(l),
                    window_seconds: window,
                    sample,
                    wave,
                });
            };
            let object = |resource: &str, namespace: &str, name: &str, l: &[(&str, &str)]| Object {
                resource: self::resource(resource).unwrap_or(RESOURCES[0]),
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                labels: labels(l),
            };
            let pods = [
                ("frontend-7d9c8b6f4-2xkqp", "frontend", 1_500),
                ("frontend-7d9c8b6f4-9mz4t", "frontend", 2_500),
                ("backend-5b7f9c8d6-q8wlr", "backend", 800),
            ];
            for (name, app, base) in pods {
                let pod = object(
                    "pods",
                    "default",
                    name,
                    &[("app", app), ("pod-template-hash", "7d9c8b6f4")],
                );
                for (method, share) in [("GET", 3), ("POST", 1)] {
                    let wave = Wave::new(base * share, base * share / 2, 8);
                    custom(
                        "http_requests_per_second",
                        pod.clone(),
                        &[("method", method)],
                        Some(60),
                        wave,
                    );
                }
                custom(
                    "memory_working_set_bytes",
                    pod.clone(),
                    &[],
                    None,
                    Wave::new(52_428_800_000, 4_194_304_000, 12),
                );
            }
            let svc = object("services", "default", "frontend", &[("app", "frontend")]);
            custom(
                "requests_per_second",
                svc,
                &[],
                Some(60),
                Wave::new(16_000, 8_000, 8),
            );
            let deploy = object(
                "deployments.apps",
                "default",
                "frontend",
                &[("app", "frontend")],
            );
            custom(
                "http_requests_per_second",
                deploy,
                &[],
                Some(60),
                Wave::new(16_000, 8_000, 8),
            );
            let ns = object(
                "namespaces",
                "",
                "default",
                &[("kubernetes.io/metadata.name", "default")],
            );
            custom(
                "queue_messages_ready",
                ns,
                &[],
                None,
                Wave::new(42_000, 30_000, 10),
            );
            for (node, zone, base) in [("node-a", "zone-1", 350), ("node-b", "zone-2", 1_250)] {
                let n = object(
                    "nodes",
                    "",
                    node,
                    &[
                        ("kubernetes.io/hostname", node),
                        ("topology.kubernetes.io/zone", zone),
                    ],
                );
                custom("node_load1", n, &[], None, Wave::new(base, base / 2, 6));
            }
            let mut external = |metric: &str, l: &[(&str, &str)], window, wave| {
                let sample = Sample {
                    milli: Wave::at(wave, 0),
                    timestamp: now,
                };
                inner.external.push(ExternalSeries {
                    metric: metric.to_owned(),
                    namespace: "default".to_owned(),
                    labels: labels(l),
                    window_seconds: window,
                    sample,
                    wave,
                });
            };
            external(
                "queue_messages_ready",
                &[("queue", "orders")],
                None,
                Wave::new(120_000, 80_000, 10),
            );
            external(
                "queue_messages_ready",
                &[("queue", "payments")],
                None,
                Wave::new(7_000, 5_000, 10),
            );
            external(
                "pubsub.googleapis.com|subscription|num_undelivered_messages",
                &[("resource.labels.subscription_id", "orders-sub")],
                None,
                Wave::new(30_000, 20_000, 10),
            );
        }
        series
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a new sample of every series at `now`, one step further along its wave.
    pub fn scrape(&self, now: SystemTime) {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        for s in &mut inner.custom {
            s.sample = Sample {
                milli: s.wave.at(tick),
                timestamp: now,
            };
        }
        for s in &mut inner.external {
            s.sample = Sample {
                milli: s.wave.at(tick),
                timestamp: now,
            };
        }
    }

    /// Sets the latest sample of every custom series of `metric` describing
    /// `namespace/name`; returns how many it set.
    pub fn record(&self, metric: &str, namespace: &str, name: &str, milli: i64) -> usize {
        let mut inner = self.lock();
        let now = SystemTime::now();
        let mut n = 0;
        for s in inner.custom.iter_mut().filter(|s| {
            s.metric == metric && s.object.namespace == namespace && s.object.name == name
        }) {
            s.sample = Sample {
                milli,
                timestamp: now,
            };
            n += 1;
        }
        n
    }

    /// Every custom metric as `(resource, metric)`, once each, in order of first series.
    pub fn custom_metrics(&self) -> Vec<(Resource, String)> {
        let mut out: Vec<(Resource, String)> = Vec::new();
        for s in &self.lock().custom {
            let key = (s.object.resource, s.metric.clone());
            if !out.contains(&key) {
                out.push(key);
            }
        }
        out
    }

    /// Every external metric name, once each.
    pub fn external_metrics(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in &self.lock().external {
            if !out.contains(&s.metric) {
                out.push(s.metric.clone());
            }
        }
        out
    }

    /// The custom series of `metric` for objects of `resource` in `namespace` (empty for
    /// cluster-scoped ones) whose metric labels `metric_selector` selects.
    pub fn custom(
        &self,
        resource: Resource,
        namespace: &str,
        metric: &str,
        metric_selector: &LabelSelector,
    ) -> Vec<CustomSeries> {
        self.lock()
            .custom
            .iter()
            .filter(|s| {
                s.object.resource == resource
                    && s.object.namespace == namespace
                    && s.metric == metric
                    && metric_selector.matches(&s.labels)
            })
            .cloned()
            .collect()
    }

    /// The external series of `metric` in `namespace` whose labels `selector` selects.
    pub fn external(
        &self,
        namespace: &str,
        metric: &str,
        selector: &LabelSelector,
    ) -> Vec<ExternalSeries> {
        self.lock()
            .external
            .iter()
            .filter(|s| {
                s.namespace == namespace && s.metric == metric && selector.matches(&s.labels)
            })
            .cloned()
            .collect()
    }
}
