//! The three patch types a typed apiserver accepts (apiserver `handlers/patch.go`):
//! JSON patch (RFC 6902, `application/json-patch+json`), JSON merge patch (RFC 7386,
//! `application/merge-patch+json`) and strategic merge patch
//! (`application/strategic-merge-patch+json`, what `kubectl patch` sends by default and
//! `kubectl apply` sends when the OpenAPI document says the PATCH accepts it).
//!
//! Strategic merge is merge patch plus the Go struct tags of the type. These kinds have
//! `patchStrategy` tags only where `ObjectMeta` has them: `metadata.finalizers` merges as
//! a set and `metadata.ownerReferences` merges by `uid`; every other list is replaced. The
//! directives `$patch` (`replace`, `delete`, `merge`), `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>` are honoured as
//! apimachinery's `strategicpatch` does.

use serde_json::{Map, Value};

/// The patch content types accepted, in the order upstream's 415 lists them.
pub const PATCH_TYPES: [&str; 3] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

/// RFC 7386: objects merge recursively, `null` deletes, anything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else { return };
    for (k, v) in patch {
        if v.is_null() {
            t.remove(k);
        } else {
            merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// RFC 6902 on `doc`. The error is evanphx/json-patch's text; upstream answers any of them
/// with a 422 that does not repeat it.
pub fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), String> {
    let Some(ops) = ops.as_array() else {
        return Err("invalid JSON Patch".to_owned());
    };
    for op in ops {
        let name = op.get("op").and_then(Value::as_str).unwrap_or_default();
        let path = op.get("path").and_then(Value::as_str).unwrap_or_default();
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| format!("{name} operation missing value"))
        };
        match name {
            "add" => add(doc, path, value()?)?,
            "remove" => {
                remove(doc, path)?;
            }
            "replace" => {
                remove(doc, path).map_err(|_| {
                    format!("replace operation does not apply: doc is missing key: {path}: missing value")
                })?;
                add(doc, path, value()?)?;
            }
            "move" => {
                let from = op.get("from").and_then(Value::as_str).unwrap_or_default();
                let v = remove(doc, from)?;
                add(doc, path, v)?;
            }
            "copy" => {
                let from = op.get("from").and_then(Value::as_str).unwrap_or_default();
                let v = doc.pointer(from).cloned().ok_or_else(|| format!("copy operation does not apply: doc is missing from path: {from}: missing value"))?;
                add(doc, path, v)?;
            }
            "test" => {
                if doc.pointer(path) != Some(&value()?) {
                    return Err(format!("testing value {path} failed: test failed"));
                }
            }
            other => return Err(format!("Unexpected kind: {other}")),
        }
    }
    Ok(())
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn split(path: &str) -> Result<(&str, String), String> {
    let (parent, last) = path
        .rsplit_once('/')
        .ok_or_else(|| format!("invalid path: {path}"))?;
    Ok((parent, unescape(last)))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, key) = split(path)?;
    let missing =
        || format!("add operation does not apply: doc is missing path: \"{path}\": missing value");
    match doc.pointer_mut(parent).ok_or_else(missing)? {
        Value::Object(m) => {
            m.insert(key, value);
        }
        Value::Array(a) => {
            let at = if key == "-" {
                a.len()
            } else {
                key.parse::<usize>().map_err(|_| missing())?
            };
            if at > a.len() {
                return Err(missing());
            }
            a.insert(at, value);
        }
        _ => return Err(missing()),
    }
    Ok(())
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let (parent, key) = split(path)?;
    let missing = || format!("Unable to remove nonexistent key: {key}: missing value");
    match doc.pointer_mut(parent).ok_or_else(missing)? {
        Value::Object(m) => m.remove(&key).ok_or_else(missing),
        Value::Array(a) => {
            let at = key.parse::<usize>().map_err(|_| missing())?;
            if at >= a.len() {
                return Err(missing());
            }
            Ok(a.remove(at))
        }
        _ => Err(missing()),
    }
}

/// The merge key of a list field at `path` (dotted), `Some("")` for a list of primitives
/// merged as a set, `None` for a list replaced whole.
fn merge_key(path: &str) -> Option<&'static str> {
    match path {
        "metadata.finalizers" => Some(""),
        "metadata.ownerReferences" => Some("uid"),
        _ => None,
    }
}

/// Applies a strategic merge patch to `target` (an object), the directives included.
pub fn strategic_merge_patch(target: &mut Value, patch: &Value) -> Result<(), String> {
    smp_object(target, patch, "")
}

fn smp_object(target: &mut Value, patch: &Value, path: &str) -> Result<(), String> {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut replaced = patch.clone();
            replaced.remove("$patch");
            *target = Value::Object(replaced);
            return Ok(());
        }
        Some("delete") => {
            *target = Value::Null;
            return Ok(());
        }
        Some("merge") | None => {}
        Some(other) => {
            return Err(format!(
                "Unknown patch type: {other} in map: {}",
                go_format(&Value::Object(patch.clone()))
            ));
        }
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else {
        return Ok(());
    };
    if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        t.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in patch {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(gone)) = (t.get_mut(field), v) {
                list.retain(|x| !gone.contains(x));
            }
            continue;
        }
        let child = if path.is_empty() {
            k.clone()
        } else {
            format!("{path}.{k}")
        };
        if v.is_null() {
            t.remove(k);
            continue;
        }
        let slot = t.entry(k.clone()).or_insert(Value::Null);
        match (merge_key(&child), v) {
            (Some(key), Value::Array(items)) => smp_list(slot, items, key),
            (None, Value::Object(_)) => {
                smp_object(slot, v, &child)?;
                if slot.is_null() {
                    t.remove(k);
                }
            }
            _ => *slot = v.clone(),
        }
    }
    Ok(())
}

/// Merges `items` into the list at `slot`: by `key` for lists of objects (an item with
/// `$patch: delete` removes its match), as a set for primitives (`key` empty).
fn smp_list(slot: &mut Value, items: &[Value], key: &str) {
    if !slot.is_array() {
        *slot = Value::Array(Vec::new());
    }
    let Value::Array(list) = slot else { return };
    for item in items {
        if key.is_empty() {
            if !list.contains(item) {
                list.push(item.clone());
            }
            continue;
        }
        let id = item.get(key);
        let at = list.iter().position(|x| x.get(key) == id);
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (at, delete) {
            (Some(i), true) => {
                list.remove(i);
            }
            (Some(i), false) => merge_patch(&mut list[i], item),
            (None, false) => list.push(item.clone()),
            (None, true) => {}
        }
    }
}

/// A JSON value printed as Go's `fmt.Sprintf("%+v", v)` prints the `interface{}` it
/// decodes to: `map[k:v k2:v2]` with sorted keys, `[a b]`, `<nil>`; what upstream puts
/// in the strict-decoding error of a strategic merge patch.
pub fn go_format(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => format!("{f}"),
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(go_format).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}:{}", go_format(&m[*k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}
