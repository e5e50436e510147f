//! OpenAPI v3: the discovery root (kube-openapi
//! [`pkg/handler3/handler.go`](https://github.com/kubernetes/kube-openapi/blob/master/pkg/handler3/handler.go)) and the conversion
//! of a Swagger 2.0 spec for APIServices that serve no v3 (kube-openapi
//! [`pkg/openapiconv/convert.go`](https://github.com/kubernetes/kube-openapi/blob/master/pkg/openapiconv/convert.go) `ConvertV2ToV3`,
//! references wrapped as `builder3/util` `WrapRefs` does).
//!
//! Unlike v2, v3 documents are not merged: the root at `/openapi/v3` lists one key per
//! group-version with a `serverRelativeURL` carrying the document's hash, and clients
//! (kubectl 1.27+, `kubectl explain`) fetch each document by that URL and cache it for as
//! long as the hash stays the same.
//!
//! ```
//! use kube_aggregator::openapi::v3::{convert_v2_to_v3, root_document, root_paths};
//! use serde_json::json;
//!
//! let root = root_document([("apis/metrics.k8s.io/v1beta1", "ABC123"), ("api/v1", "DEF456")]);
//! assert_eq!(root_paths(&root), [
//!     ("api/v1".to_owned(), "/openapi/v3/api/v1?hash=DEF456".to_owned()),
//!     ("apis/metrics.k8s.io/v1beta1".to_owned(), "/openapi/v3/apis/metrics.k8s.io/v1beta1?hash=ABC123".to_owned()),
//! ]);
//!
//! // A backend with only a v2 spec: its definitions become components, references follow.
//! let v3 = convert_v2_to_v3(&json!({"swagger": "2.0", "info": {"title": "metrics", "version": "v1beta1"},
//!     "paths": {"/apis/metrics.k8s.io/v1beta1/nodes": {"get": {"produces": ["application/json"],
//!         "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/NodeMetricsList"}}}}}},
//!     "definitions": {"NodeMetricsList": {"type": "object"}}}));
//! assert_eq!(v3["openapi"], "3.0.0");
//! assert!(v3["components"]["schemas"]["NodeMetricsList"].is_object());
//! let ok = &v3["paths"]["/apis/metrics.k8s.io/v1beta1/nodes"]["get"]["responses"]["200"];
//! assert_eq!(ok["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/NodeMetricsList");
//! ```

use serde_json::{Map, Value, json};

/// `{"paths":{"<key>":{"serverRelativeURL":"/openapi/v3/<key>?hash=<HASH>"}}}`, keys
/// sorted, from `(key, hash)` pairs. Keys are `apis/<group>/<version>` or `api/<version>`
/// without a leading slash, as upstream lists them; the hash is the upper-case hex
/// SHA-512 of the document.
pub fn root_document<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Value {
    let mut entries: Vec<(&str, &str)> = entries.into_iter().collect();
    entries.sort();
    let mut paths = Map::new();
    for (key, hash) in entries {
        paths.insert(
            key.to_owned(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}),
        );
    }
    json!({ "paths": paths })
}

/// The `paths` of a v3 root document: key -> `serverRelativeURL`. Entries of the wrong
/// shape are skipped. The order is the object's (sorted, for a root this crate or Go
/// wrote).
pub fn root_paths(root: &Value) -> Vec<(String, String)> {
    root.get("paths")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let url = v.get("serverRelativeURL")?.as_str()?;
            Some((k.clone(), url.to_owned()))
        })
        .collect()
}

/// Where v2 keeps schemas, as a reference prefix.
const V2_DEFS: &str = "#/definitions/";
/// Where v3 keeps them.
const V3_SCHEMAS: &str = "#/components/schemas/";

/// `r` with the part up to and including `from` replaced by `to` (a reference into
/// another document keeps only its fragment), or `r` unchanged when it has no `from`.
fn convert_ref(r: &str, from: &str, to: &str) -> String {
    match r.find(from) {
        Some(i) => format!("{to}{}", &r[i + from.len()..]),
        None => r.to_owned(),
    }
}

/// A v2 schema as v3: `#/definitions/` references point into `#/components/schemas/`,
/// and a reference with siblings is wrapped in `allOf` (v3 forbids siblings of `$ref`).
pub fn convert_schema(v: &Value) -> Value {
    let Value::Object(m) = v else {
        return v.clone();
    };
    let mut out = Map::new();
    for (k, x) in m {
        let converted = match k.as_str() {
            "$ref" => match x.as_str() {
                Some(r) => Value::String(convert_ref(r, V2_DEFS, V3_SCHEMAS)),
                None => x.clone(),
            },
            "properties" | "patternProperties" | "definitions" => match x {
                Value::Object(p) => Value::Object(
                    p.iter()
                        .map(|(n, s)| (n.clone(), convert_schema(s)))
                        .collect(),
                ),
                other => other.clone(),
            },
            "items" | "allOf" | "anyOf" | "oneOf" => match x {
                Value::Array(a) => Value::Array(a.iter().map(convert_schema).collect()),
                one => convert_schema(one),
            },
            "additionalProperties" | "additionalItems" | "not" => convert_schema(x),
            _ => x.clone(),
        };
        out.insert(k.clone(), converted);
    }
    if out.len() > 1 {
        if let Some(r) = out.remove("$ref") {
            let mut all_of = vec![json!({ "$ref": r })];
            if let Some(Value::Array(existing)) = out.remove("allOf") {
                all_of.extend(existing);
            }
            out.insert("allOf".into(), Value::Array(all_of));
        }
    }
    Value::Object(out)
}

/// Copies the vendor extensions (`x-*`) of `from` into `to`.
fn extensions_into(from: &Map<String, Value>, to: &mut Map<String, Value>) {
    for (k, v) in from.iter().filter(|(k, _)| k.starts_with("x-")) {
        to.insert(k.clone(), v.clone());
    }
}

/// Copies the `keys` that `from` has into `to`.
fn copy_keys(from: &Map<String, Value>, to: &mut Map<String, Value>, keys: &[&str]) {
    for key in keys {
        if let Some(v) = from.get(*key) {
            to.insert((*key).into(), v.clone());
        }
    }
}

/// `from`'s `$ref` (into v2's `#/<section>/`) into `to`, pointing into v3's
/// `#/components/<section>/`.
fn moved_ref(from: &Map<String, Value>, to: &mut Map<String, Value>, section: &str) {
    if let Some(r) = from.get("$ref").and_then(Value::as_str) {
        let v2 = format!("#/{section}/");
        let v3 = format!("#/components/{section}/");
        to.insert("$ref".into(), Value::String(r.replacen(&v2, &v3, 1)));
    }
}

/// `v[key]` as a list of strings (`consumes`, `produces`); empty when absent.
fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str().map(str::to_owned))
        .collect()
}

/// A non-body v2 parameter as v3: its `type`, `format` and `uniqueItems` move into a
/// `schema`; a `$ref` points into `#/components/parameters/` and gets no schema.
fn convert_parameter(p: &Value) -> Value {
    let Some(m) = p.as_object() else {
        return p.clone();
    };
    let mut out = Map::new();
    moved_ref(m, &mut out, "parameters");
    let keys = ["name", "in", "description", "required", "allowEmptyValue"];
    copy_keys(m, &mut out, &keys);
    extensions_into(m, &mut out);
    let schema = match m.get("schema") {
        Some(s) => convert_schema(s),
        None => {
            let mut s = Map::new();
            copy_keys(m, &mut s, &["type", "format", "uniqueItems"]);
            Value::Object(s)
        }
    };
    if m.get("$ref").is_none() {
        out.insert("schema".into(), schema);
    }
    Value::Object(out)
}

/// A v2 response as v3: its schema under `content`, once per `produces` media type; a
/// `$ref` points into `#/components/responses/`.
fn convert_response(r: &Value, produces: &[String]) -> Value {
    let Some(m) = r.as_object() else {
        return r.clone();
    };
    let mut out = Map::new();
    moved_ref(m, &mut out, "responses");
    copy_keys(m, &mut out, &["description"]);
    if let Some(schema) = m.get("schema") {
        let schema = convert_schema(schema);
        let content: Map<String, Value> = produces
            .iter()
            .map(|p| (p.clone(), json!({ "schema": schema })))
            .collect();
        out.insert("content".into(), Value::Object(content));
    }
    extensions_into(m, &mut out);
    Value::Object(out)
}

/// A v2 operation as v3: the `body` parameter becomes `requestBody`, the rest
/// [`convert_parameter`], the responses [`convert_response`] with the operation's
/// `produces`.
fn convert_operation(op: &Value) -> Value {
    let Some(m) = op.as_object() else {
        return op.clone();
    };
    let mut out = Map::new();
    let keys = [
        "tags",
        "summary",
        "description",
        "externalDocs",
        "operationId",
        "deprecated",
    ];
    copy_keys(m, &mut out, &keys);
    let consumes = strings(op, "consumes");
    let produces = strings(op, "produces");
    let mut parameters = Vec::new();
    for p in m
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let is_body =
            p.get("name").and_then(Value::as_str) == Some("body") && p.get("schema").is_some();
        if is_body {
            let schema = convert_schema(&p["schema"]);
            let content: Map<String, Value> = consumes
                .iter()
                .map(|c| (c.clone(), json!({ "schema": schema })))
                .collect();
            let mut body = Map::new();
            if !content.is_empty() {
                body.insert("content".into(), Value::Object(content));
            }
            out.insert("requestBody".into(), Value::Object(body));
        } else {
            parameters.push(convert_parameter(p));
        }
    }
    if !parameters.is_empty() {
        out.insert("parameters".into(), Value::Array(parameters));
    }
    if let Some(rs) = m.get("responses").and_then(Value::as_object) {
        let mut responses = Map::new();
        for (code, r) in rs {
            if code.starts_with("x-") {
                responses.insert(code.clone(), r.clone());
            } else {
                responses.insert(code.clone(), convert_response(r, &produces));
            }
        }
        out.insert("responses".into(), Value::Object(responses));
    }
    extensions_into(m, &mut out);
    Value::Object(out)
}

/// A Swagger 2.0 spec as an OpenAPI 3.0.0 document.
///
/// `definitions` become `components.schemas`, global `responses` become
/// `components.responses`, security definitions `components.securitySchemes` (global
/// `parameters` are not carried over); each
/// operation's `body` parameter becomes its
/// `requestBody` (one entry per `consumes` type) and each response's schema a `content`
/// entry per `produces` type. Vendor extensions are kept where they stood.
pub fn convert_v2_to_v3(v2: &Value) -> Value {
    let mut out = Map::new();
    out.insert("openapi".into(), Value::String("3.0.0".into()));
    if let Some(info) = v2.get("info") {
        out.insert("info".into(), info.clone());
    }
    if let Some(docs) = v2.get("externalDocs") {
        out.insert("externalDocs".into(), docs.clone());
    }
    if let Some(paths) = v2.get("paths").and_then(Value::as_object) {
        let mut converted = Map::new();
        for (path, item) in paths {
            let Some(item) = item.as_object() else {
                continue;
            };
            if path.starts_with("x-") {
                converted.insert(path.clone(), Value::Object(item.clone()));
                continue;
            }
            let mut p = Map::new();
            if let Some(r) = item.get("$ref") {
                p.insert("$ref".into(), r.clone());
            }
            for method in ["get", "put", "post", "delete", "options", "head", "patch"] {
                if let Some(op) = item.get(method) {
                    p.insert(method.into(), convert_operation(op));
                }
            }
            if let Some(params) = item.get("parameters").and_then(Value::as_array) {
                p.insert(
                    "parameters".into(),
                    Value::Array(params.iter().map(convert_parameter).collect()),
                );
            }
            extensions_into(item, &mut p);
            converted.insert(path.clone(), Value::Object(p));
        }
        out.insert("paths".into(), Value::Object(converted));
    }
    let mut components = Map::new();
    if let Some(defs) = v2.get("definitions").and_then(Value::as_object) {
        components.insert(
            "schemas".into(),
            Value::Object(
                defs.iter()
                    .map(|(k, s)| (k.clone(), convert_schema(s)))
                    .collect(),
            ),
        );
    }
    if let Some(sec) = v2.get("securityDefinitions").and_then(Value::as_object) {
        let schemes: Map<String, Value> = sec
            .iter()
            .map(|(k, s)| {
                let mut o = Map::new();
                for key in ["description", "type", "name", "in"] {
                    if let Some(v) = s.get(key) {
                        o.insert(key.into(), v.clone());
                    }
                }
                if let Some(m) = s.as_object() {
                    extensions_into(m, &mut o);
                }
                (k.clone(), Value::Object(o))
            })
            .collect();
        components.insert("securitySchemes".into(), Value::Object(schemes));
    }
    if let Some(responses) = v2.get("responses").and_then(Value::as_object) {
        let produces = strings(v2, "produces");
        components.insert(
            "responses".into(),
            Value::Object(
                responses
                    .iter()
                    .map(|(k, r)| (k.clone(), convert_response(r, &produces)))
                    .collect(),
            ),
        );
    }
    out.insert("components".into(), Value::Object(components));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_paths_bodies_and_references() {
        let v2 = json!({
            "swagger": "2.0", "info": {"title": "t", "version": "v"},
            "paths": {"/apis/g/v1/namespaces/{namespace}/widgets": {
                "parameters": [{"name": "namespace", "in": "path", "required": true, "type": "string", "uniqueItems": true}],
                "post": {"consumes": ["application/json"], "produces": ["application/json"], "operationId": "createWidget",
                         "parameters": [{"name": "body", "in": "body", "required": true, "schema": {"$ref": "#/definitions/Widget"}},
                                        {"$ref": "#/parameters/fieldValidation"}],
                         "responses": {"201": {"description": "Created", "schema": {"$ref": "#/definitions/Widget"}}},
                         "x-kubernetes-group-version-kind": {"group": "g", "kind": "Widget", "version": "v1"}}}},
            "definitions": {"Widget": {"type": "object", "properties": {
                "metadata": {"$ref": "#/definitions/Meta", "description": "standard metadata"},
                "items": {"type": "array", "items": {"$ref": "#/definitions/Meta"}}}}, "Meta": {"type": "object"}}
        });
        let v3 = convert_v2_to_v3(&v2);
        assert_eq!(v3["openapi"], "3.0.0");
        let post = &v3["paths"]["/apis/g/v1/namespaces/{namespace}/widgets"]["post"];
        assert_eq!(
            post["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/Widget"
        );
        assert_eq!(
            post["parameters"][0]["$ref"],
            "#/components/parameters/fieldValidation"
        );
        assert_eq!(
            post["responses"]["201"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/Widget"
        );
        assert_eq!(post["x-kubernetes-group-version-kind"]["kind"], "Widget");
        let ns = &v3["paths"]["/apis/g/v1/namespaces/{namespace}/widgets"]["parameters"][0];
        assert_eq!(ns["schema"], json!({"type": "string", "uniqueItems": true}));
        let widget = &v3["components"]["schemas"]["Widget"]["properties"];
        assert_eq!(
            widget["metadata"],
            json!({"allOf": [{"$ref": "#/components/schemas/Meta"}], "description": "standard metadata"})
        );
        assert_eq!(
            widget["items"]["items"]["$ref"],
            "#/components/schemas/Meta"
        );
    }

    #[test]
    fn root_documents() {
        let root = root_document([("apis/b/v1", "BB"), ("apis/a/v1", "AA")]);
        assert_eq!(
            serde_json::to_string(&root).unwrap(),
            r#"{"paths":{"apis/a/v1":{"serverRelativeURL":"/openapi/v3/apis/a/v1?hash=AA"},"apis/b/v1":{"serverRelativeURL":"/openapi/v3/apis/b/v1?hash=BB"}}}"#
        );
        assert_eq!(
            root_paths(&root),
            [
                (
                    "apis/a/v1".to_owned(),
                    "/openapi/v3/apis/a/v1?hash=AA".to_owned()
                ),
                (
                    "apis/b/v1".to_owned(),
                    "/openapi/v3/apis/b/v1?hash=BB".to_owned()
                )
            ]
        );
    }
}
