//! A read-only `apiregistration.k8s.io/v1` API over the registry, so `kubectl get
//! apiservices` works as against kube-apiserver: the APIServices with their current
//! status, as JSON objects or as the `meta.k8s.io/v1` Table kubectl asks for (columns
//! Name, Service, Available, Age, as kube-aggregator's table convertor prints them,
//! [`pkg/registry/apiservice/etcd/etcd.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/registry/apiservice/etcd/etcd.go)).
//!
//! Only `get` and `list` are served (and `get` of the `status` subresource); writes are
//! 405 `MethodNotAllowed`, since APIServices come from the host's
//! [`ApiServiceSource`](crate::source::ApiServiceSource). The list's `resourceVersion` is
//! the routing table's generation. Watches are refused (405), so `kubectl get -w` fails
//! fast instead of hanging. A list honours `labelSelector` and `fieldSelector`
//! (`metadata.name`, and `metadata.namespace`, always empty), and answers 400 for a
//! selector that does not parse or another field, as upstream's registry.
//!
//! Floor 7 of the import order (docs/architecture.md): uses `apiservice`, `authz`, `body`,
//! `discovery`, `gocompat`, `registry`, `status`; used by `aggregator`.

use std::time::{Duration, SystemTime};

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use serde_json::{Value, json};

use crate::apiservice::{API_GROUP, API_VERSION, ApiService};
use crate::authz::request_info::selector::{
    FieldRequirement, LabelRequirement, field_selector_error, parse_field_selector,
    parse_label_selector,
};
use crate::authz::{ApiPath, RequestInfo};
use crate::body::Body;
use crate::registry::RoutingTable;
use crate::status::{Status, plain_text_error};

/// The one resource of the group.
const RESOURCE: &str = "apiservices";

/// Answers a request under `/apis/apiregistration.k8s.io`, reading what it asks for from
/// the request's [`RequestInfo`] (the one authorization decided on).
pub(crate) fn handle<B>(
    table: &RoutingTable,
    req: &Request<B>,
    info: &RequestInfo,
) -> Response<Body> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Status::method_not_supported(
            API_GROUP,
            RESOURCE,
            &req.method().as_str().to_lowercase(),
        )
        .into_response();
    }
    if !info.is_resource_request {
        return match info.api_path() {
            ApiPath::Group(_) => json_response(&crate::discovery::api_group_json(
                API_GROUP,
                ["v1"].into_iter(),
            )),
            ApiPath::GroupVersion { version: "v1", .. } => json_response(&resource_list()),
            _ => not_found(),
        };
    }
    let parts: Vec<&str> = info.parts.iter().map(String::as_str).collect();
    if info.api_version != "v1" || info.resource != RESOURCE || !info.namespace.is_empty() {
        return not_found();
    }
    match (info.verb.as_str(), parts.as_slice()) {
        ("watch", _) => Status::method_not_supported(API_GROUP, RESOURCE, "watch").into_response(),
        ("list", [_]) => {
            let selector = match ListSelector::parse(info) {
                Ok(s) => s,
                Err(message) => {
                    return Status::failure(StatusCode::BAD_REQUEST, "BadRequest", message)
                        .into_response();
                }
            };
            let items: Vec<ApiService> = table
                .routes()
                .filter(|r| selector.matches(&r.apiservice))
                .map(|r| with_type_meta(&r.apiservice))
                .collect();
            if wants_table(req.headers()) {
                return table_response(&items);
            }
            let list = json!({"kind": "APIServiceList", "apiVersion": API_VERSION, "metadata": {"resourceVersion": table.generation().to_string()}, "items": items});
            json_response(&serde_json::to_vec(&list).unwrap_or_default())
        }
        ("get", [_, name]) | ("get", [_, name, "status"]) => match table.get(name) {
            None => Status::not_found(API_GROUP, RESOURCE, name).into_response(),
            Some(route) => {
                let svc = with_type_meta(&route.apiservice);
                if wants_table(req.headers()) {
                    return table_response(std::slice::from_ref(&svc));
                }
                json_response(&serde_json::to_vec(&svc).unwrap_or_default())
            }
        },
        _ => not_found(),
    }
}

/// A list's `labelSelector` and `fieldSelector`, as upstream's generic registry applies
/// them to APIServices (`pkg/registry/apiservice/strategy.go` `GetAttrs`: the object's
/// labels, and of its fields only `metadata.name`; the handler's field label conversion,
/// apimachinery `runtime.DefaultMetaV1FieldSelectorConversion`, admits `metadata.name`
/// and `metadata.namespace`, which an APIService, cluster-scoped, has empty).
struct ListSelector {
    labels: Vec<LabelRequirement>,
    fields: Vec<FieldRequirement>,
}

impl ListSelector {
    /// The selectors of `info`'s query; the message of upstream's 400 `BadRequest` for
    /// one that does not parse or selects on another field (the field selector's texts
    /// are upstream's; a label selector's names the selector where upstream's lexer
    /// names the token it stopped at).
    fn parse(info: &RequestInfo) -> Result<ListSelector, String> {
        let labels = parse_label_selector(&info.label_selector).map_err(|_| {
            format!(
                "unable to parse label selector {}",
                crate::gocompat::quote(&info.label_selector)
            )
        })?;
        let fields = parse_field_selector(&info.field_selector).map_err(|_| {
            field_selector_error(&info.field_selector)
                .unwrap_or_else(|| format!("invalid selector: '{}'", info.field_selector))
        })?;
        if let Some(unknown) = fields
            .iter()
            .find(|f| f.field != "metadata.name" && f.field != "metadata.namespace")
        {
            return Err(format!(
                "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
                crate::gocompat::quote(&unknown.field)
            ));
        }
        Ok(ListSelector { labels, fields })
    }

    /// Whether `svc` is selected.
    fn matches(&self, svc: &ApiService) -> bool {
        self.labels.iter().all(|r| r.matches(&svc.metadata.labels))
            && self.fields.iter().all(|f| {
                f.matches(match f.field.as_str() {
                    "metadata.name" => svc.metadata.name.as_str(),
                    _ => "",
                })
            })
    }
}

/// Go's mux 404 (`404 page not found`, plain text) for paths under the group that name
/// nothing, as kube-apiserver answers them.
fn not_found() -> Response<Body> {
    plain_text_error(StatusCode::NOT_FOUND, "404 page not found")
}

/// The stored object with `apiVersion` and `kind` set, as the API answers it.
fn with_type_meta(svc: &ApiService) -> ApiService {
    let mut svc = svc.clone();
    svc.api_version = API_VERSION.to_owned();
    svc.kind = "APIService".to_owned();
    svc
}

/// The group-version's `APIResourceList` (`kubectl api-resources` reads it): `apiservices`
/// with `get` and `list`, and its `status` subresource.
fn resource_list() -> Vec<u8> {
    let doc = json!({
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": API_VERSION,
        "resources": [
            {"name": "apiservices", "singularName": "apiservice", "namespaced": false, "kind": "APIService",
             "verbs": ["get", "list"], "categories": ["api-extensions"]},
            {"name": "apiservices/status", "singularName": "", "namespaced": false, "kind": "APIService",
             "verbs": ["get"]}
        ]
    });
    serde_json::to_vec(&doc).unwrap_or_default()
}

/// True when `Accept` names the `meta.k8s.io` Table (`application/json;as=Table;v=v1;g=meta.k8s.io`).
fn wants_table(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|media| {
            let params: Vec<&str> = media.split(';').map(str::trim).collect();
            params.first().is_some_and(|m| *m == "application/json")
                && params.contains(&"as=Table")
                && params.contains(&"g=meta.k8s.io")
                && (params.contains(&"v=v1") || params.contains(&"v=v1beta1"))
        })
}

/// A 200 with `bytes` as `application/json`.
fn json_response(bytes: &[u8]) -> Response<Body> {
    let mut res = Response::new(Body::full(bytes.to_vec()));
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res
}

/// `items` as a `meta.k8s.io/v1` Table: one row per APIService with the cells kubectl
/// prints (`Local` for a local one's service; `False (FailedDiscoveryCheck)` for an
/// unavailable one), each row's object as `PartialObjectMetadata`.
fn table_response(items: &[ApiService]) -> Response<Body> {
    let rows: Vec<Value> = items
        .iter()
        .map(|svc| {
            let service = svc.spec.service.as_ref().map_or_else(|| "Local".to_owned(), |s| format!("{}/{}", s.namespace, s.name));
            let available = match svc.available_condition() {
                None => "Unknown".to_owned(),
                Some(c) if c.status == "True" || c.reason.is_empty() => c.status.clone(),
                Some(c) => format!("{} ({})", c.status, c.reason),
            };
            let age = svc.metadata.creation_timestamp.as_deref().map_or_else(|| "<unknown>".to_owned(), human_age);
            json!({
                "cells": [svc.metadata.name, service, available, age],
                "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": svc.metadata},
            })
        })
        .collect();
    let table = json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0},
            {"name": "Service", "type": "string", "format": "", "description": "The reference to the service that hosts this API endpoint.", "priority": 0},
            {"name": "Available", "type": "string", "format": "", "description": "Whether this service is available.", "priority": 0},
            {"name": "Age", "type": "string", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0}
        ],
        "rows": rows,
    });
    let mut res = Response::new(Body::full(serde_json::to_vec(&table).unwrap_or_default()));
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json;as=Table;v=v1;g=meta.k8s.io"),
    );
    res
}

/// Age as apimachinery `duration.HumanDuration` prints it (`45s`, `12m`, `3h4m`, `5d`),
/// measured against the system clock; `<invalid>` for a timestamp that does not parse.
fn human_age(rfc3339: &str) -> String {
    let Ok(created) = humantime::parse_rfc3339_weak(rfc3339) else {
        return "<invalid>".to_owned();
    };
    let age = SystemTime::now()
        .duration_since(created)
        .unwrap_or(Duration::ZERO);
    human_duration(age)
}

/// apimachinery's `HumanDuration`
/// ([`pkg/util/duration/duration.go`](https://github.com/kubernetes/apimachinery/blob/master/pkg/util/duration/duration.go)):
/// two units below a few hours and a few days, one above, years from two years on.
pub(crate) fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=119 => format!("{s}s"),
        120..=599 => {
            let (m, r) = (s / 60, s % 60);
            if r == 0 {
                format!("{m}m")
            } else {
                format!("{m}m{r}s")
            }
        }
        600..=10_799 => format!("{}m", s / 60),
        10_800..=28_799 => {
            let (h, m) = (s / 3600, (s % 3600) / 60);
            if m == 0 {
                format!("{h}h")
            } else {
                format!("{h}h{m}m")
            }
        }
        28_800..=172_799 => format!("{}h", s / 3600),
        _ => {
            let days = s / 86_400;
            if days < 8 {
                let h = (s % 86_400) / 3600;
                if h == 0 {
                    format!("{days}d")
                } else {
                    format!("{days}d{h}h")
                }
            } else if days < 365 * 2 {
                format!("{days}d")
            } else {
                format!("{}y", days / 365)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_follow_apimachinery() {
        assert_eq!(human_duration(Duration::from_secs(45)), "45s");
        assert_eq!(human_duration(Duration::from_secs(150)), "2m30s");
        assert_eq!(human_duration(Duration::from_secs(1200)), "20m");
        assert_eq!(human_duration(Duration::from_secs(3 * 3600 + 240)), "3h4m");
        assert_eq!(human_duration(Duration::from_secs(3 * 86_400)), "3d");
    }

    #[test]
    fn table_accept_is_recognised() {
        let req = http::Request::get("/apis/apiregistration.k8s.io/v1/apiservices")
            .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")
            .body(())
            .unwrap();
        assert!(wants_table(req.headers()));
        let plain = http::Request::get("/")
            .header("accept", "application/json")
            .body(())
            .unwrap();
        assert!(!wants_table(plain.headers()));
    }
}
