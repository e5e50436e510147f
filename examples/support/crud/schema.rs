//! Decoding a request body against a kind's schema, as a Go-typed apiserver decodes it.
//!
//! A typed server decodes JSON into Go structs: a value of the wrong JSON type fails the
//! whole decode (`json: cannot unmarshal string into Go struct field ... of type int64`,
//! apiserver answers 400), and with `fieldValidation=Strict` or `Warn` the strict decoder
//! (sigs.k8s.io/json) also reports each field the struct does not have as
//! `unknown field "spec.foo"`. Validation after decoding (required fields, enums, the
//! name) gives 422 `Invalid` (apiserver `handlers/create.go`, `rest/create.go`).

use serde_json::Value;

use super::kinds::{Field, Kind, OBJECT_META, Ty};
use crate::support::api_status::FieldError;

/// What decoding found.
#[derive(Debug, Default)]
pub struct Decoded {
    /// `unknown field "<path>"` for each field the schema lacks, in document order.
    pub unknown: Vec<String>,
    /// The first type mismatch, worded as Go's `json.UnmarshalTypeError`.
    pub type_error: Option<String>,
}

/// Decodes `object` (the whole body) against `kind`'s schema.
pub fn decode(kind: &Kind, object: &Value) -> Decoded {
    let mut out = Decoded::default();
    let Some(map) = object.as_object() else {
        out.type_error = Some(format!(
            "json: cannot unmarshal {} into Go value of type v1beta1.{}",
            json_type(object),
            kind.kind
        ));
        return out;
    };
    for (key, value) in map {
        match key.as_str() {
            "apiVersion" | "kind" => check_type(&mut out, Ty::String, value, kind.kind, key),
            "metadata" => walk(&mut out, OBJECT_META, value, "ObjectMeta", "metadata"),
            "spec" => walk(
                &mut out,
                kind.spec,
                value,
                &format!("{}Spec", kind.kind),
                "spec",
            ),
            other => out.unknown.push(format!("unknown field \"{other}\"")),
        }
    }
    out
}

fn walk(out: &mut Decoded, fields: &[Field], value: &Value, struct_name: &str, path: &str) {
    let Some(map) = value.as_object() else {
        if !value.is_null() {
            out.type_error.get_or_insert_with(|| {
                unmarshal_error(value, struct_name, path, &format!("v1beta1.{struct_name}"))
            });
        }
        return;
    };
    for (key, v) in map {
        let child = format!("{path}.{key}");
        match fields.iter().find(|f| f.name == key) {
            None => out.unknown.push(format!("unknown field \"{child}\"")),
            Some(f) => match f.ty {
                Ty::Object(inner) => walk(out, inner, v, struct_name, &child),
                ty => check_type(out, ty, v, struct_name, &child),
            },
        }
    }
}

fn check_type(out: &mut Decoded, ty: Ty, v: &Value, struct_name: &str, path: &str) {
    let ok = match ty {
        Ty::String | Ty::Enum(_) => v.is_string() || v.is_null(),
        Ty::Integer => v.is_i64() || v.is_u64() || v.is_null(),
        Ty::Boolean => v.is_boolean() || v.is_null(),
        Ty::FreeForm | Ty::Object(_) => v.is_object() || v.is_null(),
        Ty::StringMap => match v {
            Value::Object(m) => m.values().all(Value::is_string),
            Value::Null => true,
            _ => false,
        },
        Ty::StringList => match v {
            Value::Array(a) => a.iter().all(Value::is_string),
            Value::Null => true,
            _ => false,
        },
        Ty::ObjectList => v.is_array() || v.is_null(),
    };
    if !ok {
        let go_type = match ty {
            Ty::String | Ty::Enum(_) => "string",
            Ty::Integer => "int64",
            Ty::Boolean => "bool",
            Ty::StringMap => "map[string]string",
            Ty::StringList => "[]string",
            Ty::ObjectList => "[]json.RawMessage",
            Ty::FreeForm | Ty::Object(_) => "map[string]interface {}",
        };
        // A wrong value inside a map or list is reported with the element's type.
        let (shown, go_type) = match (ty, v) {
            (Ty::StringMap, Value::Object(m)) => {
                (m.values().find(|x| !x.is_string()).unwrap_or(v), "string")
            }
            (Ty::StringList, Value::Array(a)) => {
                (a.iter().find(|x| !x.is_string()).unwrap_or(v), "string")
            }
            _ => (v, go_type),
        };
        out.type_error
            .get_or_insert_with(|| unmarshal_error(shown, struct_name, path, go_type));
    }
}

fn unmarshal_error(v: &Value, struct_name: &str, path: &str, go_type: &str) -> String {
    format!(
        "json: cannot unmarshal {} into Go struct field {struct_name}.{path} of type {go_type}",
        json_type(v)
    )
}

/// How Go's decoder names a JSON value in a type error.
fn json_type(v: &Value) -> String {
    match v {
        Value::String(_) => "string".into(),
        Value::Number(n) => format!("number {n}"),
        Value::Bool(_) => "bool".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
        Value::Null => "null".into(),
    }
}

/// The validation of a decoded object: required `spec` fields, enums, and (on create) a
/// name that is a DNS subdomain (`ValidateObjectMeta`).
pub fn validate(kind: &Kind, object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if name.is_empty() {
        errors.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else if let Some(why) = dns_subdomain_error(name) {
        errors.push(FieldError::invalid(
            "metadata.name",
            &format!("{name:?}"),
            &why,
        ));
    }
    let spec = object.get("spec");
    if spec.is_none_or(Value::is_null) {
        errors.push(FieldError::required("spec", ""));
        return errors;
    }
    for f in kind.spec {
        let value = spec.and_then(|s| s.get(f.name));
        let present = value.is_some_and(|v| !v.is_null() && v.as_str() != Some(""));
        if f.required && !present {
            errors.push(FieldError::required(&format!("spec.{}", f.name), ""));
        }
        if let (Ty::Enum(allowed), Some(Value::String(v))) = (f.ty, value) {
            if !allowed.contains(&v.as_str()) {
                errors.push(FieldError::not_supported(
                    &format!("spec.{}", f.name),
                    v,
                    allowed,
                ));
            }
        }
    }
    errors
}

/// Why `name` is not an RFC 1123 subdomain, in apimachinery's words; `None` when it is.
pub fn dns_subdomain_error(name: &str) -> Option<String> {
    const WHY: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    if name.len() > 253 {
        return Some("must be no more than 253 characters".to_owned());
    }
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    };
    if name.split('.').all(label_ok) {
        None
    } else {
        Some(WHY.to_owned())
    }
}
