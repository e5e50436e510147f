//! The custom and external metrics APIs: routing and the documents answered.
//!
//! Paths and shapes follow kubernetes-sigs/custom-metrics-apiserver
//! (`pkg/apiserver/installer/cmhandlers.go`, `emhandlers.go`,
//! `pkg/apiserver/endpoints/handlers/get.go`, `pkg/registry/*/reststorage.go`,
//! `pkg/provider/{errors.go,resource_lister.go}`) and the types of k8s.io/metrics
//! (`pkg/apis/custom_metrics/{v1beta1,v1beta2}`, `pkg/apis/external_metrics/v1beta1`):
//!
//! | path under `/apis/custom.metrics.k8s.io/<v>/` | answers |
//! |---|---|
//! | `namespaces/<ns>/<resource>/<name>/<metric>` | the named object's value (an HPA `Object` or `Pods` metric of one pod) |
//! | `namespaces/<ns>/<resource>/*/<metric>?labelSelector=` | every selected object's value (an HPA `Pods` metric) |
//! | `namespaces/<ns>/metrics/<metric>` | the namespace's own value (an HPA `Object` metric on a Namespace) |
//! | `<resource>/<name or *>/<metric>` | root-scoped objects (nodes, namespaces) |
//!
//! `metricLabelSelector` selects series by the metric's own labels and comes back in
//! `metric.selector`; under `/apis/external.metrics.k8s.io/v1beta1/namespaces/<ns>/<metric>`
//! the `labelSelector` selects series. Every answer is a list (`MetricValueList`,
//! `ExternalMetricValueList`), even for one object, as upstream's handler lists.

// A refusal is the answer itself (a `Status` response), returned as `Err` and sent as it
// is, so the error type is the response.
#![allow(clippy::result_large_err)]

use std::time::SystemTime;

use http::{Response, StatusCode};
use kube_aggregator::Body;
use kube_aggregator::discovery::v2::{ApiResource, convert_legacy_resources};
use serde_json::{Value, json};

use super::series::{self, CustomSeries, Series};
use crate::support::api_status::{bad_request, path_not_found};
use crate::support::extension_server::{json, query_param, rfc3339};
use crate::support::selector::LabelSelector;
use kube_aggregator::status::Status;

/// The custom metrics group.
pub const CUSTOM_GROUP: &str = "custom.metrics.k8s.io";
/// The external metrics group.
pub const EXTERNAL_GROUP: &str = "external.metrics.k8s.io";
/// The custom metrics versions, preferred first.
pub const CUSTOM_VERSIONS: [&str; 2] = ["v1beta2", "v1beta1"];

/// What a request under one of the metrics group-versions asks for.
enum Route<'a> {
    /// `/apis/<group>/<version>`: the APIResourceList.
    Resources(&'a str, &'a str),
    /// A custom metric of one object or of all selected (`name` is `*`).
    Custom {
        version: &'a str,
        namespace: &'a str,
        resource: &'a str,
        name: &'a str,
        metric: &'a str,
    },
    /// An external metric.
    External { namespace: &'a str, metric: &'a str },
    /// Under the group-version but not a metric path: upstream's handler answers 400.
    Invalid,
}

fn route<'a>(segments: &[&'a str]) -> Option<Route<'a>> {
    Some(match segments {
        ["apis", CUSTOM_GROUP, v] if CUSTOM_VERSIONS.contains(v) => {
            Route::Resources(CUSTOM_GROUP, v)
        }
        ["apis", EXTERNAL_GROUP, "v1beta1"] => Route::Resources(EXTERNAL_GROUP, "v1beta1"),
        ["apis", CUSTOM_GROUP, v, rest @ ..] if CUSTOM_VERSIONS.contains(v) => match rest {
            // Metrics describing a namespace (the handler rewrites them to the namespace
            // object, get.go).
            ["namespaces", ns, "metrics", metric] => Route::Custom {
                version: v,
                namespace: "",
                resource: "namespaces",
                name: ns,
                metric,
            },
            ["namespaces", ns, resource, name, metric] => Route::Custom {
                version: v,
                namespace: ns,
                resource,
                name,
                metric,
            },
            // `namespaces/<ns>/<x>` and `namespaces/<ns>/<x>/<y>` are namespaced requests
            // with fewer than three parts: "invalid request path".
            ["namespaces", ..] if rest.len() < 5 => Route::Invalid,
            [resource, name, metric] => Route::Custom {
                version: v,
                namespace: "",
                resource,
                name,
                metric,
            },
            [_] | [_, _] => Route::Invalid,
            _ => return None,
        },
        ["apis", EXTERNAL_GROUP, "v1beta1", "namespaces", ns, metric] => Route::External {
            namespace: ns,
            metric,
        },
        ["apis", EXTERNAL_GROUP, "v1beta1", ..] => Route::Invalid,
        _ => return None,
    })
}

/// Answers a GET of `segments` (the path split on `/`, each percent-decoded) with
/// `query`; `None` when the path is not the metrics APIs'.
pub fn handle(series: &Series, segments: &[&str], query: Option<&str>) -> Option<Response<Body>> {
    let answer = match route(segments)? {
        Route::Resources(group, version) => {
            json(StatusCode::OK, &resource_list(series, group, version))
        }
        Route::Invalid => bad_request("invalid request path"),
        Route::Custom {
            version,
            namespace,
            resource,
            name,
            metric,
        } => match custom(series, version, namespace, resource, name, metric, query) {
            Ok(list) => json(StatusCode::OK, &list),
            Err(res) => res,
        },
        Route::External { namespace, metric } => match external(series, namespace, metric, query) {
            Ok(list) => json(StatusCode::OK, &list),
            Err(res) => res,
        },
    };
    Some(answer)
}

fn selector(query: Option<&str>, key: &str) -> Result<LabelSelector, Response<Body>> {
    let raw = query_param(query, key).unwrap_or_default();
    LabelSelector::parse(&raw).map_err(bad_request)
}

/// 404 as custom-metrics-apiserver's `NewMetricNotFound*Error`s word it.
fn metric_not_found(message: String) -> Response<Body> {
    Status::failure(StatusCode::NOT_FOUND, "NotFound", message).into_response()
}

fn custom(
    series: &Series,
    version: &str,
    namespace: &str,
    resource_name: &str,
    name: &str,
    metric: &str,
    query: Option<&str>,
) -> Result<Value, Response<Body>> {
    let objects = selector(query, "labelSelector")?;
    let metric_selector = selector(query, "metricLabelSelector")?;
    let Some(resource) = series::resource(resource_name) else {
        let message = format!("the server could not find the metric {metric} for {resource_name}");
        return Err(metric_not_found(message));
    };
    let gr = resource.group_resource;
    let known = series.custom(resource, namespace, metric, &LabelSelector::default());
    if known.is_empty() {
        return Err(metric_not_found(format!(
            "the server could not find the metric {metric} for {gr}"
        )));
    }
    let matching = series.custom(resource, namespace, metric, &metric_selector);
    let items: Vec<Value> = if name == "*" {
        let mut names: Vec<&str> = Vec::new();
        for s in matching
            .iter()
            .filter(|s| objects.matches(&s.object.labels))
        {
            if !names.contains(&s.object.name.as_str()) {
                names.push(&s.object.name);
            }
        }
        names
            .iter()
            .map(|n| value_of(version, &matching, n, metric, &metric_selector))
            .collect()
    } else {
        if !known.iter().any(|s| s.object.name == name) {
            return Err(metric_not_found(format!(
                "the server could not find the metric {metric} for {gr} {name}"
            )));
        }
        if !matching.iter().any(|s| s.object.name == name) {
            return Err(metric_not_found(format!(
                "the server could not find the metric {metric} for {gr} {name} with selector {}",
                query_param(query, "metricLabelSelector").unwrap_or_default()
            )));
        }
        vec![value_of(version, &matching, name, metric, &metric_selector)]
    };
    Ok(json!({
        "kind": "MetricValueList",
        "apiVersion": format!("{CUSTOM_GROUP}/{version}"),
        "metadata": {},
        "items": items,
    }))
}

/// One `MetricValue`: the series of `name` summed (as prometheus-adapter's queries sum
/// over the label sets a selector leaves), the latest timestamp among them.
fn value_of(
    version: &str,
    matching: &[CustomSeries],
    name: &str,
    metric: &str,
    selector: &LabelSelector,
) -> Value {
    let of_object: Vec<&CustomSeries> = matching.iter().filter(|s| s.object.name == name).collect();
    let first = of_object[0];
    let milli: i64 = of_object.iter().map(|s| s.sample.milli).sum();
    let timestamp = of_object
        .iter()
        .map(|s| s.sample.timestamp)
        .max()
        .unwrap_or_else(SystemTime::now);
    let sample = series::Sample { milli, timestamp };
    let mut described = json!({"kind": first.object.resource.kind});
    if !first.object.namespace.is_empty() {
        described["namespace"] = first.object.namespace.clone().into();
    }
    described["name"] = name.into();
    described["apiVersion"] = first.object.resource.api_version.into();
    let selector = selector.to_label_selector();
    // Go field order: v1beta2 nests the name and selector in `metric` and calls the window
    // `windowSeconds`; v1beta1 has `metricName`, `window` and `selector` last.
    let mut value = json!({"describedObject": described});
    if version == "v1beta2" {
        value["metric"] = json!({"name": metric, "selector": selector});
        value["timestamp"] = rfc3339(sample.timestamp).into();
        if let Some(w) = first.window_seconds {
            value["windowSeconds"] = w.into();
        }
        value["value"] = sample.quantity().into();
    } else {
        value["metricName"] = metric.into();
        value["timestamp"] = rfc3339(sample.timestamp).into();
        if let Some(w) = first.window_seconds {
            value["window"] = w.into();
        }
        value["value"] = sample.quantity().into();
        value["selector"] = selector;
    }
    value
}

fn external(
    series: &Series,
    namespace: &str,
    metric: &str,
    query: Option<&str>,
) -> Result<Value, Response<Body>> {
    let selector = selector(query, "labelSelector")?;
    if !series.external_metrics().iter().any(|m| m == metric) {
        // prometheus-adapter's external provider: NewMetricNotFoundError for the namespace.
        return Err(metric_not_found(format!(
            "the server could not find the metric {metric} for namespaces"
        )));
    }
    let items: Vec<Value> = series
        .external(namespace, metric, &selector)
        .iter()
        .map(|s| {
            let mut v = json!({
                "metricName": s.metric, "metricLabels": s.labels,
                "timestamp": rfc3339(s.sample.timestamp),
            });
            if let Some(w) = s.window_seconds {
                v["window"] = w.into();
            }
            v["value"] = s.sample.quantity().into();
            v
        })
        .collect();
    Ok(json!({
        "kind": "ExternalMetricValueList",
        "apiVersion": format!("{EXTERNAL_GROUP}/v1beta1"),
        "metadata": {},
        "items": items,
    }))
}

// ---- Discovery ---------------------------------------------------------------------------

/// The legacy resources of a group-version, as custom-metrics-apiserver's resource
/// listers build them: `<group-resource>/<metric>` of kind `MetricValueList` (namespaced
/// as the object), or `<metric>` of kind `ExternalMetricValueList`, verb `get` only.
fn resources(series: &Series, group: &str) -> Vec<Value> {
    if group == EXTERNAL_GROUP {
        return series
            .external_metrics()
            .into_iter()
            .map(|m| json!({"name": m, "singularName": "", "namespaced": true, "kind": "ExternalMetricValueList", "verbs": ["get"]}))
            .collect();
    }
    series
        .custom_metrics()
        .into_iter()
        .map(|(r, m)| {
            json!({"name": format!("{}/{m}", r.group_resource), "singularName": "", "namespaced": r.namespaced,
                   "kind": "MetricValueList", "verbs": ["get"]})
        })
        .collect()
}

fn resource_list(series: &Series, group: &str, version: &str) -> Value {
    json!({
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{group}/{version}"),
        "resources": resources(series, group),
    })
}

/// `/apis` as aggregated discovery: both groups, each version's resources being the
/// legacy list converted the way kube-aggregator converts a legacy answer
/// (`<resource>/<metric>` becomes subresource `<metric>` of resource `<resource>`).
pub fn aggregated(series: &Series, api_version: &str) -> Value {
    let version = |group: &str, v: &str| {
        let legacy: Vec<ApiResource> =
            serde_json::from_value(Value::Array(resources(series, group))).unwrap_or_default();
        let converted = convert_legacy_resources(&legacy).unwrap_or_default();
        json!({"version": v, "resources": converted, "freshness": "Current"})
    };
    let custom: Vec<Value> = CUSTOM_VERSIONS
        .iter()
        .map(|v| version(CUSTOM_GROUP, v))
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {},
        "items": [
            {"metadata": {"name": CUSTOM_GROUP}, "versions": custom},
            {"metadata": {"name": EXTERNAL_GROUP}, "versions": [version(EXTERNAL_GROUP, "v1beta1")]},
        ],
    })
}

/// `/apis` as the legacy APIGroupList.
pub fn group_list() -> Value {
    let custom: Vec<Value> = CUSTOM_VERSIONS
        .iter()
        .map(|v| json!({"groupVersion": format!("{CUSTOM_GROUP}/{v}"), "version": v}))
        .collect();
    let external =
        json!({"groupVersion": format!("{EXTERNAL_GROUP}/v1beta1"), "version": "v1beta1"});
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": CUSTOM_GROUP, "versions": custom, "preferredVersion": custom[0]},
        {"name": EXTERNAL_GROUP, "versions": [external], "preferredVersion": external},
    ]})
}

/// The not-found answer for anything else.
pub fn not_found() -> Response<Body> {
    path_not_found()
}
