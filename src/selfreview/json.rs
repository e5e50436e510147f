//! The JSON (and YAML) forms of the reviews, field for field as k8s.io/api's types
//! serialize: `omitempty` fields left out, `status.allowed` and the rules lists always
//! present, and in 1.32's shape `metadata: {"creationTimestamp": null}`.

use serde_json::{Map, Value, json};

use super::{AccessReview, Kind, ReviewError};
use crate::authn::UserInfo;
use crate::authz::{Rules, SubjectAccessReviewStatus};

/// The object in `body`, as JSON or YAML, checked to be `kind` (when it names a kind).
pub(super) fn decode(body: &[u8], yaml: bool, kind: Kind) -> Result<Value, ReviewError> {
    let value: Value = if yaml {
        crate::gocompat::yaml::from_slice(body)
            .map_err(|e| ReviewError::Decode(format!("yaml: {e}")))?
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ReviewError::Decode(format!("json parse error: {e}")))?
    };
    let Value::Object(ref object) = value else {
        return Err(ReviewError::Decode(format!(
            "expected a {} object, got {}",
            kind.name(),
            type_name(&value)
        )));
    };
    check_type(
        object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or(""),
        object.get("kind").and_then(Value::as_str).unwrap_or(""),
        kind,
    )?;
    Ok(value)
}

/// Upstream's create handler refuses a body of another group/version, and a body of
/// another kind cannot be converted to the review.
pub(super) fn check_type(
    api_version: &str,
    found_kind: &str,
    kind: Kind,
) -> Result<(), ReviewError> {
    if !api_version.is_empty() && api_version != kind.api_version() {
        return Err(ReviewError::Decode(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            kind.api_version()
        )));
    }
    if !found_kind.is_empty() && found_kind != kind.name() {
        return Err(ReviewError::Decode(format!(
            "the kind in the data ({found_kind}) does not match the expected kind ({})",
            kind.name()
        )));
    }
    Ok(())
}

/// How Go's decoder names a JSON value's type in its errors.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The review's `spec` (an object, or absent: an empty spec), or the decoder's error
/// naming `what`.
fn spec_field(value: &Value, what: &str) -> Result<Value, ReviewError> {
    match value.get("spec") {
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        Some(spec @ Value::Object(_)) => Ok(spec.clone()),
        Some(other) => Err(ReviewError::Decode(format!(
            "{what}.spec: expected an object, got {}",
            type_name(other)
        ))),
    }
}

/// The spec of a `SelfSubjectAccessReview` in JSON form.
pub(super) fn access_review(value: &Value) -> Result<AccessReview, ReviewError> {
    let spec = spec_field(value, "SelfSubjectAccessReview")?;
    serde_json::from_value(spec)
        .map_err(|e| ReviewError::Decode(format!("SelfSubjectAccessReview.spec: {e}")))
}

/// `spec.namespace` of a `SelfSubjectRulesReview` in JSON form (empty when absent).
pub(super) fn rules_review_namespace(value: &Value) -> Result<String, ReviewError> {
    let spec = spec_field(value, "SelfSubjectRulesReview")?;
    match spec.get("namespace") {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(ns)) => Ok(ns.clone()),
        Some(other) => Err(ReviewError::Decode(format!(
            "SelfSubjectRulesReview.spec.namespace: expected a string, got {}",
            type_name(other)
        ))),
    }
}

/// An answer's `kind`, `apiVersion` and `metadata`, in that order.
fn head(kind: Kind, metadata: Value) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("kind".into(), kind.name().into());
    m.insert("apiVersion".into(), kind.api_version().into());
    m.insert("metadata".into(), metadata);
    m
}

/// The `metadata` 1.32 writes for an object it never stored.
fn no_timestamp() -> Value {
    json!({"creationTimestamp": null})
}

/// A `SelfSubjectAccessReview` with the request's spec and the `status` decided.
pub(super) fn access_review_answer(
    review: &AccessReview,
    status: &SubjectAccessReviewStatus,
) -> Value {
    let mut m = head(Kind::AccessReview, no_timestamp());
    m.insert(
        "spec".into(),
        serde_json::to_value(review).unwrap_or_default(),
    );
    m.insert(
        "status".into(),
        serde_json::to_value(status).unwrap_or_default(),
    );
    Value::Object(m)
}

/// A `SelfSubjectRulesReview` with an empty spec and the `status` listing `rules`
/// (`resourceRules` and `nonResourceRules` always present, `incomplete` always written).
pub(super) fn rules_review_answer(rules: &Rules) -> Value {
    let mut status = Map::new();
    status.insert(
        "resourceRules".into(),
        serde_json::to_value(&rules.resource_rules).unwrap_or_default(),
    );
    status.insert(
        "nonResourceRules".into(),
        serde_json::to_value(&rules.non_resource_rules).unwrap_or_default(),
    );
    status.insert("incomplete".into(), rules.incomplete.into());
    if let Some(e) = rules.evaluation_error() {
        status.insert("evaluationError".into(), e.into());
    }
    let mut m = head(Kind::RulesReview, no_timestamp());
    m.insert("spec".into(), json!({}));
    m.insert("status".into(), Value::Object(status));
    Value::Object(m)
}

/// The `SelfSubjectRulesReview` a request for `namespace` decodes to, as the audit log
/// records it: the spec, and the empty status Go writes (`null` lists).
pub(super) fn rules_review_request(namespace: &str) -> Value {
    let mut m = head(Kind::RulesReview, no_timestamp());
    let spec = if namespace.is_empty() {
        json!({})
    } else {
        json!({ "namespace": namespace })
    };
    m.insert("spec".into(), spec);
    m.insert(
        "status".into(),
        json!({"resourceRules": null, "nonResourceRules": null, "incomplete": false}),
    );
    Value::Object(m)
}

/// The `SelfSubjectReview` every request decodes to (it has no spec), as the audit log
/// records it.
pub(super) fn subject_review_request() -> Value {
    let mut m = head(Kind::SubjectReview, no_timestamp());
    m.insert("status".into(), json!({"userInfo": {}}));
    Value::Object(m)
}

/// A `SelfSubjectReview` whose `status.userInfo` is `user`, created at `created` (RFC
/// 3339).
pub(super) fn subject_review_answer(user: &UserInfo, created: &str) -> Value {
    let mut info = Map::new();
    if !user.name.is_empty() {
        info.insert("username".into(), user.name.clone().into());
    }
    if !user.uid.is_empty() {
        info.insert("uid".into(), user.uid.clone().into());
    }
    if !user.groups.is_empty() {
        info.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        info.insert("extra".into(), json!(user.extra));
    }
    let mut m = head(Kind::SubjectReview, json!({"creationTimestamp": created}));
    m.insert("status".into(), json!({"userInfo": info}));
    Value::Object(m)
}

/// JSON as Go's encoder writes it: HTML-safe escapes and a trailing newline.
pub(super) fn to_json(value: &Value) -> Vec<u8> {
    crate::gocompat::json::to_line(value, 512)
}

/// YAML as sigs.k8s.io/yaml writes it: keys sorted.
pub(super) fn to_yaml(value: &Value) -> Vec<u8> {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_yaml_ng::to_string(&sorted(value))
        .unwrap_or_default()
        .into_bytes()
}
