//! How objects are written back: as themselves, as a `Table` (what `kubectl get` asks
//! for) or as `PartialObjectMetadata`, chosen by the `Accept` header's `as=`, `g=` and `v=`
//! parameters (apiserver `handlers/response.go` `transformObject`, `asTable`).

use std::time::SystemTime;

use serde_json::{Map, Value, json};

use super::kinds::{GROUP_VERSION, Kind, NAME_DESCRIPTION};
use crate::support::extension_server::parse_rfc3339;

/// The form a response takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The objects themselves, JSON.
    Object,
    /// `meta.k8s.io/<v>` `Table`; `v1` or `v1beta1`.
    Table(&'static str),
    /// `meta.k8s.io/v1` `PartialObjectMetadata` (`...List` for lists).
    Metadata,
}

/// The first `Accept` clause this server can answer (kubectl get sends
/// `application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json`);
/// `None` when none is (406).
pub fn negotiate(accept: Option<&str>) -> Option<Form> {
    let accept = accept.unwrap_or("*/*");
    for clause in accept.split(',') {
        let mut parts = clause.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        let params: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
        let param = |k: &str| params.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
        if !matches!(media, "application/json" | "application/*" | "*/*") {
            continue;
        }
        match (param("as"), param("g"), param("v")) {
            (None, _, _) => return Some(Form::Object),
            (Some("Table"), Some("meta.k8s.io"), Some("v1")) => return Some(Form::Table("v1")),
            (Some("Table"), Some("meta.k8s.io"), Some("v1beta1")) => {
                return Some(Form::Table("v1beta1"));
            }
            (
                Some("PartialObjectMetadata" | "PartialObjectMetadataList"),
                Some("meta.k8s.io"),
                Some("v1"),
            ) => {
                return Some(Form::Metadata);
            }
            _ => continue,
        }
    }
    None
}

/// An object in Go's field order: `kind`, `apiVersion`, `metadata` (ObjectMeta's order),
/// `spec`, then anything else.
pub fn ordered(kind: &Kind, object: &Value) -> Value {
    let mut out = Map::new();
    out.insert("kind".into(), kind.kind.into());
    out.insert("apiVersion".into(), GROUP_VERSION.into());
    out.insert("metadata".into(), ordered_meta(&object["metadata"]));
    if let Some(m) = object.as_object() {
        for (k, v) in m {
            if !matches!(k.as_str(), "kind" | "apiVersion" | "metadata") {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

const META_ORDER: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

fn ordered_meta(meta: &Value) -> Value {
    let mut out = Map::new();
    for k in META_ORDER {
        if let Some(v) = meta.get(k).filter(|v| !is_empty(v)) {
            out.insert(k.into(), v.clone());
        }
    }
    Value::Object(out)
}

/// Go's `omitempty`: empty strings, zero numbers, empty maps and lists, null.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Bool(_) => false,
    }
}

/// `PartialObjectMetadata` of `object`.
pub fn partial(object: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": ordered_meta(&object["metadata"])})
}

/// A list document of `kind`'s objects in `form`; `meta` is the ListMeta
/// (`resourceVersion`, `continue`, `remainingItemCount`).
pub fn list(kind: &Kind, form: Form, items: &[Value], meta: Value, include_object: &str) -> Value {
    match form {
        Form::Object => json!({
            "kind": format!("{}List", kind.kind), "apiVersion": GROUP_VERSION, "metadata": meta,
            "items": items.iter().map(|o| ordered(kind, o)).map(strip_type_meta).collect::<Vec<_>>(),
        }),
        Form::Metadata => json!({
            "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
            "items": items.iter().map(partial).collect::<Vec<_>>(),
        }),
        Form::Table(v) => table(kind, v, items, meta, true, include_object),
    }
}

/// Items of a typed list carry `kind` and `apiVersion` in Go too (the generic registry
/// keeps them), so nothing is stripped; kept as a seam should a list leave them out.
fn strip_type_meta(v: Value) -> Value {
    v
}

/// One object in `form`.
pub fn single(kind: &Kind, form: Form, object: &Value, include_object: &str) -> Value {
    match form {
        Form::Object => ordered(kind, object),
        Form::Metadata => partial(object),
        Form::Table(v) => {
            let rv = object["metadata"]["resourceVersion"].clone();
            table(
                kind,
                v,
                std::slice::from_ref(object),
                json!({"resourceVersion": rv}),
                true,
                include_object,
            )
        }
    }
}

/// A `Table`: the `Name` column, the kind's own columns, one row per object with the
/// object as `PartialObjectMetadata` (`includeObject=Metadata`, the default), whole
/// (`Object`) or absent (`None`). Without headers (`headers` false, every watch event after
/// the first) `columnDefinitions` is `null`, as upstream encodes an empty slice.
pub fn table(
    kind: &Kind,
    version: &str,
    items: &[Value],
    meta: Value,
    headers: bool,
    include_object: &str,
) -> Value {
    let columns: Value = if headers {
        let mut defs = vec![
            json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESCRIPTION, "priority": 0}),
        ];
        defs.extend(kind.columns.iter().map(|c| {
            json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority})
        }));
        Value::Array(defs)
    } else {
        Value::Null
    };
    let now = SystemTime::now();
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut cells = vec![o["metadata"]["name"].clone()];
            for c in kind.columns {
                cells.push(if c.pointer.is_empty() {
                    age(&o["metadata"]["creationTimestamp"], now).into()
                } else {
                    o.pointer(c.pointer).cloned().unwrap_or_else(|| "".into())
                });
            }
            let mut row = json!({"cells": cells});
            match include_object {
                "None" => {}
                "Object" => row["object"] = ordered(kind, o),
                _ => row["object"] = partial(o),
            }
            row
        })
        .collect();
    json!({"kind": "Table", "apiVersion": format!("meta.k8s.io/{version}"), "metadata": meta,
           "columnDefinitions": columns, "rows": rows})
}

/// `duration.HumanDuration` of the object's age, what kube-apiserver's printers put in
/// the `Age` column (`<unknown>` without a timestamp).
fn age(timestamp: &Value, now: SystemTime) -> String {
    let Some(created) = timestamp.as_str().and_then(parse_rfc3339) else {
        return "<unknown>".to_owned();
    };
    let secs = now.duration_since(created).map_or(0, |d| d.as_secs());
    human_duration(secs)
}

/// apimachinery `duration.HumanDuration`, seconds precision.
pub fn human_duration(secs: u64) -> String {
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86_400);
    match secs {
        s if s < 120 => format!("{s}s"),
        _ if m < 10 => match secs % 60 {
            0 => format!("{m}m"),
            s => format!("{m}m{s}s"),
        },
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 => match m % 60 {
            0 => format!("{h}h"),
            mm => format!("{h}h{mm}m"),
        },
        _ if h < 48 => format!("{h}h"),
        _ if h < 192 => match h % 24 {
            0 => format!("{d}d"),
            hh => format!("{d}d{hh}h"),
        },
        _ if d < 365 * 2 => format!("{d}d"),
        _ if d < 365 * 8 => match d % 365 {
            0 => format!("{}y", d / 365),
            dd => format!("{}y{dd}d", d / 365),
        },
        _ => format!("{}y", d / 365),
    }
}
