//! The sample metrics server's discovery and OpenAPI documents, shaped like
//! metrics-server's (a generic apiserver serving `metrics.k8s.io/v1beta1`): aggregated
//! discovery v2 for `/apis`, the Swagger 2.0 spec at `/openapi/v2`, and the OpenAPI v3
//! root and group-version document at `/openapi/v3` and
//! `/openapi/v3/apis/metrics.k8s.io/v1beta1` (handler3's `?hash=` rules).

#![allow(unreachable_pub)]

use bytes::Bytes;
use http::{HeaderMap, header};
use http_body_util::Full;
use hyper::Response;
use kube_aggregator::discovery::{Negotiated, negotiate};
use serde_json::{Value, json};

use super::openapi_doc::{
    self, GroupVersion, META, apimachinery_definitions, array, quantities, reference, string,
    swagger, with_description, with_etag,
};

/// The v3 root key of the group-version.
pub const V3_KEY: &str = "apis/metrics.k8s.io/v1beta1";

const GV: GroupVersion = GroupVersion::new(
    "metrics.k8s.io",
    "v1beta1",
    "io.k8s.metrics.pkg.apis.metrics.v1beta1",
    "metricsV1beta1",
);

fn usage() -> Value {
    quantities("The memory and CPU used, by resource name.")
}

/// The Swagger 2.0 spec of `metrics.k8s.io/v1beta1`.
pub fn v2_spec() -> Value {
    let base = "/apis/metrics.k8s.io/v1beta1";
    let window =
        || string("The length of the window the usage was measured over, as a Go duration.");
    let timestamp = || {
        json!({"type": "string", "format": "date-time",
               "description": "The end of the window the usage was measured over."})
    };
    let mut definitions = serde_json::Map::new();
    definitions.insert(
        GV.definition("NodeMetrics"),
        GV.object(
            "NodeMetrics",
            "NodeMetrics reports the resource usage of one node.",
            json!({"metadata": with_description(reference(META), "Standard object metadata; the name is the node's."),
                   "timestamp": timestamp(), "window": window(), "usage": usage()}),
            &["timestamp", "window", "usage"],
        ),
    );
    definitions.insert(GV.definition("NodeMetricsList"), GV.list("NodeMetrics"));
    definitions.insert(
        GV.definition("PodMetrics"),
        GV.object(
            "PodMetrics",
            "PodMetrics reports the resource usage of one pod, by container.",
            json!({"metadata": with_description(reference(META), "Standard object metadata; name and namespace are the pod's."),
                   "timestamp": timestamp(), "window": window(),
                   "containers": array("The usage of each container of the pod.", reference(&GV.definition("ContainerMetrics")))}),
            &["timestamp", "window", "containers"],
        ),
    );
    definitions.insert(GV.definition("PodMetricsList"), GV.list("PodMetrics"));
    definitions.insert(
        GV.definition("ContainerMetrics"),
        json!({"type": "object", "description": "ContainerMetrics reports the resource usage of one container.",
               "required": ["name", "usage"],
               "properties": {"name": string("The container's name, as in the pod spec."), "usage": usage()}}),
    );
    apimachinery_definitions(&mut definitions);
    swagger(
        "metrics-server",
        "v0.7.2",
        json!({
            format!("{base}/nodes"): GV.list_operation("NodeMetrics", "listMetricsV1beta1NodeMetrics", false),
            format!("{base}/nodes/{{name}}"): GV.get_operation("NodeMetrics", "readMetricsV1beta1NodeMetrics", false),
            format!("{base}/pods"): GV.list_operation("PodMetrics", "listMetricsV1beta1PodMetricsForAllNamespaces", false),
            format!("{base}/namespaces/{{namespace}}/pods"): GV.list_operation("PodMetrics", "listMetricsV1beta1NamespacedPodMetrics", true),
            format!("{base}/namespaces/{{namespace}}/pods/{{name}}"): GV.get_operation("PodMetrics", "readMetricsV1beta1NamespacedPodMetrics", true),
        }),
        definitions,
    )
}

/// `/apis` as aggregated discovery v2 (or v2beta1).
fn aggregated_group_list(api_version: &str) -> Value {
    let resource = |name: &str, scope: &str, kind: &str| {
        json!({"resource": name, "responseKind": {"group": "metrics.k8s.io", "version": "v1beta1", "kind": kind},
               "scope": scope, "singularResource": "", "verbs": ["get", "list"]})
    };
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {},
           "items": [{"metadata": {"name": "metrics.k8s.io"}, "versions": [{"version": "v1beta1",
               "resources": [resource("nodes", "Cluster", "NodeMetrics"), resource("pods", "Namespaced", "PodMetrics")],
               "freshness": "Current"}]}]})
}

/// Answers the discovery and OpenAPI paths this module owns; `None` for anything else
/// (legacy `/apis` included).
pub fn handle(
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Option<Response<Full<Bytes>>> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    match path {
        "/apis" => match negotiate(accept) {
            Negotiated::Aggregated(v) => {
                let body =
                    serde_json::to_vec(&aggregated_group_list(v.api_version())).unwrap_or_default();
                Some(with_etag(headers, v.content_type(), Bytes::from(body)))
            }
            _ => None,
        },
        _ => openapi_doc::handle(path, query, headers, V3_KEY, v2_spec),
    }
}
