//! A Swagger 2.0 JSON document into the gnostic messages, as gnostic's `ParseDocument`
//! does it.
//!
//! Every reader is total: a missing field or one of the wrong JSON type reads as the
//! message's default (empty string, 0, `false`, `None`), so a malformed backend spec
//! still encodes and only loses what it got wrong. Maps keep the JSON object's order,
//! which is sorted (the merge writes sorted keys).

/// A gnostic message that carries JSON Schema's validation keywords (`format`,
/// `default`, `multipleOf`, `maximum` ... `uniqueItems`, `enum`: Schema, SimpleParameter
/// and PrimitivesItems all do), those read from `v`, the other fields as given.
macro_rules! with_validations {
    ($message:ident, $v:expr, { $($field:ident $(: $value:expr)?),* $(,)? }) => {{
        let v: &Value = $v;
        $message {
            format: s(v, "format"),
            default: any_at(v, "default"),
            multiple_of: f(v, "multipleOf"),
            maximum: f(v, "maximum"),
            exclusive_maximum: b(v, "exclusiveMaximum"),
            minimum: f(v, "minimum"),
            exclusive_minimum: b(v, "exclusiveMinimum"),
            max_length: i(v, "maxLength"),
            min_length: i(v, "minLength"),
            pattern: s(v, "pattern"),
            max_items: i(v, "maxItems"),
            min_items: i(v, "minItems"),
            unique_items: b(v, "uniqueItems"),
            r#enum: anys(v, "enum"),
            $($field $(: $value)?,)*
        }
    }};
}

mod paths;

use prost::Message;
use serde_json::{Map, Value};

use super::*;

use paths::{parameter, path_item, response, security};

/// `v[key]` as a string, or empty.
fn s(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// `v[key]` as a boolean, or `false`.
fn b(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// `v[key]` as a number, or 0.
fn f(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// `v[key]` as an integer, or 0 (a fractional number reads as 0).
fn i(v: &Value, key: &str) -> i64 {
    v.get(key).and_then(Value::as_i64).unwrap_or(0)
}

/// `v[key]` as a list of strings: an array's strings, or one string as a list of one
/// (`type: object` and `type: [object]` both read as `["object"]`).
fn strings(v: &Value, key: &str) -> Vec<String> {
    match v.get(key) {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    }
}

/// A free-form value (`default`, `enum`, `example`, `x-*`) as gnostic's `Any`: its YAML
/// text, which kube-openapi parses back.
fn any(v: &Value) -> Any {
    Any {
        value: None,
        yaml: serde_yaml_ng::to_string(v).unwrap_or_default(),
    }
}

fn any_at(v: &Value, key: &str) -> Option<Any> {
    v.get(key).map(any)
}

fn anys(v: &Value, key: &str) -> Vec<Any> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().map(any).collect())
        .unwrap_or_default()
}

fn obj(v: &Value) -> Option<&Map<String, Value>> {
    v.as_object()
}

/// A gnostic `Named*` message: one entry of a JSON object, its key and its value.
trait Named {
    /// The value's message.
    type Value;
    fn new(name: String, value: Self::Value) -> Self;
}

macro_rules! named {
    ($($named:ident($value:ident)),* $(,)?) => {$(
        impl Named for $named {
            type Value = $value;
            fn new(name: String, value: $value) -> Self {
                $named { name, value: Some(value) }
            }
        }
    )*};
}

named!(
    NamedAny(Any),
    NamedSchema(Schema),
    NamedPathItem(PathItem),
    NamedParameter(Parameter),
    NamedResponse(Response),
    NamedHeader(Header),
    NamedResponseValue(ResponseValue),
    NamedStringArray(StringArray),
);

/// The `Named*` messages of `entries` (a JSON object's, in order), each value read by
/// `value`.
fn entries<'a, N: Named>(
    entries: impl IntoIterator<Item = (&'a String, &'a Value)>,
    value: impl Fn(&Value) -> N::Value,
) -> Vec<N> {
    entries
        .into_iter()
        .map(|(k, x)| N::new(k.clone(), value(x)))
        .collect()
}

/// The entries of `m` that are not vendor extensions.
fn not_extensions(m: &Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    m.iter().filter(|(k, _)| !k.starts_with("x-"))
}

/// The vendor extensions (`x-*` keys) of an object, in order.
fn extensions(v: &Value) -> Vec<NamedAny> {
    let all = obj(v).into_iter().flatten();
    entries(all.filter(|(k, _)| k.starts_with("x-")), any)
}

fn external_docs(v: &Value) -> Option<ExternalDocs> {
    v.get("externalDocs").map(|d| ExternalDocs {
        description: s(d, "description"),
        url: s(d, "url"),
        vendor_extension: extensions(d),
    })
}

/// A schema object, recursively (`items`, `allOf`, `properties`, `additionalProperties`).
/// An empty `properties` stays `Some`: kube-openapi reads its presence as "a kind".
fn schema(v: &Value) -> Schema {
    let additional = v.get("additionalProperties").map(|a| {
        Box::new(AdditionalPropertiesItem {
            oneof: Some(match a {
                Value::Bool(x) => additional_properties_item::Oneof::Boolean(*x),
                other => additional_properties_item::Oneof::Schema(schema(other)),
            }),
        })
    });
    let items = v.get("items").map(|it| ItemsItem {
        schema: match it {
            Value::Array(a) => a.iter().map(schema).collect(),
            one => vec![schema(one)],
        },
    });
    let properties = v.get("properties").and_then(obj).map(|p| Properties {
        additional_properties: entries(p, schema),
    });
    let types = strings(v, "type");
    with_validations!(Schema, v, {
        xref: s(v, "$ref"),
        title: s(v, "title"),
        description: s(v, "description"),
        max_properties: i(v, "maxProperties"),
        min_properties: i(v, "minProperties"),
        required: strings(v, "required"),
        additional_properties: additional,
        r#type: (!types.is_empty()).then_some(TypeItem { value: types }),
        items,
        all_of: v
            .get("allOf")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(schema).collect())
            .unwrap_or_default(),
        properties,
        discriminator: s(v, "discriminator"),
        read_only: b(v, "readOnly"),
        xml: v.get("xml").map(|x| Xml {
            name: s(x, "name"),
            namespace: s(x, "namespace"),
            prefix: s(x, "prefix"),
            attribute: b(x, "attribute"),
            wrapped: b(x, "wrapped"),
            vendor_extension: extensions(x),
        }),
        external_docs: external_docs(v),
        example: any_at(v, "example"),
        vendor_extension: extensions(v),
    })
}

/// The gnostic `Document` of a Swagger 2.0 JSON document. Fields of the wrong JSON type
/// read as empty; nothing fails.
pub fn document(v: &Value) -> Document {
    Document {
        swagger: s(v, "swagger"),
        info: v.get("info").map(|x| Info {
            title: s(x, "title"),
            version: s(x, "version"),
            description: s(x, "description"),
            terms_of_service: s(x, "termsOfService"),
            contact: x.get("contact").map(|c| Contact {
                name: s(c, "name"),
                url: s(c, "url"),
                email: s(c, "email"),
                vendor_extension: extensions(c),
            }),
            license: x.get("license").map(|l| License {
                name: s(l, "name"),
                url: s(l, "url"),
                vendor_extension: extensions(l),
            }),
            vendor_extension: extensions(x),
        }),
        host: s(v, "host"),
        base_path: s(v, "basePath"),
        schemes: strings(v, "schemes"),
        consumes: strings(v, "consumes"),
        produces: strings(v, "produces"),
        paths: v.get("paths").and_then(obj).map(|p| Paths {
            vendor_extension: extensions(&Value::Object(p.clone())),
            path: entries(not_extensions(p), path_item),
        }),
        definitions: v.get("definitions").and_then(obj).map(|d| Definitions {
            additional_properties: entries(d, schema),
        }),
        parameters: v
            .get("parameters")
            .and_then(obj)
            .map(|p| ParameterDefinitions {
                additional_properties: entries(p, parameter),
            }),
        responses: v
            .get("responses")
            .and_then(obj)
            .map(|r| ResponseDefinitions {
                additional_properties: entries(r, response),
            }),
        security: security(v),
        security_definitions: v.get("securityDefinitions").and_then(obj).map(|d| {
            SecurityDefinitions {
                additional_properties: d
                    .iter()
                    .filter_map(|(k, x)| {
                        let item = match x.get("type").and_then(Value::as_str) {
                            Some("basic") => {
                                security_definitions_item::Oneof::BasicAuthenticationSecurity(
                                    BasicAuthenticationSecurity {
                                        r#type: s(x, "type"),
                                        description: s(x, "description"),
                                        vendor_extension: extensions(x),
                                    },
                                )
                            }
                            Some("apiKey") => {
                                security_definitions_item::Oneof::ApiKeySecurity(ApiKeySecurity {
                                    r#type: s(x, "type"),
                                    name: s(x, "name"),
                                    r#in: s(x, "in"),
                                    description: s(x, "description"),
                                    vendor_extension: extensions(x),
                                })
                            }
                            _ => return None,
                        };
                        Some(NamedSecurityDefinitionsItem {
                            name: k.clone(),
                            value: Some(SecurityDefinitionsItem { oneof: Some(item) }),
                        })
                    })
                    .collect(),
            }
        }),
        tags: v
            .get("tags")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|t| Tag {
                        name: s(t, "name"),
                        description: s(t, "description"),
                        external_docs: external_docs(t),
                        vendor_extension: extensions(t),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        external_docs: external_docs(v),
        vendor_extension: extensions(v),
    }
}

/// The protobuf encoding of a Swagger 2.0 JSON document (kube-openapi `ToProtoBinary`).
pub fn encode(v: &Value) -> Vec<u8> {
    document(v).encode_to_vec()
}
