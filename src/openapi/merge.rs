//! Swagger 2.0 merging as kube-openapi `pkg/aggregator/aggregator.go` does it for
//! kube-aggregator (`MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters`,
//! `FilterSpecByPathsWithoutSideEffects`), over `serde_json` values.
//!
//! - A remote spec is first filtered to the paths under `/apis/<group>/<version>/`;
//!   definitions only those dropped paths used go too.
//! - Merging a source into the destination: paths the destination has already are
//!   ignored (the first spec wins); a definition or parameter whose name is taken by a
//!   different one is renamed `<name>_v2`, `<name>_v3`, ... (reusing an earlier rename that
//!   is equal), with every `$ref` to it rewritten; definitions equal but for
//!   `x-kubernetes-group-version-kind` are shared, their GVK lists united.
//!
//! Where Go iterates maps in random order, this iterates names in sorted order, so the
//! renames are deterministic.
//!
//! The [`OpenApiManager`](super::OpenApiManager) merges with these; they are public for
//! hosts that build a merged document of their own.
//!
//! ```
//! use kube_aggregator::openapi::merge::{filter_by_path_prefixes, merge_into};
//! use serde_json::json;
//!
//! // A backend's spec also describes paths it does not own: only its group-version stays.
//! let remote = json!({"swagger": "2.0", "paths": {
//!     "/apis/metrics.k8s.io/v1beta1/nodes": {"get": {"responses": {"200": {"schema": {"$ref": "#/definitions/NodeMetrics"}}}}},
//!     "/version": {"get": {"responses": {"200": {"schema": {"$ref": "#/definitions/Info"}}}}}},
//!   "definitions": {"NodeMetrics": {"type": "object"}, "Info": {"type": "object"}}});
//! let filtered = filter_by_path_prefixes(&remote, &["/apis/metrics.k8s.io/v1beta1/"]);
//! assert!(filtered["paths"].get("/version").is_none());
//! assert!(filtered["definitions"].get("Info").is_none()); // only the dropped path used it
//!
//! // Merged into the host's spec: the host's paths win, a clashing definition is renamed.
//! let mut host = json!({"swagger": "2.0", "paths": {}, "definitions": {"NodeMetrics": {"type": "string"}}});
//! merge_into(host.as_object_mut().unwrap(), &filtered);
//! assert_eq!(host["definitions"]["NodeMetrics_v2"]["type"], "object");
//! let get = &host["paths"]["/apis/metrics.k8s.io/v1beta1/nodes"]["get"];
//! assert_eq!(get["responses"]["200"]["schema"]["$ref"], "#/definitions/NodeMetrics_v2");
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde_json::{Map, Value};

const DEFINITIONS: &str = "#/definitions/";
const PARAMETERS: &str = "#/parameters/";
const GVK: &str = "x-kubernetes-group-version-kind";

/// Every `$ref` string anywhere in `v`.
fn refs(v: &Value, out: &mut HashSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("$ref", Value::String(r)) => {
                        out.insert(r.clone());
                    }
                    _ => refs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

/// The definition names referenced from the paths, definitions, parameters and
/// responses of `spec` (upstream's `usedDefinitionForSpec`).
fn used_definitions(spec: &Map<String, Value>) -> HashSet<String> {
    let mut all = HashSet::new();
    for key in ["paths", "definitions", "parameters", "responses"] {
        if let Some(v) = spec.get(key) {
            refs(v, &mut all);
        }
    }
    all.into_iter()
        .filter_map(|r| r.strip_prefix(DEFINITIONS).map(str::to_owned))
        .collect()
}

/// `spec[key]` as an object, created (or replaced, when it is not an object) empty.
fn object_mut<'a>(spec: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = spec
        .entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    match slot {
        Value::Object(m) => m,
        _ => unreachable!("replaced by an object above"),
    }
}

/// `spec[key]` when it is an object.
fn object<'a>(spec: &'a Map<String, Value>, key: &str) -> Option<&'a Map<String, Value>> {
    spec.get(key).and_then(Value::as_object)
}

/// Keeps the paths of `spec` that start with one of `prefixes`, and drops the definitions
/// that only dropped paths used. A spec without `paths` is returned as is.
///
/// kube-aggregator calls it with the one prefix `/apis/<group>/<version>/` of each
/// APIService (upstream's `FilterSpecByPathsWithoutSideEffects`); `spec` is not changed.
pub fn filter_by_path_prefixes(spec: &Value, prefixes: &[&str]) -> Value {
    let Some(map) = spec.as_object() else {
        return spec.clone();
    };
    let Some(paths) = object(map, "paths") else {
        return spec.clone();
    };
    let initially_used = used_definitions(map);
    let mut out = map.clone();
    let kept: Map<String, Value> = paths
        .iter()
        .filter(|(p, _)| p.starts_with("x-") || prefixes.iter().any(|pre| p.starts_with(pre)))
        .map(|(p, v)| (p.clone(), v.clone()))
        .collect();
    out.insert("paths".into(), Value::Object(kept));
    let used = used_definitions(&out);
    if let Some(defs) = object(map, "definitions") {
        let defs: Map<String, Value> = defs
            .iter()
            .filter(|(k, _)| used.contains(*k) || !initially_used.contains(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        out.insert("definitions".into(), Value::Object(defs));
    }
    Value::Object(out)
}

/// Rewrites every `$ref` equal to a key of `renames` (full `#/...` strings).
fn rewrite_refs(v: &mut Value, renames: &HashMap<String, String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if let ("$ref", Value::String(r)) = (k.as_str(), &*x) {
                    if let Some(new) = renames.get(r) {
                        *x = Value::String(new.clone());
                    }
                    continue;
                }
                rewrite_refs(x, renames);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rewrite_refs(x, renames)),
        _ => {}
    }
}

/// `v` without its `x-kubernetes-group-version-kind`, for comparing definitions that
/// differ only in which group-versions claim them.
fn without_gvk(v: &Value) -> Value {
    let mut v = v.clone();
    if let Value::Object(m) = &mut v {
        m.remove(GVK);
    }
    v
}

/// True when `a` and `b` are equal once their GVK lists are set aside.
fn equal_modulo_gvk(a: &Value, b: &Value) -> bool {
    a == b || without_gvk(a) == without_gvk(b)
}

/// Picks new names for the entries of `section` in `source` that clash with different
/// ones in `dest`; returns old name -> new name.
fn renames_for(
    dest: &Map<String, Value>,
    source: &Map<String, Value>,
    equal: impl Fn(&Value, &Value) -> bool,
) -> BTreeMap<String, String> {
    let mut used: BTreeSet<String> = dest.keys().cloned().collect();
    let mut renames = BTreeMap::new();
    let mut names: Vec<&String> = source.keys().collect();
    names.sort();
    'names: for k in names {
        let v = &source[k];
        match dest.get(k) {
            None => continue,
            Some(existing) if equal(existing, v) => continue,
            Some(_) => {}
        }
        let mut i = 1;
        let mut new_name;
        loop {
            i += 1;
            new_name = format!("{k}_v{i}");
            match dest.get(&new_name) {
                Some(existing) if equal(existing, v) => {
                    renames.insert(k.clone(), new_name);
                    continue 'names;
                }
                Some(_) => continue,
                None => break,
            }
        }
        while used.contains(&new_name) || source.contains_key(&new_name) {
            i += 1;
            new_name = format!("{k}_v{i}");
        }
        used.insert(new_name.clone());
        renames.insert(k.clone(), new_name);
    }
    renames
}

/// Renames entries of `source[section]` and every reference to them (`prefix` + name).
fn apply_renames(
    source: &mut Map<String, Value>,
    section: &str,
    prefix: &str,
    renames: &BTreeMap<String, String>,
) {
    if renames.is_empty() {
        return;
    }
    let refs: HashMap<String, String> = renames
        .iter()
        .map(|(k, v)| (format!("{prefix}{k}"), format!("{prefix}{v}")))
        .collect();
    for v in source.values_mut() {
        rewrite_refs(v, &refs);
    }
    if let Some(Value::Object(m)) = source.get_mut(section) {
        let old = std::mem::take(m);
        for (k, v) in old {
            let k = renames.get(&k).cloned().unwrap_or(k);
            m.insert(k, v);
        }
    }
}

/// The union of two GVK lists, sorted by `group/version.kind` when anything was added.
fn merged_gvks(dest: &Value, source: &Value) -> Option<Value> {
    let (Some(a), Some(b)) = (dest.as_array(), source.as_array()) else {
        return None;
    };
    let key = |x: &Value| {
        let f = |k: &str| {
            x.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        format!("{}/{}.{}", f("group"), f("version"), f("kind"))
    };
    let seen: HashSet<String> = a.iter().map(key).collect();
    let mut out: Vec<Value> = a.clone();
    let mut changed = false;
    for x in b {
        if !seen.contains(&key(x)) {
            out.push(x.clone());
            changed = true;
        }
    }
    if !changed {
        return None;
    }
    out.sort_by_key(key);
    Some(Value::Array(out))
}

/// Merges `source` into `dest` (both Swagger 2.0 objects): the first spec's paths win,
/// clashing definitions and parameters are renamed. `source` is not changed.
///
/// Upstream's `MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters`: a path of
/// `source` that `dest` has is skipped whole; a definition or parameter of the same name
/// and equal content is shared, a different one is renamed `<name>_v2`, `_v3`, ... and
/// every `$ref` in `source` follows the rename.
pub fn merge_into(dest: &mut Map<String, Value>, source: &Value) {
    let Some(source_map) = source.as_object() else {
        return;
    };
    let Some(source_paths) = object(source_map, "paths") else {
        return; // a spec without paths uses none of its definitions
    };
    let dest_paths: HashSet<String> = object(dest, "paths")
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    let keep: Vec<&str> = source_paths
        .keys()
        .filter(|p| !dest_paths.contains(*p))
        .map(String::as_str)
        .collect();
    if keep.is_empty() {
        return;
    }
    let mut source = if keep.len() < source_paths.len() {
        match filter_by_path_prefixes(source, &keep) {
            Value::Object(m) => m,
            _ => return,
        }
    } else {
        source_map.clone()
    };
    let empty = Map::new();
    let renames = renames_for(
        object(dest, "definitions").unwrap_or(&empty),
        object(&source, "definitions").unwrap_or(&empty),
        equal_modulo_gvk,
    );
    apply_renames(&mut source, "definitions", DEFINITIONS, &renames);
    let renames = renames_for(
        object(dest, "parameters").unwrap_or(&empty),
        object(&source, "parameters").unwrap_or(&empty),
        |a, b| a == b,
    );
    apply_renames(&mut source, "parameters", PARAMETERS, &renames);

    if let Some(defs) = object(&source, "definitions") {
        let dest_defs = object_mut(dest, "definitions");
        for (k, v) in defs {
            match dest_defs.get_mut(k) {
                None => {
                    dest_defs.insert(k.clone(), v.clone());
                }
                Some(existing) => {
                    let (a, b) = (existing.get(GVK).cloned(), v.get(GVK));
                    let merged = match (a, b) {
                        (Some(a), Some(b)) => merged_gvks(&a, b),
                        (None, Some(b)) => Some(b.clone()),
                        _ => None,
                    };
                    if let (Some(m), Value::Object(e)) = (merged, existing) {
                        e.insert(GVK.into(), m);
                    }
                }
            }
        }
    }
    if let Some(params) = object(&source, "parameters") {
        let dest_params = object_mut(dest, "parameters");
        for (k, v) in params {
            if !dest_params.contains_key(k) {
                dest_params.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(paths) = object(&source, "paths") {
        let dest_paths = object_mut(dest, "paths");
        for (k, v) in paths {
            if !dest_paths.contains_key(k) {
                dest_paths.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Merges `specs` in order: the first one's top-level fields (`swagger`, `info`,
/// `securityDefinitions`, ...) are kept, `paths`, `definitions` and `parameters` come
/// from all; the maps are written with sorted keys, as Go writes them.
///
/// The order is the caller's: the manager passes the host's spec first, then the remote
/// specs by group priority, then name, as upstream's aggregator sorts them. Values that
/// are not objects are skipped; no specs give an empty object.
pub fn merge_all<'a>(specs: impl IntoIterator<Item = &'a Value>) -> Value {
    let mut merged: Option<Map<String, Value>> = None;
    for spec in specs {
        let Some(m) = spec.as_object() else { continue };
        let dest = merged.get_or_insert_with(|| {
            let mut top = m.clone();
            top.remove("paths");
            top.remove("definitions");
            top.remove("parameters");
            top
        });
        merge_into(dest, spec);
    }
    let mut out = merged.unwrap_or_default();
    for key in ["paths", "definitions", "parameters"] {
        if let Some(Value::Object(m)) = out.get_mut(key) {
            let mut entries: Vec<(String, Value)> = std::mem::take(m).into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            m.extend(entries);
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn gvk(kind: &str) -> Value {
        json!([{"group": "g", "kind": kind, "version": "v1"}])
    }

    #[test]
    fn filter_keeps_prefixed_paths_and_shared_definitions() {
        let spec = json!({
            "paths": {
                "/apis/a/v1/xs": {"get": {"responses": {"200": {"schema": {"$ref": "#/definitions/X"}}}}},
                "/apis/b/v1/ys": {"get": {"responses": {"200": {"schema": {"$ref": "#/definitions/Y"}}}}},
                "/version": {"get": {"responses": {"200": {"schema": {"$ref": "#/definitions/Info"}}}}}
            },
            "definitions": {"X": {"properties": {"m": {"$ref": "#/definitions/Meta"}}}, "Y": {}, "Meta": {}, "Info": {}, "Unused": {}}
        });
        let out = filter_by_path_prefixes(&spec, &["/apis/a/v1/"]);
        let paths: Vec<&String> = out["paths"].as_object().unwrap().keys().collect();
        assert_eq!(paths, ["/apis/a/v1/xs"]);
        let defs: BTreeSet<&str> = out["definitions"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        // Y and Info were used only by dropped paths; Unused was never used and stays.
        assert_eq!(defs, BTreeSet::from(["X", "Meta", "Unused"]));
    }

    #[test]
    fn conflicts_are_renamed_and_references_follow() {
        let first = json!({
            "swagger": "2.0", "info": {"title": "first"},
            "paths": {"/apis/a/v1/xs": {"get": {}}, "/shared": {"get": {"description": "first"}}},
            "definitions": {"Status": {"type": "object", "x-kubernetes-group-version-kind": gvk("Status")},
                            "Widget": {"type": "object"}},
            "parameters": {"limit": {"name": "limit", "in": "query", "type": "integer"}}
        });
        let second = json!({
            "swagger": "2.0", "info": {"title": "second"},
            "paths": {"/apis/b/v1/ys": {"get": {"parameters": [{"$ref": "#/parameters/limit"}],
                        "responses": {"200": {"schema": {"$ref": "#/definitions/Widget"}}}}},
                      "/shared": {"get": {"description": "second"}}},
            "definitions": {"Status": {"type": "object", "x-kubernetes-group-version-kind": gvk("Other")},
                            "Widget": {"type": "string"}},
            "parameters": {"limit": {"name": "limit", "in": "query", "type": "string"}}
        });
        let merged = merge_all([&first, &second]);
        assert_eq!(merged["info"]["title"], "first");
        assert_eq!(merged["paths"]["/shared"]["get"]["description"], "first");
        let ys = &merged["paths"]["/apis/b/v1/ys"]["get"];
        assert_eq!(
            ys["responses"]["200"]["schema"]["$ref"],
            "#/definitions/Widget_v2"
        );
        assert_eq!(ys["parameters"][0]["$ref"], "#/parameters/limit_v2");
        assert_eq!(merged["definitions"]["Widget_v2"]["type"], "string");
        assert_eq!(merged["definitions"]["Widget"]["type"], "object");
        assert_eq!(merged["parameters"]["limit_v2"]["type"], "string");
        // Equal but for the GVK list: shared, lists united and sorted.
        let kinds = crate::testing::strings(&merged["definitions"]["Status"][GVK], "kind");
        assert_eq!(kinds, ["Other", "Status"]);
        assert!(merged["definitions"].get("Status_v2").is_none());

        // A third spec whose Widget equals the renamed one reuses Widget_v2.
        let third = json!({"paths": {"/apis/c/v1/zs": {"get": {"responses": {"200": {"schema": {"$ref": "#/definitions/Widget"}}}}}},
                           "definitions": {"Widget": {"type": "string"}}});
        let merged = merge_all([&first, &second, &third]);
        assert_eq!(
            merged["paths"]["/apis/c/v1/zs"]["get"]["responses"]["200"]["schema"]["$ref"],
            "#/definitions/Widget_v2"
        );
        assert!(merged["definitions"].get("Widget_v3").is_none());
    }
}
