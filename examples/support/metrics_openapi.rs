//! The sample metrics server's discovery and OpenAPI documents, shaped like
//! metrics-server's (a generic apiserver serving `metrics.k8s.io/v1beta1`): aggregated
//! discovery v2 for `/apis`, the Swagger 2.0 spec at `/openapi/v2`, and the OpenAPI v3
//! root and group-version document at `/openapi/v3` and
//! `/openapi/v3/apis/metrics.k8s.io/v1beta1` (handler3's `?hash=` rules).

#![allow(unreachable_pub)]

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use http_body_util::Full;
use hyper::Response;
use kube_aggregator::discovery::{Negotiated, etag_of, negotiate, sha512_hex};
use serde_json::{Value, json};

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const PKG: &str = "io.k8s.metrics.pkg.apis.metrics.v1beta1";
/// The v3 root key of the group-version.
pub const V3_KEY: &str = "apis/metrics.k8s.io/v1beta1";

fn gvk(kind: &str) -> Value {
    json!([{"group": "metrics.k8s.io", "kind": kind, "version": "v1beta1"}])
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/definitions/{name}")})
}

fn with_description(mut schema: Value, description: &str) -> Value {
    schema["description"] = description.into();
    schema
}

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn usage() -> Value {
    json!({"type": "object", "description": "The memory and CPU used, by resource name.",
           "additionalProperties": reference(QUANTITY)})
}

fn kind_and_version(properties: &mut Value) {
    properties["apiVersion"] = string("The versioned schema of this object.");
    properties["kind"] = string("The REST resource this object represents.");
}

fn object(kind: &str, description: &str, mut properties: Value, required: &[&str]) -> Value {
    kind_and_version(&mut properties);
    let mut schema = json!({"type": "object", "description": description, "properties": properties,
                            "x-kubernetes-group-version-kind": gvk(kind)});
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    schema
}

fn list(kind: &str, item: &str) -> Value {
    object(
        &format!("{kind}List"),
        &format!("A list of {kind} objects."),
        json!({"metadata": with_description(reference(LIST_META), "Standard list metadata."),
               "items": {"type": "array", "description": format!("The {kind} objects."),
                         "items": reference(&format!("{PKG}.{item}"))}}),
        &["items"],
    )
}

fn list_operation(kind: &str, id: &str, namespaced: bool) -> Value {
    let mut parameters = vec![
        json!({"name": "labelSelector", "in": "query", "type": "string", "uniqueItems": true,
               "description": "Select the objects by their labels."}),
        json!({"name": "fieldSelector", "in": "query", "type": "string", "uniqueItems": true,
               "description": "Select the objects by their fields."}),
    ];
    if namespaced {
        parameters.push(json!({"name": "namespace", "in": "path", "required": true, "type": "string", "uniqueItems": true,
                               "description": "The namespace of the objects."}));
    }
    json!({"get": {"operationId": id, "consumes": ["*/*"], "produces": ["application/json"],
                   "schemes": ["https"], "tags": ["metricsV1beta1"], "parameters": parameters,
                   "responses": {"200": {"description": "OK", "schema": reference(&format!("{PKG}.{kind}List"))},
                                 "401": {"description": "Unauthorized"}},
                   "x-kubernetes-action": "list",
                   "x-kubernetes-group-version-kind": gvk(kind)[0]}})
}

fn get_operation(kind: &str, id: &str, namespaced: bool) -> Value {
    let mut parameters = vec![
        json!({"name": "name", "in": "path", "required": true, "type": "string", "uniqueItems": true,
                                     "description": format!("The name of the {kind}.")}),
    ];
    if namespaced {
        parameters.push(json!({"name": "namespace", "in": "path", "required": true, "type": "string", "uniqueItems": true,
                               "description": "The namespace of the object."}));
    }
    json!({"get": {"operationId": id, "consumes": ["*/*"], "produces": ["application/json"],
                   "schemes": ["https"], "tags": ["metricsV1beta1"], "parameters": parameters,
                   "responses": {"200": {"description": "OK", "schema": reference(&format!("{PKG}.{kind}"))},
                                 "401": {"description": "Unauthorized"}},
                   "x-kubernetes-action": "get",
                   "x-kubernetes-group-version-kind": gvk(kind)[0]}})
}

/// The Swagger 2.0 spec of `metrics.k8s.io/v1beta1`.
pub fn v2_spec() -> Value {
    let base = "/apis/metrics.k8s.io/v1beta1";
    let mut definitions = serde_json::Map::new();
    definitions.insert(
        format!("{PKG}.NodeMetrics"),
        object(
            "NodeMetrics",
            "NodeMetrics reports the resource usage of one node.",
            json!({"metadata": with_description(reference(META), "Standard object metadata; the name is the node's."),
                   "timestamp": {"type": "string", "format": "date-time", "description": "The end of the window the usage was measured over."},
                   "window": string("The length of the window the usage was measured over, as a Go duration."),
                   "usage": usage()}),
            &["timestamp", "window", "usage"],
        ),
    );
    definitions.insert(
        format!("{PKG}.NodeMetricsList"),
        list("NodeMetrics", "NodeMetrics"),
    );
    definitions.insert(
        format!("{PKG}.PodMetrics"),
        object(
            "PodMetrics",
            "PodMetrics reports the resource usage of one pod, by container.",
            json!({"metadata": with_description(reference(META), "Standard object metadata; name and namespace are the pod's."),
                   "timestamp": {"type": "string", "format": "date-time", "description": "The end of the window the usage was measured over."},
                   "window": string("The length of the window the usage was measured over, as a Go duration."),
                   "containers": {"type": "array", "description": "The usage of each container of the pod.",
                                  "items": reference(&format!("{PKG}.ContainerMetrics"))}}),
            &["timestamp", "window", "containers"],
        ),
    );
    definitions.insert(
        format!("{PKG}.PodMetricsList"),
        list("PodMetrics", "PodMetrics"),
    );
    definitions.insert(
        format!("{PKG}.ContainerMetrics"),
        json!({"type": "object", "description": "ContainerMetrics reports the resource usage of one container.",
               "required": ["name", "usage"],
               "properties": {"name": string("The container's name, as in the pod spec."), "usage": usage()}}),
    );
    definitions.insert(
        META.to_owned(),
        json!({"type": "object", "description": "Metadata every persisted resource has.",
               "properties": {
                   "name": string("The object's name, unique in its namespace."),
                   "namespace": string("The namespace the object is in; empty for cluster-scoped objects."),
                   "labels": {"type": "object", "description": "Key-value pairs to select objects by.", "additionalProperties": {"type": "string"}},
                   "creationTimestamp": {"type": "string", "format": "date-time", "description": "When the object was created."}}}),
    );
    definitions.insert(
        LIST_META.to_owned(),
        json!({"type": "object", "description": "Metadata of a list.",
               "properties": {"resourceVersion": string("The version of the list."),
                              "continue": string("A token to fetch the next page.")}}),
    );
    definitions.insert(
        QUANTITY.to_owned(),
        json!({"type": "string", "description": "A fixed-point number with a suffix, e.g. 250m or 5Gi."}),
    );
    json!({
        "swagger": "2.0",
        "info": {"title": "metrics-server", "version": "v0.7.2"},
        "paths": {
            format!("{base}/nodes"): list_operation("NodeMetrics", "listMetricsV1beta1NodeMetrics", false),
            format!("{base}/nodes/{{name}}"): get_operation("NodeMetrics", "readMetricsV1beta1NodeMetrics", false),
            format!("{base}/pods"): list_operation("PodMetrics", "listMetricsV1beta1PodMetricsForAllNamespaces", false),
            format!("{base}/namespaces/{{namespace}}/pods"): list_operation("PodMetrics", "listMetricsV1beta1NamespacedPodMetrics", true),
            format!("{base}/namespaces/{{namespace}}/pods/{{name}}"): get_operation("PodMetrics", "readMetricsV1beta1NamespacedPodMetrics", true),
        },
        "definitions": definitions,
        "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header",
                                                "description": "Bearer Token authentication"}},
        "security": [{"BearerToken": []}],
    })
}

/// The v3 group-version document (the v2 spec converted, as metrics-server's comes from
/// the same types) and its hash.
fn v3_document() -> (Bytes, String) {
    let v3 = kube_aggregator::openapi::v3::convert_v2_to_v3(&v2_spec());
    let json = Bytes::from(serde_json::to_vec(&v3).unwrap_or_default());
    let hash = sha512_hex(&json);
    (json, hash)
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

fn respond(
    code: StatusCode,
    content_type: &str,
    etag: Option<&HeaderValue>,
    body: Bytes,
) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(body));
    *res.status_mut() = code;
    let h = res.headers_mut();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    if let Some(e) = etag {
        h.insert(header::ETAG, e.clone());
    }
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    res
}

/// A document with its ETag, or 304 when `If-None-Match` names it.
fn with_etag(headers: &HeaderMap, content_type: &str, body: Bytes) -> Response<Full<Bytes>> {
    let etag = etag_of(&body);
    if headers.get(header::IF_NONE_MATCH) == Some(&etag) {
        return respond(
            StatusCode::NOT_MODIFIED,
            content_type,
            Some(&etag),
            Bytes::new(),
        );
    }
    respond(StatusCode::OK, content_type, Some(&etag), body)
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
        "/openapi/v2" => {
            let body = Bytes::from(serde_json::to_vec(&v2_spec()).unwrap_or_default());
            Some(with_etag(headers, "application/json", body))
        }
        "/openapi/v3" => {
            let (_, hash) = v3_document();
            let root = kube_aggregator::openapi::v3::root_document([(V3_KEY, hash.as_str())]);
            let body = Bytes::from(serde_json::to_vec(&root).unwrap_or_default());
            Some(with_etag(headers, "application/json", body))
        }
        _ => {
            let key = path.strip_prefix("/openapi/v3/")?;
            if key != V3_KEY {
                return Some(respond(
                    StatusCode::NOT_FOUND,
                    "text/plain; charset=utf-8",
                    None,
                    Bytes::from_static(b"404 page not found\n"),
                ));
            }
            let (json, hash) = v3_document();
            let asked = query.and_then(|q| {
                form_urlencoded::parse(q.as_bytes())
                    .find(|(k, _)| k == "hash")
                    .map(|(_, v)| v.into_owned())
            });
            let etag = HeaderValue::from_str(&format!("\"{hash}\"")).ok();
            match asked {
                Some(h) if h != hash => {
                    let mut res = respond(
                        StatusCode::MOVED_PERMANENTLY,
                        "application/json",
                        None,
                        Bytes::new(),
                    );
                    if let Ok(v) =
                        HeaderValue::from_str(&format!("/openapi/v3/{V3_KEY}?hash={hash}"))
                    {
                        res.headers_mut().insert(header::LOCATION, v);
                    }
                    Some(res)
                }
                asked => {
                    let mut res = respond(StatusCode::OK, "application/json", etag.as_ref(), json);
                    if asked.is_some() {
                        res.headers_mut().insert(
                            header::CACHE_CONTROL,
                            HeaderValue::from_static("public, immutable"),
                        );
                    }
                    Some(res)
                }
            }
        }
    }
}
