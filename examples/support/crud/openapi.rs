//! Discovery and OpenAPI documents of `servicecatalog.example.io/v1beta1`, built from
//! the kinds' schema: `/apis` (aggregated v2 or legacy), `/apis/<group>`,
//! `/apis/<group>/<version>`, `/openapi/v2` and the v3 root and group-version document
//! (the v2 spec converted, as kube-openapi serves both from one set of definitions).
//!
//! What kubectl 1.32 reads from them (docs/upstream-behaviour.md §5.5, reference §15.3,
//! §15.4): `kubectl explain` the v3 schemas found by `x-kubernetes-group-version-kind`;
//! `kubectl apply` the v3 PATCH operation of the kind, whose `fieldValidation` parameter
//! makes it leave validation to this server and whose accepted
//! `application/strategic-merge-patch+json` makes it send a strategic merge patch.

use serde_json::{Map, Value, json};

use super::kinds::{Field, GROUP, GROUP_VERSION, KINDS, Kind, OBJECT_META, Ty, VERSION};
use super::patch::PATCH_TYPES;

const PKG: &str = "io.example.servicecatalog.v1beta1";
const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
/// The v3 root key of the group-version.
pub const V3_KEY: &str = "apis/servicecatalog.example.io/v1beta1";
/// The verbs both kinds serve.
pub const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/definitions/{name}")})
}

fn gvk(kind: &str) -> Value {
    json!({"group": GROUP, "kind": kind, "version": VERSION})
}

fn schema_of(ty: Ty, description: &str) -> Value {
    let mut s = match ty {
        Ty::String => json!({"type": "string"}),
        Ty::Enum(values) => json!({"type": "string", "enum": values}),
        Ty::Integer => json!({"type": "integer", "format": "int64"}),
        Ty::Boolean => json!({"type": "boolean"}),
        Ty::StringMap => {
            json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}})
        }
        Ty::FreeForm => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        Ty::StringList => json!({"type": "array", "items": {"type": "string", "default": ""}}),
        Ty::ObjectList => {
            json!({"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}})
        }
        Ty::Object(fields) => object_schema(fields),
    };
    s["description"] = description.into();
    s
}

fn object_schema(fields: &[Field]) -> Value {
    let properties: Map<String, Value> = fields
        .iter()
        .map(|f| (f.name.to_owned(), schema_of(f.ty, f.description)))
        .collect();
    let required: Vec<&str> = fields
        .iter()
        .filter(|f| f.required)
        .map(|f| f.name)
        .collect();
    let mut s = json!({"type": "object", "properties": properties});
    if !required.is_empty() {
        s["required"] = json!(required);
    }
    s
}

fn definitions() -> Map<String, Value> {
    let mut d = Map::new();
    for k in KINDS {
        let spec = object_schema(k.spec);
        d.insert(format!("{PKG}.{}Spec", k.kind), spec);
        d.insert(format!("{PKG}.{}", k.kind), json!({
            "type": "object", "description": k.description, "required": ["spec"],
            "properties": {
                "apiVersion": {"type": "string", "description": "The versioned schema of this object."},
                "kind": {"type": "string", "description": "The REST resource this object represents."},
                "metadata": {"$ref": format!("#/definitions/{META}"), "default": {}, "description": "Standard object metadata."},
                "spec": {"$ref": format!("#/definitions/{PKG}.{}Spec", k.kind), "default": {}, "description": format!("The desired state of the {}.", k.kind)},
            },
            "x-kubernetes-group-version-kind": [gvk(k.kind)],
        }));
        let list = format!("{}List", k.kind);
        d.insert(format!("{PKG}.{list}"), json!({
            "type": "object", "description": format!("A list of {} objects.", k.kind), "required": ["items"],
            "properties": {
                "apiVersion": {"type": "string", "description": "The versioned schema of this object."},
                "kind": {"type": "string", "description": "The REST resource this object represents."},
                "metadata": {"$ref": format!("#/definitions/{LIST_META}"), "default": {}, "description": "Standard list metadata."},
                "items": {"type": "array", "description": "The objects.", "items": {"$ref": format!("#/definitions/{PKG}.{}", k.kind), "default": {}}},
            },
            "x-kubernetes-group-version-kind": [gvk(&list)],
        }));
    }
    let mut meta = object_schema(OBJECT_META);
    meta["description"] = "ObjectMeta is metadata that all persisted resources must have.".into();
    d.insert(META.to_owned(), meta);
    d.insert(LIST_META.to_owned(), json!({"type": "object", "description": "ListMeta describes metadata of lists.",
        "properties": {"resourceVersion": {"type": "string", "description": "The resourceVersion the list was read at."},
                       "continue": {"type": "string", "description": "A token to fetch the next page."},
                       "remainingItemCount": {"type": "integer", "format": "int64", "description": "How many items the next pages hold."}}}));
    d.insert(STATUS.to_owned(), json!({"type": "object", "description": "Status is a return value for calls that don't return other objects.",
        "properties": {"status": {"type": "string", "description": "Success or Failure."}, "message": {"type": "string", "description": "What happened."},
                       "reason": {"type": "string", "description": "Why, machine-readable."}, "code": {"type": "integer", "format": "int32", "description": "The HTTP status code."}}}));
    d.insert(DELETE_OPTIONS.to_owned(), json!({"type": "object", "description": "DeleteOptions may be provided when deleting an API object.",
        "properties": {"preconditions": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "Conditions the object must meet (uid, resourceVersion)."},
                       "propagationPolicy": {"type": "string", "description": "Orphan, Background or Foreground."},
                       "dryRun": {"type": "array", "items": {"type": "string", "default": ""}, "description": "All: do not persist."}}}));
    d
}

fn query(name: &str, ty: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "type": ty, "uniqueItems": true, "description": description})
}

fn operation(
    k: &Kind,
    action: &str,
    id: &str,
    response: &str,
    consumes: &[&str],
    extra: Vec<Value>,
) -> Value {
    let mut params = extra;
    if matches!(action, "post" | "put" | "patch") {
        params.push(query("fieldValidation", "string", "Strict, Warn (the default) or Ignore: what to do with fields the schema does not have."));
        params.push(query(
            "dryRun",
            "string",
            "All: validate and answer without persisting.",
        ));
    }
    let mut op = json!({
        "operationId": id, "consumes": consumes, "produces": ["application/json", "application/yaml"],
        "schemes": ["https"], "tags": ["servicecatalogExampleIo_v1beta1"], "parameters": params,
        "responses": {"200": {"description": "OK", "schema": reference(response)}, "401": {"description": "Unauthorized"}},
        "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk(k.kind),
    });
    if action == "post" {
        op["responses"]["201"] = json!({"description": "Created", "schema": reference(response)});
    }
    op
}

fn body_param(definition: &str) -> Value {
    json!({"name": "body", "in": "body", "required": true, "schema": reference(definition)})
}

fn paths() -> Map<String, Value> {
    let mut paths = Map::new();
    let list_params = || {
        [
            "labelSelector",
            "fieldSelector",
            "resourceVersion",
            "resourceVersionMatch",
            "continue",
        ]
        .iter()
        .map(|p| query(p, "string", "See the Kubernetes API conventions."))
        .chain(
            ["limit", "timeoutSeconds"]
                .iter()
                .map(|p| query(p, "integer", "See the Kubernetes API conventions.")),
        )
        .chain(
            ["watch", "allowWatchBookmarks", "sendInitialEvents"]
                .iter()
                .map(|p| query(p, "boolean", "See the Kubernetes API conventions.")),
        )
        .collect::<Vec<_>>()
    };
    for k in KINDS {
        let base = if k.namespaced {
            format!(
                "/apis/{GROUP_VERSION}/namespaces/{{namespace}}/{}",
                k.plural
            )
        } else {
            format!("/apis/{GROUP_VERSION}/{}", k.plural)
        };
        let (object, list) = (format!("{PKG}.{}", k.kind), format!("{PKG}.{}List", k.kind));
        let scope = if k.namespaced { "Namespaced" } else { "" };
        let json_in = ["application/json", "application/yaml"];
        let mut collection = json!({
            "get": operation(k, "list", &format!("list{scope}{}", k.kind), &list, &["*/*"], list_params()),
            "post": operation(k, "post", &format!("create{scope}{}", k.kind), &object, &json_in, vec![body_param(&object)]),
            "delete": operation(k, "deletecollection", &format!("deleteCollection{scope}{}", k.kind), STATUS, &["*/*"], list_params()),
        });
        let mut item = json!({
            "get": operation(k, "get", &format!("read{scope}{}", k.kind), &object, &["*/*"], vec![]),
            "put": operation(k, "put", &format!("replace{scope}{}", k.kind), &object, &json_in, vec![body_param(&object)]),
            "patch": operation(k, "patch", &format!("patch{scope}{}", k.kind), &object, &PATCH_TYPES,
                               vec![json!({"name": "body", "in": "body", "required": true, "schema": {"type": "object", "description": "The patch."}})]),
            "delete": operation(k, "delete", &format!("delete{scope}{}", k.kind), STATUS, &["*/*"], vec![body_param(DELETE_OPTIONS)]),
        });
        let mut path_params = vec![
            json!({"name": "name", "in": "path", "required": true, "type": "string", "uniqueItems": true, "description": format!("The name of the {}.", k.kind)}),
        ];
        if k.namespaced {
            let ns = json!({"name": "namespace", "in": "path", "required": true, "type": "string", "uniqueItems": true, "description": "The namespace of the objects."});
            collection["parameters"] = json!([ns.clone()]);
            path_params.push(ns);
        }
        item["parameters"] = Value::Array(path_params);
        paths.insert(base.clone(), collection);
        paths.insert(format!("{base}/{{name}}"), item);
    }
    paths
}

/// The Swagger 2.0 spec.
pub fn v2_spec() -> Value {
    json!({
        "swagger": "2.0", "info": {"title": "servicecatalog.example.io", "version": VERSION},
        "paths": paths(), "definitions": definitions(),
        "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header", "description": "Bearer Token authentication"}},
        "security": [{"BearerToken": []}],
    })
}

/// The OpenAPI v3 group-version document.
pub fn v3_document() -> Value {
    kube_aggregator::openapi::v3::convert_v2_to_v3(&v2_spec())
}

/// The legacy `APIResourceList` of the group-version.
pub fn resource_list() -> Value {
    let resources: Vec<Value> = KINDS
        .iter()
        .map(|k| json!({"name": k.plural, "singularName": k.singular, "namespaced": k.namespaced, "kind": k.kind,
                        "verbs": VERBS, "shortNames": k.short_names, "categories": ["servicecatalog"]}))
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION, "resources": resources})
}

/// `/apis` as aggregated discovery v2 (`api_version` is `apidiscovery.k8s.io/v2` or
/// `v2beta1`).
pub fn aggregated(api_version: &str) -> Value {
    let resources: Vec<Value> = KINDS
        .iter()
        .map(|k| json!({"resource": k.plural, "responseKind": gvk(k.kind), "scope": if k.namespaced { "Namespaced" } else { "Cluster" },
                        "singularResource": k.singular, "verbs": VERBS, "shortNames": k.short_names, "categories": ["servicecatalog"]}))
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {},
           "items": [{"metadata": {"name": GROUP}, "versions": [{"version": VERSION, "resources": resources, "freshness": "Current"}]}]})
}

/// The group's `APIGroup` (and the entry of the legacy `APIGroupList`).
pub fn group() -> Value {
    let v = json!({"groupVersion": GROUP_VERSION, "version": VERSION});
    json!({"name": GROUP, "versions": [v], "preferredVersion": v})
}
