//! Discovery documents: legacy and aggregated (v2).
//!
//! **Legacy**, as kube-aggregator
//! [`pkg/apiserver/handler_apis.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/handler_apis.go) serves
//! it: `GET /apis` answers an `APIGroupList` whose first group is
//! `apiregistration.k8s.io`, then one entry per APIService group in priority order
//! (unavailable ones included); `GET /apis/<group>` answers that group's `APIGroup`. The
//! documents are encoded once per registry change and served from the snapshot. Groups the
//! host serves itself (found in the inner service's own `/apis`) are appended after the
//! aggregated ones.
//!
//! **Aggregated** (`apidiscovery.k8s.io/v2` and `v2beta1`; apiserver
//! [`pkg/endpoints/discovery/aggregated/handler.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/discovery/aggregated/handler.go),
//! kube-aggregator
//! [`pkg/apiserver/handler_discovery.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/handler_discovery.go)): [`negotiate`] reads the
//! `Accept` header; the [`DiscoveryManager`] fetches each remote Service's discovery off
//! the request path and publishes an [`AggregatedDocument`] (apiregistration first, then
//! groups by their highest `groupPriorityMinimum`, then name; versions by
//! `versionPriority`, then the Kubernetes version order), encoded once with its ETag. The
//! request path serves it with `ETag`, `Vary: Accept`, `Cache-Control: public` and 304 on
//! a matching `If-None-Match`, merging in the host's own groups (asked from the inner
//! service with the same `Accept`, or its legacy documents converted).
//!
//! This module takes plain data ([`Target`], group and version names) and knows nothing
//! of the registry; [`Registry::feed`](crate::registry::Registry::feed) connects the two.
//!
//! ```
//! use kube_aggregator::discovery::{AggregatedVersion, DocumentBuilder, VersionEntry};
//! use kube_aggregator::discovery::v2::{ApiVersionDiscovery, Freshness};
//!
//! let mut builder = DocumentBuilder::new();
//! builder.set("metrics.k8s.io", VersionEntry {
//!     discovery: ApiVersionDiscovery { version: "v1beta1".into(), resources: vec![], freshness: Some(Freshness::Stale) },
//!     group_priority_minimum: 100,
//!     version_priority: 100,
//! });
//! let doc = builder.build();
//! let names: Vec<&str> = doc.groups().iter().map(|g| g.name()).collect();
//! assert_eq!(names, ["apiregistration.k8s.io", "metrics.k8s.io"]);
//! assert!(doc.body(AggregatedVersion::V2).starts_with(br#"{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2""#));
//! ```
//!
//! The [`DiscoveryManager`] fed one remote APIService whose backend answers a v2
//! document (the registry's [`Registry::feed`](crate::registry::Registry::feed) does the
//! feeding in a real stack):
//!
//! ```
//! use http::{Request, Response};
//! use kube_aggregator::Body;
//! use kube_aggregator::discovery::{
//!     DiscoveryConfig, DiscoveryManager, Fetcher, ServiceKey, Target, TargetSet, TargetSink, V2_JSON,
//! };
//! use kube_aggregator::discovery::v2::Freshness;
//! use kube_aggregator::rt::Timer;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let backend: Fetcher = Fetcher::new(tower::service_fn(|_: Request<Body>| async {
//!     let doc = r#"{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","items":[
//!         {"metadata":{"name":"metrics.k8s.io"},"versions":[{"version":"v1beta1",
//!          "resources":[{"resource":"nodes","responseKind":{"group":"metrics.k8s.io","version":"v1beta1","kind":"NodeMetrics"},
//!                        "scope":"Cluster","verbs":["get","list"]}]}]}]}"#;
//!     Ok(Response::builder().header("content-type", V2_JSON).body(Body::full(doc)).unwrap())
//! }));
//! let manager = DiscoveryManager::new(Timer::tokio(), DiscoveryConfig::default());
//! manager.sync(&TargetSet {
//!     generation: 1,
//!     remote: vec![Target {
//!         name: "v1beta1.metrics.k8s.io".into(),
//!         group: "metrics.k8s.io".into(),
//!         version: "v1beta1".into(),
//!         group_priority_minimum: 100,
//!         version_priority: 100,
//!         service: ServiceKey { namespace: "kube-system".into(), name: "metrics-server".into(), port: 443 },
//!         available: true,
//!         fetcher: backend,
//!     }],
//!     local: Vec::new(),
//! });
//! tokio::spawn(manager.clone().run());
//! manager.synced().await; // every Service known at the first sync was fetched once
//!
//! let doc = manager.document();
//! let metrics = doc.groups().iter().find(|g| g.name() == "metrics.k8s.io").unwrap();
//! let v1beta1 = &metrics.versions()[0].discovery;
//! assert_eq!(v1beta1.freshness, Some(Freshness::Current));
//! assert_eq!(v1beta1.resources[0].resource, "nodes");
//! # }
//! ```
//!
//! Floor 2 of the import order (docs/architecture.md): uses `apiservice`, `body`,
//! `identity`, `refresh`, `rt`, `status`; used by `aggregator`, `apiregistration`,
//! `builder`, `fuzz_logic`, `openapi`, `registry`.

mod config;
mod document;
mod fetch;
mod manager;
mod negotiate;
mod serve;
mod target;
pub mod v2;

pub use config::{DEFAULT_MAX_DOCUMENT_BYTES, DiscoveryConfig};
pub use document::{
    APIREGISTRATION_GROUP_PRIORITY, AggregatedDocument, DEFAULT_GROUP_PRIORITY,
    DEFAULT_VERSION_PRIORITY, DocumentBuilder, GroupDocument, VersionEntry, etag_of, sha512_hex,
};
pub use manager::{AggregationCount, DiscoveryManager, Synced};
pub(crate) use negotiate::parse_accept;
pub use negotiate::{
    AggregatedVersion, Negotiated, V2_JSON, V2BETA1_JSON, is_aggregated_content_type, negotiate,
};
pub(crate) use serve::{aggregated_response, not_acceptable};
pub use target::{Fetcher, LocalVersion, ServiceKey, Target, TargetSet, TargetSink};

use bytes::Bytes;
use serde_json::{Value, json};

/// The `APIGroup` of `apiregistration.k8s.io`, always listed first: version `v1` only
/// (this crate serves no `v1beta1`), preferred `v1`.
pub(crate) fn apiregistration_group() -> Value {
    group_value(crate::apiservice::API_GROUP, ["v1"].into_iter())
}

/// One group's `APIGroup` body without type meta (as an item of `APIGroupList`):
/// `name`, `versions` as `{groupVersion, version}`, and the first version as
/// `preferredVersion` (`null` when there is none).
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
/// core group in the given order, each with its versions in the given order.
pub(crate) fn api_group_list_json<'a, V>(groups: impl Iterator<Item = (&'a str, V)>) -> Bytes
where
    V: Iterator<Item = &'a str>,
{
    let mut list = vec![apiregistration_group()];
    for (name, versions) in groups.filter(|(name, _)| !name.is_empty()) {
        list.push(group_value(name, versions));
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
        let ours = api_group_list_json(std::iter::empty::<(&str, std::iter::Empty<&str>)>());
        let theirs = br#"{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"apiregistration.k8s.io"},{"name":"apps","versions":[]}]}"#;
        let merged: Value =
            serde_json::from_slice(&merge_group_lists(&ours, theirs).unwrap()).unwrap();
        let names = crate::testing::strings(&merged["groups"], "name");
        assert_eq!(names, ["apiregistration.k8s.io", "apps"]);
        assert!(merge_group_lists(&ours, b"404 page not found").is_none());
    }
}
