//! One group-version's OpenAPI, as a generic apiserver serves it: the Swagger 2.0 spec at
//! `/openapi/v2`, the OpenAPI v3 root at `/openapi/v3` naming the group-version's document
//! with its hash, and that document at `/openapi/v3/<key>` (k8s.io/kube-openapi
//! `handler3`'s `?hash=` rules: a stale hash is a 301 to the current one, the current one
//! is `Cache-Control: public, immutable`). The v3 document is the v2 spec converted, as
//! the types behind both are the same. Plus the builders of the spec's definitions and
//! operations, in kube-openapi's shapes, that the sample servers' specs share.

#![allow(unreachable_pub)]

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use http_body_util::Full;
use hyper::Response;
use kube_aggregator::discovery::{etag_of, sha512_hex};
use serde_json::{Value, json};

/// apimachinery's `ObjectMeta` definition name.
pub const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
/// apimachinery's `ListMeta` definition name.
pub const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
/// apimachinery's `Quantity` definition name.
pub const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
/// apimachinery's `Time` definition name.
pub const TIME: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Time";

/// A group-version whose spec is being written: its group (empty for the core API), its
/// version, the Go package its definitions are named after, and its operations' tag.
#[derive(Debug, Clone, Copy)]
pub struct GroupVersion {
    /// The group; empty for the core API.
    pub group: &'static str,
    /// The version.
    pub version: &'static str,
    /// The Go package the definitions are named after (`io.k8s.api.core.v1`).
    pub package: &'static str,
    /// The tag of the operations (`core_v1`).
    pub tag: &'static str,
}

impl GroupVersion {
    /// The group-version `group`/`version`, its definitions named after `package` and its
    /// operations tagged `tag`.
    pub const fn new(
        group: &'static str,
        version: &'static str,
        package: &'static str,
        tag: &'static str,
    ) -> Self {
        GroupVersion {
            group,
            version,
            package,
            tag,
        }
    }

    /// `x-kubernetes-group-version-kind` of `kind`.
    pub fn gvk(&self, kind: &str) -> Value {
        json!({"group": self.group, "kind": kind, "version": self.version})
    }

    /// The definition name of `kind`.
    pub fn definition(&self, kind: &str) -> String {
        format!("{}.{kind}", self.package)
    }

    /// A top-level kind: `apiVersion`, `kind` and `properties`, with its GVK.
    pub fn object(
        &self,
        kind: &str,
        description: &str,
        mut properties: Value,
        required: &[&str],
    ) -> Value {
        properties["apiVersion"] = string("The versioned schema of this object.");
        properties["kind"] = string("The REST resource this object represents.");
        let mut schema = json!({"type": "object", "description": description, "properties": properties,
                                "x-kubernetes-group-version-kind": [self.gvk(kind)]});
        if !required.is_empty() {
            schema["required"] = json!(required);
        }
        schema
    }

    /// `<kind>List` of `kind` items.
    pub fn list(&self, kind: &str) -> Value {
        self.object(
            &format!("{kind}List"),
            &format!("A list of {kind} objects."),
            json!({"metadata": with_description(reference(LIST_META), "Standard list metadata."),
                   "items": {"type": "array", "description": format!("The {kind} objects."),
                             "items": reference(&self.definition(kind))}}),
            &["items"],
        )
    }

    fn operation(&self, action: &str, id: &str, schema: &str, parameters: Vec<Value>) -> Value {
        json!({"get": {"operationId": id, "consumes": ["*/*"], "produces": ["application/json", "application/yaml"],
                       "schemes": ["https"], "tags": [self.tag], "parameters": parameters,
                       "responses": {"200": {"description": "OK", "schema": reference(&self.definition(schema))},
                                     "401": {"description": "Unauthorized"}},
                       "x-kubernetes-action": action,
                       "x-kubernetes-group-version-kind": self.gvk(schema.trim_end_matches("List"))}})
    }

    /// The `list` operation of `kind`, in a namespace or not.
    pub fn list_operation(&self, kind: &str, id: &str, namespaced: bool) -> Value {
        let mut parameters = vec![
            json!({"name": "labelSelector", "in": "query", "type": "string", "uniqueItems": true,
                   "description": "Select the objects by their labels."}),
            json!({"name": "fieldSelector", "in": "query", "type": "string", "uniqueItems": true,
                   "description": "Select the objects by their fields."}),
        ];
        if namespaced {
            parameters.push(namespace_parameter());
        }
        self.operation("list", id, &format!("{kind}List"), parameters)
    }

    /// The `get` operation of one `kind`, in a namespace or not.
    pub fn get_operation(&self, kind: &str, id: &str, namespaced: bool) -> Value {
        let mut parameters = vec![
            json!({"name": "name", "in": "path", "required": true, "type": "string", "uniqueItems": true,
                   "description": format!("The name of the {kind}.")}),
        ];
        if namespaced {
            parameters.push(namespace_parameter());
        }
        self.operation("get", id, kind, parameters)
    }
}

fn namespace_parameter() -> Value {
    json!({"name": "namespace", "in": "path", "required": true, "type": "string", "uniqueItems": true,
           "description": "The namespace of the objects."})
}

/// `{"$ref": "#/definitions/<name>"}`.
pub fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/definitions/{name}")})
}

/// `schema` with its description set.
pub fn with_description(mut schema: Value, description: &str) -> Value {
    schema["description"] = description.into();
    schema
}

/// A string field.
pub fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

/// An array of `items`.
pub fn array(description: &str, items: Value) -> Value {
    json!({"type": "array", "description": description, "items": items})
}

/// A map from resource names to quantities.
pub fn quantities(description: &str) -> Value {
    json!({"type": "object", "description": description, "additionalProperties": reference(QUANTITY)})
}

/// The definitions of apimachinery's types the specs refer to.
pub fn apimachinery_definitions(definitions: &mut serde_json::Map<String, Value>) {
    definitions.insert(
        META.to_owned(),
        json!({"type": "object", "description": "Metadata every persisted resource has.",
               "properties": {
                   "name": string("The object's name, unique in its namespace."),
                   "namespace": string("The namespace the object is in; empty for cluster-scoped objects."),
                   "uid": string("The unique id of the object, assigned by the server."),
                   "resourceVersion": string("The version of the object, opaque to clients."),
                   "labels": {"type": "object", "description": "Key-value pairs to select objects by.", "additionalProperties": {"type": "string"}},
                   "creationTimestamp": with_description(reference(TIME), "When the object was created.")}}),
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
    definitions.insert(
        TIME.to_owned(),
        json!({"type": "string", "format": "date-time", "description": "A time, RFC 3339 in UTC to the second."}),
    );
}

/// A Swagger 2.0 document with `info`, `paths` and `definitions`, and kube-apiserver's
/// bearer-token security definition.
pub fn swagger(
    title: &str,
    version: &str,
    paths: Value,
    definitions: serde_json::Map<String, Value>,
) -> Value {
    json!({
        "swagger": "2.0",
        "info": {"title": title, "version": version},
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header",
                                                "description": "Bearer Token authentication"}},
        "security": [{"BearerToken": []}],
    })
}

/// The v3 document of `spec` (converted) and its hash.
fn v3_document(spec: &Value) -> (Bytes, String) {
    let v3 = kube_aggregator::openapi::v3::convert_v2_to_v3(spec);
    let json = Bytes::from(serde_json::to_vec(&v3).unwrap_or_default());
    let hash = sha512_hex(&json);
    (json, hash)
}

/// A response of `code` with `content_type`, `etag` and `body`, and `Vary: Accept`.
pub fn respond(
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
pub fn with_etag(headers: &HeaderMap, content_type: &str, body: Bytes) -> Response<Full<Bytes>> {
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

/// Answers `/openapi/v2`, `/openapi/v3` and `/openapi/v3/<key>` from `spec`, the spec of
/// the one group-version whose v3 root key is `key` (`api/v1`, `apis/<group>/<version>`);
/// `None` for any other path.
pub fn handle(
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    key: &str,
    spec: impl FnOnce() -> Value,
) -> Option<Response<Full<Bytes>>> {
    match path {
        "/openapi/v2" => {
            let body = Bytes::from(serde_json::to_vec(&spec()).unwrap_or_default());
            Some(with_etag(headers, "application/json", body))
        }
        "/openapi/v3" => {
            let (_, hash) = v3_document(&spec());
            let root = kube_aggregator::openapi::v3::root_document([(key, hash.as_str())]);
            let body = Bytes::from(serde_json::to_vec(&root).unwrap_or_default());
            Some(with_etag(headers, "application/json", body))
        }
        _ => {
            let asked_key = path.strip_prefix("/openapi/v3/")?;
            if asked_key != key {
                // Go's http.NotFound.
                let mut res = respond(
                    StatusCode::NOT_FOUND,
                    "text/plain; charset=utf-8",
                    None,
                    Bytes::from_static(b"404 page not found\n"),
                );
                res.headers_mut().insert(
                    header::X_CONTENT_TYPE_OPTIONS,
                    HeaderValue::from_static("nosniff"),
                );
                res.headers_mut().remove(header::VARY);
                return Some(res);
            }
            let (json, hash) = v3_document(&spec());
            let asked = query.and_then(|q| {
                form_urlencoded::parse(q.as_bytes())
                    .find(|(k, _)| k == "hash")
                    .map(|(_, v)| v.into_owned())
            });
            match asked {
                Some(h) if h != hash => {
                    let mut res = respond(
                        StatusCode::MOVED_PERMANENTLY,
                        "application/json",
                        None,
                        Bytes::new(),
                    );
                    if let Ok(v) = HeaderValue::from_str(&format!("/openapi/v3/{key}?hash={hash}"))
                    {
                        res.headers_mut().insert(header::LOCATION, v);
                    }
                    Some(res)
                }
                asked => {
                    let etag = HeaderValue::from_str(&format!("\"{hash}\"")).ok();
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
