//! The gateway's inner service: a tiny read-only core API over [`super::cluster`], enough
//! for `kubectl version`, discovery, `kubectl get nodes|pods|namespaces` and `kubectl top`.
//!
//! Paths, bodies and errors follow kube-apiserver:
//! - `/version` (version.Info), `/api` (APIVersions), `/api/v1` (APIResourceList), `/`
//!   (RootPaths), and `/healthz`, `/livez`, `/readyz` (with `/ping` and `?verbose`);
//! - `/openapi/v2`, `/openapi/v3` and `/openapi/v3/api/v1` ([`super::core_openapi`]);
//! - `/api/v1/nodes[/<name>]`, `/api/v1/pods`, `/api/v1/namespaces[/<ns>]`,
//!   `/api/v1/namespaces/<ns>/pods[/<name>]` as JSON, YAML, or a `meta.k8s.io` Table when
//!   `Accept` asks for `as=Table` (kubectl get). As in kube-apiserver, a Table is sent with
//!   `Content-Type: application/json` and every column (kubectl hides priority-1 columns
//!   without `-o wide`), and rows carry `PartialObjectMetadata` unless `includeObject` says
//!   otherwise. Protobuf is never offered, so an `Accept` preferring it gets JSON.
//!   Lists honour equality-based `fieldSelector` and `labelSelector`.
//! - Errors: a missing object is a 404 `Status` (`nodes "x" not found`); an unknown resource
//!   under `/api/v1` is a 404 `Status` from the route table; any other path gets Go's
//!   plain-text `404 page not found`; methods other than GET and HEAD get a 405 `Status`;
//!   watch gets the storage-level 405 (nothing here changes); an `Accept` with nothing
//!   servable gets 406.
//!
//! HEAD responses keep their body; the HTTP server drops it on the wire.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Method, Response, StatusCode, header};
use http_body_util::Full;
use serde::Serialize;
use serde_json::{Value, json};

use super::cluster::{self, CREATED, Node, Pod};

/// The `gitVersion` `/version` reports.
pub const GIT_VERSION: &str = "v1.32.0-kube-aggregator";

/// The namespaces the sample cluster has.
pub const NAMESPACES: &[&str] = &["default", "kube-system"];

/// Answers one request; see the module docs for the routes. Never fails: every problem
/// becomes an error response.
pub fn handle(req: &Parts) -> Response<Full<Bytes>> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    handle_at(req, i64::try_from(now).unwrap_or(i64::MAX))
}

/// [`handle`] with the current time (Unix seconds) supplied, so table ages are testable.
fn handle_at(req: &Parts, now: i64) -> Response<Full<Bytes>> {
    let path = req.uri.path();
    let query = req.uri.query().unwrap_or("");
    let read_only = req.method == Method::GET || req.method == Method::HEAD;
    if read_only {
        if let Some(res) = super::core_openapi::handle(path, req.uri.query(), &req.headers) {
            return res;
        }
    }
    let route = match path {
        "/healthz" | "/livez" | "/readyz" | "/healthz/ping" | "/livez/ping" | "/readyz/ping" => {
            Route::Health(path.trim_end_matches("/ping").trim_start_matches('/'))
        }
        "/" => Route::Discovery(root_paths()),
        "/version" => Route::Discovery(version_info()),
        "/api" | "/api/" => Route::Discovery(api_versions(req)),
        "/api/v1" | "/api/v1/" => Route::Discovery(api_resource_list()),
        _ => match path.strip_prefix("/api/v1/") {
            Some(rest) => Route::Resource(parse_resource_path(rest)),
            None => return page_not_found(),
        },
    };
    if !read_only {
        return status_response(Status::generic(StatusCode::METHOD_NOT_ALLOWED));
    }
    let accept = req
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    match route {
        Route::Health(check) => health(check, query),
        Route::Discovery(body) => {
            match negotiate(accept, false, matches!(path, "/api" | "/api/")) {
                Some(Format::Aggregated(version)) => aggregated_core(version),
                Some(format) => encode(format, &body),
                None => status_response(Status::not_acceptable()),
            }
        }
        Route::Resource(None) => status_response(Status::generic(StatusCode::NOT_FOUND)),
        Route::Resource(Some(target)) => {
            if target.name.is_none() && query_flag(query, "watch") {
                return status_response(Status::method_not_supported(target.resource, "watch"));
            }
            let Some(format) = negotiate(accept, true, false) else {
                return status_response(Status::not_acceptable());
            };
            match lookup(&target) {
                None => {
                    let name = target.name.unwrap_or_default();
                    status_response(Status::not_found(target.resource, name))
                }
                Some(mut objects) => {
                    if target.name.is_none() {
                        if let Err(message) = select(query, &mut objects) {
                            return status_response(Status::bad_request(message));
                        }
                    }
                    match (format, target.name, objects.first()) {
                        (Format::Table(version), ..) => {
                            let include = query_value(query, "includeObject").unwrap_or("Metadata");
                            encode(
                                Format::Json,
                                &table(&target, &objects, version, include, now),
                            )
                        }
                        (_, Some(_), Some((_, object))) => encode(format, object),
                        _ => encode(format, &list(&target, &objects)),
                    }
                }
            }
        }
    }
}

enum Route<'a> {
    Health(&'a str),
    Discovery(Value),
    Resource(Option<Target<'a>>),
}

/// A resource request: `resource` in `namespace` (pods only), one `name` or all.
struct Target<'a> {
    resource: &'static str,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
}

fn parse_resource_path(rest: &str) -> Option<Target<'_>> {
    let parts: Vec<&str> = rest.split('/').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    let target = |resource, namespace, name| {
        Some(Target {
            resource,
            namespace,
            name,
        })
    };
    match parts[..] {
        ["nodes"] => target("nodes", None, None),
        ["nodes", name] => target("nodes", None, Some(name)),
        ["pods"] => target("pods", None, None),
        ["namespaces"] => target("namespaces", None, None),
        ["namespaces", name] => target("namespaces", None, Some(name)),
        ["namespaces", ns, "pods"] => target("pods", Some(ns), None),
        ["namespaces", ns, "pods", name] => target("pods", Some(ns), Some(name)),
        _ => None,
    }
}

/// The matching objects as (name, full object); `None` when a named object does not exist.
fn lookup(target: &Target<'_>) -> Option<Vec<(&'static str, Value)>> {
    let all: Vec<(&'static str, Value)> = match target.resource {
        "nodes" => cluster::NODES
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name, node_object(i, n)))
            .collect(),
        "namespaces" => NAMESPACES
            .iter()
            .map(|ns| (*ns, namespace_object(ns)))
            .collect(),
        _ => cluster::PODS
            .iter()
            .enumerate()
            .filter(|(_, p)| target.namespace.is_none_or(|ns| ns == p.namespace))
            .map(|(i, p)| (p.name, pod_object(i, p)))
            .collect(),
    };
    match target.name {
        None => Some(all),
        Some(name) => all
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|found| vec![found]),
    }
}

#[derive(Clone, Copy)]
enum Op {
    Eq,
    Ne,
    Exists,
    Absent,
}

/// Applies the list's `fieldSelector` and `labelSelector`. Only equality-based terms are
/// supported (`k=v`, `k==v`, `k!=v`, and for labels `k` and `!k`, comma-joined), over the
/// fields kube-apiserver indexes for these kinds (`metadata.name`, `metadata.namespace`,
/// `spec.nodeName`, `status.phase`); `kubectl describe node` relies on `spec.nodeName`.
fn select(query: &str, objects: &mut Vec<(&'static str, Value)>) -> Result<(), String> {
    for (param, labels) in [("fieldSelector", false), ("labelSelector", true)] {
        let raw = percent_decode(query_value(query, param).unwrap_or(""));
        if raw.contains('(') {
            return Err(format!(
                "{param} {raw:?}: only equality-based requirements are supported"
            ));
        }
        for term in raw.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (key, op, value) = if let Some((k, v)) = term.split_once("!=") {
                (k, Op::Ne, v)
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (k, Op::Eq, v)
            } else if !labels {
                return Err(format!(
                    "invalid field selector {term:?}: expected key=value or key!=value"
                ));
            } else if let Some(k) = term.strip_prefix('!') {
                (k, Op::Absent, "")
            } else {
                (term, Op::Exists, "")
            };
            let (key, value) = (key.trim(), value.trim());
            let pointer = if labels {
                format!(
                    "/metadata/labels/{}",
                    key.replace('~', "~0").replace('/', "~1")
                )
            } else {
                match key {
                    "metadata.name" | "metadata.namespace" | "spec.nodeName" | "status.phase" => {
                        format!("/{}", key.replace('.', "/"))
                    }
                    _ => return Err(format!("field label not supported: {key}")),
                }
            };
            objects.retain(|(_, object)| {
                let actual = object.pointer(&pointer).and_then(Value::as_str);
                match op {
                    Op::Eq => actual == Some(value),
                    Op::Ne => actual != Some(value),
                    Op::Exists => actual.is_some(),
                    Op::Absent => actual.is_none(),
                }
            });
        }
    }
    Ok(())
}

/// Decodes a query value (`%XX` and `+`); malformed escapes are kept as written.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match (escaped, bytes[i]) {
            (Some(byte), _) => {
                out.push(byte);
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, other) => {
                out.push(other);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn list(target: &Target<'_>, objects: &[(&str, Value)]) -> Value {
    let kind = match target.resource {
        "nodes" => "NodeList",
        "pods" => "PodList",
        _ => "NamespaceList",
    };
    // List items carry no kind/apiVersion of their own, as kube-apiserver sends them.
    let items: Vec<Value> = objects
        .iter()
        .map(|(_, object)| {
            let mut object = object.clone();
            if let Some(map) = object.as_object_mut() {
                map.remove("kind");
                map.remove("apiVersion");
            }
            object
        })
        .collect();
    json!({"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items})
}

fn metadata(namespace: Option<&str>, name: &str, labels: Value) -> Value {
    let mut meta = json!({
        "name": name,
        "uid": uid(namespace.unwrap_or(""), name),
        "resourceVersion": "1",
        "creationTimestamp": CREATED,
        "labels": labels,
    });
    if let (Some(ns), Some(map)) = (namespace, meta.as_object_mut()) {
        map.insert("namespace".to_owned(), json!(ns));
    }
    meta
}

/// A stable, UUID-shaped uid derived from the object's identity (FNV-1a, two seeds).
fn uid(namespace: &str, name: &str) -> String {
    let hash = |seed: u64| {
        namespace
            .bytes()
            .chain([b'/'])
            .chain(name.bytes())
            .fold(seed, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            })
    };
    let hex = format!(
        "{:016x}{:016x}",
        hash(0xcbf2_9ce4_8422_2325),
        hash(0x6c62_272e_07bb_0142)
    );
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

fn node_ip(index: usize) -> String {
    format!("10.0.0.{}", 11 + index)
}

fn node_object(index: usize, node: &Node) -> Value {
    let cpu = if node.cpu_millis % 1000 == 0 {
        (node.cpu_millis / 1000).to_string()
    } else {
        format!("{}m", node.cpu_millis)
    };
    let resources = json!({"cpu": cpu, "memory": format!("{}Ki", node.memory_kib), "pods": "110"});
    let role = if index == 0 {
        "control-plane"
    } else {
        "worker"
    };
    let mut labels = json!({
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": node.name, "kubernetes.io/os": "linux",
    });
    if let Some(map) = labels.as_object_mut() {
        map.insert(format!("node-role.kubernetes.io/{role}"), json!(""));
    }
    let cidr = format!("10.244.{index}.0/24");
    json!({
        "kind": "Node", "apiVersion": "v1",
        "metadata": metadata(None, node.name, labels),
        "spec": {"podCIDR": cidr, "podCIDRs": [cidr]},
        "status": {
            // Nothing is reserved for the system, so capacity equals allocatable.
            "capacity": resources, "allocatable": resources,
            "conditions": [{
                "type": "Ready", "status": "True", "lastHeartbeatTime": CREATED,
                "lastTransitionTime": CREATED, "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
            }],
            "addresses": [
                {"type": "InternalIP", "address": node_ip(index)},
                {"type": "Hostname", "address": node.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": uid("machine", node.name).replace('-', ""),
                "systemUUID": uid("system", node.name), "bootID": uid("boot", node.name),
                "kernelVersion": "6.8.0-48-generic", "osImage": "Ubuntu 24.04.1 LTS",
                "containerRuntimeVersion": "containerd://1.7.22", "kubeletVersion": "v1.32.0",
                "kubeProxyVersion": "v1.32.0", "operatingSystem": "linux", "architecture": "amd64",
            },
        },
    })
}

fn namespace_object(name: &str) -> Value {
    json!({
        "kind": "Namespace", "apiVersion": "v1",
        "metadata": metadata(None, name, json!({"kubernetes.io/metadata.name": name})),
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    })
}

fn pod_object(index: usize, pod: &Pod) -> Value {
    let node_index = cluster::NODES
        .iter()
        .position(|n| n.name == pod.node)
        .unwrap_or(0);
    let pod_ip = format!("10.244.{node_index}.{}", 10 + index);
    // Deployment pods are named <app>-<template hash>-<suffix>.
    let mut parts = pod.name.rsplitn(3, '-');
    let (_, hash, app) = (parts.next(), parts.next(), parts.next());
    let labels = match (app, hash) {
        (Some(app), Some(hash)) => json!({"app": app, "pod-template-hash": hash}),
        _ => json!({"app": pod.name}),
    };
    let containers: Vec<Value> = pod.containers.iter()
        .map(|c| json!({"name": c.name, "image": c.image, "resources": {}, "imagePullPolicy": "IfNotPresent"}))
        .collect();
    let statuses: Vec<Value> = pod
        .containers
        .iter()
        .map(|c| {
            json!({
                "name": c.name, "state": {"running": {"startedAt": CREATED}}, "ready": true,
                "restartCount": 0, "image": c.image, "imageID": "", "started": true,
                "containerID": format!("containerd://{}", uid(pod.name, c.name).replace('-', "")),
            })
        })
        .collect();
    let conditions = ["Initialized", "Ready", "ContainersReady", "PodScheduled"]
        .map(|kind| json!({"type": kind, "status": "True", "lastTransitionTime": CREATED}));
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": metadata(Some(pod.namespace), pod.name, labels),
        "spec": {
            "containers": containers, "restartPolicy": "Always", "nodeName": pod.node,
            "serviceAccountName": "default", "schedulerName": "default-scheduler",
        },
        "status": {
            "phase": "Running",
            "conditions": conditions,
            "hostIP": node_ip(node_index), "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
            "startTime": CREATED, "containerStatuses": statuses, "qosClass": "BestEffort",
        },
    })
}

/// One Table column: (name, description, priority); priority 1 shows only with `-o wide`.
type Column = (&'static str, &'static str, u8);

const AGE: Column = (
    "Age",
    "Time since the object was created (metadata.creationTimestamp).",
    0,
);
const NAME: Column = (
    "Name",
    "Name of the object, unique within its namespace (metadata.name).",
    0,
);

/// Columns and cell order of kube-apiserver's printers (pkg/printers/internalversion).
#[rustfmt::skip]
fn columns(resource: &str) -> &'static [Column] {
    match resource {
        "nodes" => &[
            NAME,
            ("Status", "The status of the node", 0),
            ("Roles", "The roles of the node", 0),
            AGE,
            ("Version", "Kubelet version reported by the node.", 0),
            ("Internal-IP", "Addresses reachable to the node.", 1),
            ("External-IP", "Addresses reachable to the node.", 1),
            ("OS-Image", "OS image reported by the node.", 1),
            ("Kernel-Version", "Kernel version reported by the node.", 1),
            ("Container-Runtime", "Container runtime version reported by the node.", 1),
        ],
        "pods" => &[
            NAME,
            ("Ready", "The aggregate readiness state of this pod for accepting traffic.", 0),
            ("Status", "The aggregate status of the containers in this pod.", 0),
            ("Restarts", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.", 0),
            AGE,
            ("IP", "IP address allocated to the pod.", 1),
            ("Node", "The node the pod is scheduled on.", 1),
            ("Nominated Node", "The node the scheduler nominated for preemption, if any.", 1),
            ("Readiness Gates", "Extra conditions evaluated for pod readiness.", 1),
        ],
        _ => &[NAME, ("Status", "The status of the namespace", 0), AGE],
    }
}

fn cells(resource: &str, object: &Value, age: &str) -> Vec<Value> {
    let s = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let name = s("/metadata/name");
    match resource {
        "nodes" => {
            let mut roles: Vec<&str> = object
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|labels| labels.keys())
                .filter_map(|k| {
                    k.strip_prefix("node-role.kubernetes.io/")
                        .filter(|r| !r.is_empty())
                })
                .collect();
            roles.sort_unstable();
            let roles = if roles.is_empty() {
                "<none>".to_owned()
            } else {
                roles.join(",")
            };
            let ready = s("/status/conditions/0/status") == "True";
            let info = |f: &str| s(&format!("/status/nodeInfo/{f}"));
            vec![
                json!(name),
                json!(if ready { "Ready" } else { "NotReady" }),
                json!(roles),
                json!(age),
                json!(info("kubeletVersion")),
                json!(s("/status/addresses/0/address")),
                json!("<none>"),
                json!(info("osImage")),
                json!(info("kernelVersion")),
                json!(info("containerRuntimeVersion")),
            ]
        }
        "pods" => {
            let statuses = object
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array);
            let total = statuses.map_or(0, Vec::len);
            let ready = statuses.map_or(0, |all| all.iter().filter(|c| c["ready"] == true).count());
            vec![
                json!(name),
                json!(format!("{ready}/{total}")),
                json!(s("/status/phase")),
                json!("0"),
                json!(age),
                json!(s("/status/podIP")),
                json!(s("/spec/nodeName")),
                json!("<none>"),
                json!("<none>"),
            ]
        }
        _ => vec![json!(name), json!(s("/status/phase")), json!(age)],
    }
}

/// A `meta.k8s.io/<version>` Table; `include` is the `includeObject` query parameter.
fn table(
    target: &Target<'_>,
    objects: &[(&str, Value)],
    version: &str,
    include: &str,
    now: i64,
) -> Value {
    let age =
        parse_rfc3339(CREATED).map_or_else(|| "<unknown>".to_owned(), |t| human_duration(now - t));
    let api_version = format!("meta.k8s.io/{version}");
    let columns: Vec<Value> = columns(target.resource).iter()
        .map(|(name, description, priority)| {
            let format = if *name == "Name" { "name" } else { "" };
            json!({"name": name, "type": "string", "format": format, "description": description, "priority": priority})
        })
        .collect();
    let rows: Vec<Value> = objects.iter()
        .map(|(_, object)| {
            let mut row = json!({"cells": cells(target.resource, object, &age)});
            let embedded = match include {
                "None" => None,
                "Object" => Some(object.clone()),
                _ => Some(json!({"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": object["metadata"]})),
            };
            if let (Some(embedded), Some(map)) = (embedded, row.as_object_mut()) {
                map.insert("object".to_owned(), embedded);
            }
            row
        })
        .collect();
    json!({
        "kind": "Table", "apiVersion": api_version, "metadata": {"resourceVersion": "1"},
        "columnDefinitions": columns, "rows": rows,
    })
}

/// Seconds since the Unix epoch of a `YYYY-MM-DDTHH:MM:SSZ` timestamp.
fn parse_rfc3339(s: &str) -> Option<i64> {
    let at = super::extension_server::parse_rfc3339(s)?;
    i64::try_from(at.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs()).ok()
}

/// apimachinery's `duration.HumanDuration` (the Age column): two significant units at most.
fn human_duration(seconds: i64) -> String {
    match seconds {
        ..-1 => return "<invalid>".to_owned(),
        -1 => return "0s".to_owned(),
        0..120 => return format!("{seconds}s"),
        _ => {}
    }
    let (minutes, hours) = (seconds / 60, seconds / 3600);
    let (days, years) = (hours / 24, hours / 24 / 365);
    let with = |big: i64, unit: &str, small: i64, small_unit: &str| {
        if small == 0 {
            format!("{big}{unit}")
        } else {
            format!("{big}{unit}{small}{small_unit}")
        }
    };
    if minutes < 10 {
        with(minutes, "m", seconds % 60, "s")
    } else if minutes < 180 {
        format!("{minutes}m")
    } else if hours < 8 {
        with(hours, "h", minutes % 60, "m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        with(days, "d", hours % 24, "h")
    } else if hours < 24 * 365 * 2 {
        format!("{days}d")
    } else if hours < 24 * 365 * 8 {
        with(years, "y", days % 365, "d")
    } else {
        format!("{years}y")
    }
}

fn version_info() -> Value {
    // Go's GOOS/GOARCH spelling, which clients expect in `platform`.
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    json!({
        "major": "1", "minor": "32", "gitVersion": GIT_VERSION, "gitCommit": "",
        "gitTreeState": "", "buildDate": "", "goVersion": "", "compiler": "rustc",
        "platform": format!("{}/{arch}", std::env::consts::OS),
    })
}

fn api_versions(req: &Parts) -> Value {
    let host = req.headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let address = host
        .or_else(|| req.uri.authority().map(|a| a.as_str()))
        .unwrap_or("");
    json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    })
}

fn api_resource_list() -> Value {
    // Only the verbs served here; kube-apiserver also lists create, update, watch...
    let resource = |name: &str, singular: &str, namespaced: bool, kind: &str, short: &str| {
        json!({"name": name, "singularName": singular, "namespaced": namespaced, "kind": kind,
               "verbs": ["get", "list"], "shortNames": [short]})
    };
    let mut pods = resource("pods", "pod", true, "Pod", "po");
    if let Some(map) = pods.as_object_mut() {
        map.insert("categories".to_owned(), json!(["all"]));
    }
    json!({
        "kind": "APIResourceList", "groupVersion": "v1",
        "resources": [
            resource("namespaces", "namespace", false, "Namespace", "ns"),
            resource("nodes", "node", false, "Node", "no"),
            pods,
        ],
    })
}

/// `/api` as aggregated discovery (`apidiscovery.k8s.io/v2` or `v2beta1`): the core group
/// with the resources of [`api_resource_list`], as kube-apiserver answers kubectl.
fn aggregated_core(version: &'static str) -> Response<Full<Bytes>> {
    let legacy = api_resource_list();
    let resources: Vec<Value> = legacy["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let scope = if r["namespaced"] == true { "Namespaced" } else { "Cluster" };
            let mut entry = json!({
                "resource": r["name"], "responseKind": {"group": "", "version": "v1", "kind": r["kind"]},
                "scope": scope, "singularResource": r["singularName"], "verbs": r["verbs"],
                "shortNames": r["shortNames"],
            });
            if let Some(c) = r.get("categories") {
                entry["categories"] = c.clone();
            }
            entry
        })
        .collect();
    let body = json!({
        "kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": [{"metadata": {}, "versions": [{"version": "v1", "resources": resources, "freshness": "Current"}]}],
    });
    let content_type = if version == "v2" {
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    } else {
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
    };
    let mut bytes = serde_json::to_vec(&body).unwrap_or_default();
    bytes.push(b'\n');
    respond(StatusCode::OK, content_type, bytes)
}

fn root_paths() -> Value {
    json!({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v2", "/openapi/v3", "/openapi/v3/", "/readyz", "/version"]})
}

fn health(check: &str, query: &str) -> Response<Full<Bytes>> {
    let body = if query_value(query, "verbose").is_some() {
        format!("[+]ping ok\n{check} check passed\n")
    } else {
        "ok".to_owned()
    };
    respond(
        StatusCode::OK,
        "text/plain; charset=utf-8",
        body.into_bytes(),
    )
}

fn page_not_found() -> Response<Full<Bytes>> {
    respond(
        StatusCode::NOT_FOUND,
        "text/plain; charset=utf-8",
        b"404 page not found\n".to_vec(),
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Yaml,
    /// A Table in `meta.k8s.io/<version>`.
    Table(&'static str),
    /// An `APIGroupDiscoveryList` in `apidiscovery.k8s.io/<version>` (for `/api` only).
    Aggregated(&'static str),
}

/// Picks the first servable media range of `Accept`, by `q` then order. Ranges that ask for
/// another representation (`as=...`) or for protobuf are skipped; `None` means 406.
fn negotiate(accept: Option<&str>, allow_table: bool, allow_aggregated: bool) -> Option<Format> {
    let accept = accept.map(str::trim).filter(|a| !a.is_empty());
    let Some(accept) = accept else {
        return Some(Format::Json);
    };
    let mut ranges: Vec<(f32, Option<Format>)> = accept
        .split(',')
        .map(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let (mut q, mut as_kind, mut group, mut version) = (1.0f32, None, None, None);
            for param in parts {
                let (key, value) = param.split_once('=').unwrap_or((param, ""));
                match key.trim().to_ascii_lowercase().as_str() {
                    "q" => q = value.trim().parse().unwrap_or(0.0),
                    "as" => as_kind = Some(value.trim()),
                    "g" => group = Some(value.trim()),
                    "v" => version = Some(value.trim()),
                    _ => {}
                }
            }
            let json_like = matches!(media.as_str(), "application/json" | "application/*" | "*/*");
            let format = match (as_kind, group, version) {
                (None, _, _) if json_like => Some(Format::Json),
                (None, _, _) if media == "application/yaml" => Some(Format::Yaml),
                (Some("Table"), Some("meta.k8s.io"), Some("v1")) if json_like && allow_table => {
                    Some(Format::Table("v1"))
                }
                (Some("Table"), Some("meta.k8s.io"), Some("v1beta1"))
                    if json_like && allow_table =>
                {
                    Some(Format::Table("v1beta1"))
                }
                (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some(v))
                    if json_like && allow_aggregated && (v == "v2" || v == "v2beta1") =>
                {
                    Some(Format::Aggregated(if v == "v2" { "v2" } else { "v2beta1" }))
                }
                _ => None,
            };
            (q, format)
        })
        .filter(|(q, _)| *q > 0.0)
        .collect();
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0));
    ranges.into_iter().find_map(|(_, format)| format)
}

fn encode(format: Format, body: &Value) -> Response<Full<Bytes>> {
    let encoded = match format {
        Format::Yaml => serde_yaml_ng::to_string(body)
            .map(|s| ("application/yaml", s.into_bytes()))
            .map_err(|e| e.to_string()),
        _ => serde_json::to_vec(body)
            .map(|v| ("application/json", v))
            .map_err(|e| e.to_string()),
    };
    match encoded {
        Ok((content_type, mut bytes)) => {
            if content_type == "application/json" {
                bytes.push(b'\n');
            }
            respond(StatusCode::OK, content_type, bytes)
        }
        Err(e) => respond(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain; charset=utf-8",
            e.into_bytes(),
        ),
    }
}

fn respond(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = [
        (header::CONTENT_TYPE, content_type),
        (header::CACHE_CONTROL, "no-cache, private"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    for (name, value) in headers {
        response
            .headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
    response
}

/// `metav1.Status`, serialized in upstream field order.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    kind: &'static str,
    api_version: &'static str,
    metadata: Value,
    status: &'static str,
    message: String,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<Value>,
    code: u16,
}

impl Status {
    fn new(
        code: StatusCode,
        reason: &'static str,
        message: String,
        details: Option<Value>,
    ) -> Status {
        let (kind, api_version, status) = ("Status", "v1", "Failure");
        Status {
            kind,
            api_version,
            metadata: json!({}),
            status,
            message,
            reason,
            details,
            code: code.as_u16(),
        }
    }

    /// The route table's own 404/405 (apimachinery `NewGenericServerResponse`).
    fn generic(code: StatusCode) -> Status {
        let (reason, message) = if code == StatusCode::METHOD_NOT_ALLOWED {
            (
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )
        } else {
            (
                "NotFound",
                "the server could not find the requested resource",
            )
        };
        Status::new(code, reason, message.to_owned(), Some(json!({})))
    }

    fn not_found(resource: &str, name: &str) -> Status {
        let message = format!("{resource} {name:?} not found");
        Status::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            message,
            Some(json!({"name": name, "kind": resource})),
        )
    }

    fn method_not_supported(resource: &str, action: &str) -> Status {
        let message = format!("{action} is not supported on resources of kind {resource:?}");
        Status::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            message,
            Some(json!({"kind": resource})),
        )
    }

    fn not_acceptable() -> Status {
        let message =
            "only the following media types are accepted: application/json, application/yaml";
        Status::new(
            StatusCode::NOT_ACCEPTABLE,
            "NotAcceptable",
            message.to_owned(),
            None,
        )
    }

    fn bad_request(message: String) -> Status {
        Status::new(StatusCode::BAD_REQUEST, "BadRequest", message, None)
    }
}

fn status_response(status: Status) -> Response<Full<Bytes>> {
    let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut body = serde_json::to_vec(&status).unwrap_or_default();
    body.push(b'\n');
    respond(code, "application/json", body)
}

fn query_value<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query
        .split('&')
        .find_map(|pair| match pair.split_once('=') {
            Some((k, v)) if k == key => Some(v),
            None if pair == key => Some(""),
            _ => None,
        })
}

fn query_flag(query: &str, key: &str) -> bool {
    matches!(query_value(query, key), Some("true" | "1"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

    fn request(method: Method, uri: &str, accept: Option<&str>) -> Parts {
        let mut builder = http::Request::builder()
            .method(method)
            .uri(uri)
            .header("host", "127.0.0.1:6443");
        if let Some(accept) = accept {
            builder = builder.header("accept", accept);
        }
        builder.body(()).expect("request").into_parts().0
    }

    /// Status, content type, nosniff flag and body of one call, at CREATED + 90 minutes.
    fn call(method: Method, uri: &str, accept: Option<&str>) -> (u16, String, bool, String) {
        let now = parse_rfc3339(CREATED).expect("CREATED parses") + 90 * 60;
        let response = handle_at(&request(method, uri, accept), now);
        let header = |name| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        let (content_type, nosniff) = (
            header(header::CONTENT_TYPE),
            header(header::X_CONTENT_TYPE_OPTIONS) == "nosniff",
        );
        let status = response.status().as_u16();
        (
            status,
            content_type,
            nosniff,
            String::from_utf8(body_bytes(response.into_body())).expect("utf-8"),
        )
    }

    /// A `Full` body is ready on the first poll, so no runtime is needed.
    fn body_bytes(body: Full<Bytes>) -> Vec<u8> {
        let mut collect = std::pin::pin!(body.collect());
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match std::future::Future::poll(collect.as_mut(), &mut cx) {
            std::task::Poll::Ready(Ok(collected)) => collected.to_bytes().to_vec(),
            _ => panic!("a Full body is always ready"),
        }
    }

    fn get_json(uri: &str, accept: Option<&str>) -> Value {
        let (status, content_type, _, body) = call(Method::GET, uri, accept);
        assert_eq!(
            (status, content_type.as_str()),
            (200, "application/json"),
            "{uri}: {body}"
        );
        assert!(body.ends_with('\n'));
        serde_json::from_str(&body).expect("json")
    }

    #[test]
    fn version_and_discovery() {
        let v = get_json("/version", None);
        assert_eq!(
            (v["major"].as_str(), v["minor"].as_str()),
            (Some("1"), Some("32"))
        );
        assert_eq!(v["gitVersion"], GIT_VERSION);
        let (status, content_type, _, body) = call(
            Method::GET,
            "/api",
            Some(
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
            ),
        );
        assert_eq!(
            (status, content_type.as_str()),
            (
                200,
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            )
        );
        let v2: Value = serde_json::from_str(&body).expect("json");
        let core = &v2["items"][0];
        assert_eq!(core["metadata"], json!({}));
        assert_eq!(
            core["versions"][0]["resources"][1]["responseKind"]["kind"],
            "Node"
        );
        let api = get_json("/api", Some("application/json"));
        assert_eq!(api["kind"], "APIVersions");
        assert_eq!(api["versions"], json!(["v1"]));
        assert_eq!(
            api["serverAddressByClientCIDRs"],
            json!([{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}])
        );
        let list = get_json("/api/v1", None);
        assert_eq!(
            (list["kind"].as_str(), list["groupVersion"].as_str()),
            (Some("APIResourceList"), Some("v1"))
        );
        let names: Vec<&str> = list["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert_eq!(names, ["namespaces", "nodes", "pods"]);
        let pods = &list["resources"][2];
        assert_eq!(
            (pods["namespaced"].clone(), pods["kind"].clone()),
            (json!(true), json!("Pod"))
        );
        assert_eq!(
            (pods["shortNames"].clone(), pods["categories"].clone()),
            (json!(["po"]), json!(["all"]))
        );
        assert_eq!(list["resources"][1]["namespaced"], false);
        assert_eq!(get_json("/", None)["paths"][0], "/api");
    }

    #[test]
    fn health_endpoints_are_plain_ok() {
        for path in ["/healthz", "/livez", "/readyz", "/readyz/ping"] {
            assert_eq!(
                call(Method::GET, path, None),
                (200, "text/plain; charset=utf-8".into(), true, "ok".into())
            );
        }
        assert_eq!(
            call(Method::GET, "/livez?verbose", None).3,
            "[+]ping ok\nlivez check passed\n"
        );
    }

    #[test]
    fn nodes_as_json() {
        let list = get_json(
            "/api/v1/nodes",
            Some("application/vnd.kubernetes.protobuf,application/json"),
        );
        assert_eq!(list["kind"], "NodeList");
        assert_eq!(
            list["items"].as_array().map(Vec::len),
            Some(cluster::NODES.len())
        );
        assert!(
            list["items"][0].get("kind").is_none(),
            "list items carry no kind"
        );
        let node = get_json("/api/v1/nodes/node-a", None);
        assert_eq!(
            (node["kind"].as_str(), node["metadata"]["name"].as_str()),
            (Some("Node"), Some("node-a"))
        );
        assert_eq!(
            node["status"]["allocatable"],
            json!({"cpu": "4", "memory": "16384000Ki", "pods": "110"})
        );
        assert_eq!(node["status"]["capacity"]["cpu"], "4");
        assert_eq!(node["status"]["conditions"][0]["type"], "Ready");
        assert_eq!(node["status"]["conditions"][0]["status"], "True");
        assert_eq!(
            node["status"]["addresses"][0],
            json!({"type": "InternalIP", "address": "10.0.0.11"})
        );
        assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], "v1.32.0");
        assert_eq!(
            node["metadata"]["labels"]["kubernetes.io/hostname"],
            "node-a"
        );
        assert_eq!(
            node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"],
            ""
        );
        assert_eq!(
            get_json("/api/v1/nodes/node-b", None)["status"]["allocatable"]["cpu"],
            "8"
        );
    }

    #[test]
    fn pods_and_namespaces_as_json() {
        let all = get_json("/api/v1/pods", None);
        assert_eq!(
            (all["kind"].as_str(), all["items"].as_array().map(Vec::len)),
            (Some("PodList"), Some(cluster::PODS.len()))
        );
        let system = get_json("/api/v1/namespaces/kube-system/pods", None);
        let names: Vec<&str> = system["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|p| p["metadata"]["name"].as_str())
            .collect();
        assert_eq!(
            names,
            ["coredns-6f6b679f8f-x2k9d", "metrics-server-7d4b8c6d9-q8mzs"]
        );
        assert_eq!(
            get_json("/api/v1/namespaces/nope/pods", None)["items"],
            json!([])
        );
        let pod = get_json("/api/v1/namespaces/default/pods/web-5c9d7f7b8-4hx2p", None);
        assert_eq!(
            (
                pod["metadata"]["namespace"].as_str(),
                pod["spec"]["nodeName"].as_str()
            ),
            (Some("default"), Some("node-a"))
        );
        assert_eq!(pod["spec"]["containers"][1]["name"], "log-shipper");
        assert_eq!(
            (
                pod["status"]["phase"].as_str(),
                pod["metadata"]["labels"]["app"].as_str()
            ),
            (Some("Running"), Some("web"))
        );
        let namespaces = get_json("/api/v1/namespaces", None);
        let names: Vec<&str> = namespaces["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|n| n["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, NAMESPACES);
        assert_eq!(
            get_json("/api/v1/namespaces/kube-system", None)["status"]["phase"],
            "Active"
        );
    }

    #[test]
    fn list_selectors() {
        let names = |uri: &str| -> Vec<String> {
            let list = get_json(uri, None);
            let items = list["items"].as_array().cloned().unwrap_or_default();
            items
                .iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
                .collect()
        };
        // What `kubectl describe node node-b` sends.
        let describe = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-b%2Cstatus.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed&limit=500";
        assert_eq!(
            names(describe),
            ["metrics-server-7d4b8c6d9-q8mzs", "api-7b9f8c5d6-tm2lq"]
        );
        assert_eq!(
            names("/api/v1/nodes?fieldSelector=metadata.name==node-a"),
            ["node-a"]
        );
        assert_eq!(
            names("/api/v1/pods?labelSelector=app%3Dweb"),
            ["web-5c9d7f7b8-4hx2p"]
        );
        assert_eq!(
            names("/api/v1/nodes?labelSelector=node-role.kubernetes.io/worker"),
            ["node-b"]
        );
        assert_eq!(
            names("/api/v1/nodes?labelSelector=!node-role.kubernetes.io/worker"),
            ["node-a"]
        );
        assert_eq!(
            names("/api/v1/namespaces/default/pods?labelSelector=app!=web,app"),
            ["api-7b9f8c5d6-tm2lq"]
        );
        let (status, _, _, body) =
            call(Method::GET, "/api/v1/pods?fieldSelector=spec.foo%3Dx", None);
        assert_eq!(status, 400);
        assert!(body.contains(r#""message":"field label not supported: spec.foo","reason":"BadRequest","code":400"#), "{body}");
        assert_eq!(
            call(Method::GET, "/api/v1/pods?labelSelector=app+in+(web)", None).0,
            400
        );
        assert_eq!(percent_decode("a%3Db+c%2x%"), "a=b c%2x%");
    }

    #[test]
    fn yaml_when_asked() {
        let (status, content_type, _, body) = call(
            Method::GET,
            "/api/v1/nodes/node-a",
            Some("application/yaml"),
        );
        assert_eq!((status, content_type.as_str()), (200, "application/yaml"));
        assert!(body.contains("kind: Node"), "{body}");
    }

    #[test]
    fn node_table_matches_kube_apiserver() {
        let table = get_json("/api/v1/nodes?limit=500", Some(TABLE_ACCEPT));
        assert_eq!(
            (table["kind"].as_str(), table["apiVersion"].as_str()),
            (Some("Table"), Some("meta.k8s.io/v1"))
        );
        let columns: Vec<(&str, u64)> = table["columnDefinitions"]
            .as_array()
            .expect("columns")
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap_or(""),
                    c["priority"].as_u64().unwrap_or(9),
                )
            })
            .collect();
        assert_eq!(
            columns,
            [
                ("Name", 0),
                ("Status", 0),
                ("Roles", 0),
                ("Age", 0),
                ("Version", 0),
                ("Internal-IP", 1),
                ("External-IP", 1),
                ("OS-Image", 1),
                ("Kernel-Version", 1),
                ("Container-Runtime", 1)
            ]
        );
        assert_eq!(table["columnDefinitions"][0]["format"], "name");
        assert_eq!(table["columnDefinitions"][0]["type"], "string");
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "node-a",
                "Ready",
                "control-plane",
                "90m",
                "v1.32.0",
                "10.0.0.11",
                "<none>",
                "Ubuntu 24.04.1 LTS",
                "6.8.0-48-generic",
                "containerd://1.7.22"
            ])
        );
        assert_eq!(table["rows"][1]["cells"][2], "worker");
        let object = &table["rows"][0]["object"];
        assert_eq!(
            (object["kind"].as_str(), object["apiVersion"].as_str()),
            (Some("PartialObjectMetadata"), Some("meta.k8s.io/v1"))
        );
        assert_eq!(object["metadata"]["name"], "node-a");
        assert!(object.get("status").is_none());
    }

    #[test]
    fn pod_table_and_options() {
        let table = get_json("/api/v1/pods", Some(TABLE_ACCEPT));
        let columns: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .expect("columns")
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(
            columns,
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        assert_eq!(
            table["rows"].as_array().map(Vec::len),
            Some(cluster::PODS.len())
        );
        assert_eq!(
            table["rows"][2]["cells"],
            json!([
                "web-5c9d7f7b8-4hx2p",
                "2/2",
                "Running",
                "0",
                "90m",
                "10.244.0.12",
                "node-a",
                "<none>",
                "<none>"
            ])
        );
        assert_eq!(
            table["rows"][0]["object"]["metadata"]["namespace"],
            "kube-system"
        );
        let one = get_json(
            "/api/v1/namespaces/default/pods/api-7b9f8c5d6-tm2lq?includeObject=Object",
            Some(TABLE_ACCEPT),
        );
        assert_eq!(one["rows"].as_array().map(Vec::len), Some(1));
        assert_eq!(one["rows"][0]["object"]["kind"], "Pod");
        let none = get_json(
            "/api/v1/namespaces?includeObject=None",
            Some("application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
        );
        assert_eq!(none["apiVersion"], "meta.k8s.io/v1beta1");
        assert_eq!(
            none["rows"][0]["cells"],
            json!(["default", "Active", "90m"])
        );
        assert!(none["rows"][0].get("object").is_none());
        // A protobuf Table is not servable; the JSON fallback wins.
        let fallback = get_json(
            "/api/v1/pods",
            Some(
                "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json",
            ),
        );
        assert_eq!(fallback["kind"], "PodList");
    }

    #[test]
    fn missing_objects_are_not_found_statuses() {
        for (uri, message, kind) in [
            ("/api/v1/nodes/x", r#"nodes "x" not found"#, "nodes"),
            (
                "/api/v1/namespaces/default/pods/x",
                r#"pods "x" not found"#,
                "pods",
            ),
            (
                "/api/v1/namespaces/kube-system/pods/web-5c9d7f7b8-4hx2p",
                r#"pods "web-5c9d7f7b8-4hx2p" not found"#,
                "pods",
            ),
            (
                "/api/v1/namespaces/x",
                r#"namespaces "x" not found"#,
                "namespaces",
            ),
        ] {
            let (status, content_type, nosniff, body) = call(Method::GET, uri, Some(TABLE_ACCEPT));
            assert_eq!(
                (status, content_type.as_str(), nosniff),
                (404, "application/json", true),
                "{uri}"
            );
            let v: Value = serde_json::from_str(&body).expect("json");
            assert_eq!(
                (v["kind"].as_str(), v["reason"].as_str(), v["code"].as_u64()),
                (Some("Status"), Some("NotFound"), Some(404))
            );
            assert_eq!(v["message"], message);
            assert_eq!(v["details"]["kind"], kind);
            assert!(body.starts_with(r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"#), "{body}");
        }
        let (status, _, _, body) = call(Method::GET, "/api/v1/services", None);
        assert_eq!(status, 404);
        assert!(body.contains(r#""message":"the server could not find the requested resource","reason":"NotFound","details":{}"#), "{body}");
    }

    #[test]
    fn unknown_paths_get_gos_plain_404() {
        for uri in ["/apis/foo", "/metrics", "/apiv1", "/openapi/v3/apis/x/v1"] {
            let expected = (
                404,
                "text/plain; charset=utf-8".to_owned(),
                true,
                "404 page not found\n".to_owned(),
            );
            assert_eq!(call(Method::GET, uri, None), expected, "{uri}");
        }
    }

    #[test]
    fn writes_and_watches_are_refused() {
        for (method, uri) in [
            (Method::POST, "/api/v1/namespaces/default/pods"),
            (Method::DELETE, "/api/v1/nodes/node-a"),
            (Method::PUT, "/version"),
        ] {
            let (status, content_type, _, body) = call(method, uri, None);
            assert_eq!(
                (status, content_type.as_str()),
                (405, "application/json"),
                "{uri}"
            );
            let v: Value = serde_json::from_str(&body).expect("json");
            assert_eq!(
                (v["reason"].as_str(), v["message"].as_str()),
                (
                    Some("MethodNotAllowed"),
                    Some("the server does not allow this method on the requested resource")
                )
            );
        }
        assert_eq!(call(Method::HEAD, "/api/v1/nodes", None).0, 200);
        let (status, _, _, body) = call(Method::GET, "/api/v1/pods?watch=true", None);
        assert_eq!(status, 405);
        assert!(
            body.contains(r#""message":"watch is not supported on resources of kind \"pods\"""#),
            "{body}"
        );
    }

    #[test]
    fn unservable_accept_is_406() {
        let (status, _, _, body) = call(
            Method::GET,
            "/api/v1/nodes",
            Some("application/vnd.kubernetes.protobuf"),
        );
        assert_eq!(status, 406);
        assert!(body.contains(r#""reason":"NotAcceptable""#), "{body}");
        assert_eq!(
            call(
                Method::GET,
                "/api/v1/nodes",
                Some("text/html;q=0.5, */*;q=0.1")
            )
            .0,
            200
        );
    }

    #[test]
    fn ages_follow_human_duration() {
        assert_eq!(parse_rfc3339("1970-01-02T00:00:01Z"), Some(86_401));
        assert_eq!(parse_rfc3339("2026-11-30T09:00:00Z"), Some(1_796_029_200));
        assert_eq!(parse_rfc3339("2026-11-30 09:00:00"), None);
        for (seconds, text) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (125, "2m5s"),
            (180, "3m"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600 + 120, "3h2m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (50 * 3600, "2d2h"),
            (7 * 86_400, "7d"),
            (8 * 86_400, "8d"),
            (3 * 365 * 86_400 + 86_400, "3y1d"),
            (9 * 365 * 86_400, "9y"),
        ] {
            assert_eq!(human_duration(seconds), text, "{seconds}s");
        }
    }
}
