//! Discovery documents for aggregated groups.
//!
//! Legacy discovery as kube-aggregator `handler_apis.go` serves it (docs/upstream-behaviour.md §5.1–5.2):
//! `GET /apis` answers an `APIGroupList` whose first group is `apiregistration.k8s.io`,
//! then one entry per APIService group in priority order (unavailable ones included);
//! `GET /apis/<group>` answers that group's `APIGroup`. The documents are encoded once per
//! registry change and served from the snapshot. Groups the host serves itself (found in
//! the inner service's own `/apis`) are appended after the aggregated ones.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::registry::GroupRoutes;

/// The `APIGroup` of `apiregistration.k8s.io`, always listed first.
pub(crate) fn apiregistration_group() -> Value {
    group_value(crate::apiservice::API_GROUP, ["v1"].into_iter())
}

fn group_value<'a>(group: &str, versions: impl Iterator<Item = &'a str>) -> Value {
    let versions: Vec<Value> = versions
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": versions, "preferredVersion": preferred})
}

/// The `APIGroup` document of one group, versions in the given (priority) order.
pub(crate) fn api_group_json<'a>(group: &str, versions: impl Iterator<Item = &'a str>) -> Bytes {
    let mut v = group_value(group, versions);
    if let Value::Object(map) = &mut v {
        // kind and apiVersion lead, as the Go encoder writes TypeMeta first.
        let mut out = serde_json::Map::new();
        out.insert("kind".into(), "APIGroup".into());
        out.insert("apiVersion".into(), "v1".into());
        out.extend(std::mem::take(map));
        v = Value::Object(out);
    }
    Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
}

/// The `/apis` `APIGroupList`: apiregistration.k8s.io, then every group but the legacy
/// core group in `groups` order.
pub(crate) fn api_group_list_json(groups: &[std::sync::Arc<GroupRoutes>]) -> Bytes {
    let mut list = vec![apiregistration_group()];
    for g in groups.iter().filter(|g| !g.name.is_empty()) {
        list.push(group_value(
            &g.name,
            g.versions
                .iter()
                .map(|r| r.apiservice.spec.version.as_str()),
        ));
    }
    let doc = json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": list});
    Bytes::from(serde_json::to_vec(&doc).unwrap_or_default())
}

/// Appends to `ours` (an APIGroupList) the groups of `theirs` (the inner service's
/// APIGroupList) that `ours` does not list. Returns `None` when either does not parse.
pub(crate) fn merge_group_lists(ours: &[u8], theirs: &[u8]) -> Option<Bytes> {
    let mut ours: Value = serde_json::from_slice(ours).ok()?;
    let theirs: Value = serde_json::from_slice(theirs).ok()?;
    if theirs.get("kind").and_then(Value::as_str) != Some("APIGroupList") {
        return None;
    }
    let extra: Vec<Value> = theirs.get("groups")?.as_array()?.clone();
    let list = ours.get_mut("groups")?.as_array_mut()?;
    for g in extra {
        let name = g.get("name").and_then(Value::as_str).unwrap_or_default();
        if !list
            .iter()
            .any(|o| o.get("name").and_then(Value::as_str) == Some(name))
        {
            list.push(g);
        }
    }
    Some(Bytes::from(serde_json::to_vec(&ours).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_group_document_shape() {
        let b = api_group_json("foo", ["v2", "v1"].into_iter());
        assert_eq!(
            std::str::from_utf8(&b).unwrap(),
            r#"{"kind":"APIGroup","apiVersion":"v1","name":"foo","versions":[{"groupVersion":"foo/v2","version":"v2"},{"groupVersion":"foo/v1","version":"v1"}],"preferredVersion":{"groupVersion":"foo/v2","version":"v2"}}"#
        );
    }

    #[test]
    fn merge_appends_only_new_groups() {
        let ours = api_group_list_json(&[]);
        let theirs = br#"{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"apiregistration.k8s.io"},{"name":"apps","versions":[]}]}"#;
        let merged: Value =
            serde_json::from_slice(&merge_group_lists(&ours, theirs).unwrap()).unwrap();
        let names: Vec<&str> = merged["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["apiregistration.k8s.io", "apps"]);
        assert!(merge_group_lists(&ours, b"404 page not found").is_none());
    }
}
