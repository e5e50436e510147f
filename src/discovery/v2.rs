//! The `apidiscovery.k8s.io/v2` types (kubernetes/api
//! [`apidiscovery/v2/types.go`](https://github.com/kubernetes/api/blob/master/apidiscovery/v2/types.go)), in Go's
//! JSON field order, and the conversion of a legacy `APIResourceList` into them
//! (apiserver [`pkg/endpoints/installer.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/installer.go)
//! `ConvertGroupVersionIntoToDiscovery`).
//!
//! Decoding is lenient as Go's is: unknown fields are ignored and `null` reads as empty.
//! `v2beta1` has the same shape; only the list's `apiVersion` differs.
//!
//! The discovery manager reads backends' documents into these types, and the
//! [`DocumentBuilder`](super::DocumentBuilder) writes them back out; a host can use them
//! to build the entries of its own groups.
//!
//! ```
//! use kube_aggregator::discovery::v2::{ApiGroupDiscoveryList, ApiResource, convert_legacy_resources};
//!
//! // A backend's document, with a resource whose responseKind is null.
//! let mut list: ApiGroupDiscoveryList = serde_json::from_str(r#"{
//!   "kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
//!   "items": [{"metadata": {"name": "metrics.k8s.io"}, "versions": [{"version": "v1beta1",
//!     "resources": [{"resource": "nodes", "responseKind": null, "scope": "Cluster", "verbs": ["get", "list"]}],
//!     "freshness": "Current"}]}]}"#).unwrap();
//! list.fill_response_kinds();
//! assert!(list.items[0].versions[0].resources[0].response_kind.is_some());
//!
//! // A legacy APIResourceList's entries, converted: subresources go under their parent.
//! let legacy: Vec<ApiResource> = serde_json::from_str(r#"[
//!   {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "PodMetrics", "verbs": ["get"]},
//!   {"name": "pods/status", "namespaced": true, "kind": "PodMetrics", "verbs": ["get"]}]"#).unwrap();
//! let v2 = convert_legacy_resources(&legacy).unwrap();
//! assert_eq!((v2.len(), v2[0].scope.as_str()), (1, "Namespaced"));
//! assert_eq!(v2[0].subresources[0].subresource, "status");
//! ```

use serde::{Deserialize, Deserializer, Serialize};

/// `null` or a missing field reads as the type's default, as Go's decoder leaves it (a Go
/// slice decoded from `null` is nil, which encodes as absent or `null` again; here it is
/// empty, which the types omit or write as `[]` like upstream's encoder does for them).
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// `metav1.GroupVersionKind`; every field is always written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GroupVersionKind {
    /// API group, empty for the core group.
    #[serde(deserialize_with = "nullable")]
    pub group: String,
    /// API version.
    #[serde(deserialize_with = "nullable")]
    pub version: String,
    /// Kind.
    #[serde(deserialize_with = "nullable")]
    pub kind: String,
}

/// `APISubresourceDiscovery`: one subresource of a resource (`status`, `scale`, `log`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApiSubresourceDiscovery {
    /// The subresource name, e.g. `status`.
    #[serde(deserialize_with = "nullable")]
    pub subresource: String,
    /// What the subresource returns; `None` omits the field (fetched documents have it
    /// filled with an empty kind, [`ApiGroupDiscoveryList::fill_response_kinds`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_kind: Option<GroupVersionKind>,
    /// Kinds the subresource accepts as a request body (e.g. `autoscaling/v1 Scale`);
    /// omitted when empty.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub accepted_types: Vec<GroupVersionKind>,
    /// Verbs.
    #[serde(deserialize_with = "nullable")]
    pub verbs: Vec<String>,
}

/// `APIResourceDiscovery`: one resource of a group-version, as `kubectl api-resources`
/// lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApiResourceDiscovery {
    /// Plural resource name, e.g. `nodes`.
    #[serde(deserialize_with = "nullable")]
    pub resource: String,
    /// The kind a GET returns; `None` omits the field. Old client-go versions crash on a
    /// missing one, which is why fetched documents are filled in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_kind: Option<GroupVersionKind>,
    /// `Cluster` or `Namespaced`.
    #[serde(deserialize_with = "nullable")]
    pub scope: String,
    /// Singular name, e.g. `node`; may be empty.
    #[serde(deserialize_with = "nullable")]
    pub singular_resource: String,
    /// Verbs (`get`, `list`, `watch`, `create`, ...), always written (`[]` when none).
    #[serde(deserialize_with = "nullable")]
    pub verbs: Vec<String>,
    /// Short names, e.g. `no`.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub short_names: Vec<String>,
    /// Categories, e.g. `all`.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// Subresources.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub subresources: Vec<ApiSubresourceDiscovery>,
}

/// `DiscoveryFreshness`: whether a group-version's entry is from a fetch that succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Freshness {
    /// The last fetch succeeded.
    Current,
    /// The last fetch failed; resources are the last ones known (possibly none).
    Stale,
}

/// `APIVersionDiscovery`: one version of a group and its resources.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiVersionDiscovery {
    /// The version, e.g. `v1beta1`.
    #[serde(deserialize_with = "nullable")]
    pub version: String,
    /// Its resources.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ApiResourceDiscovery>,
    /// `Current` or `Stale`; omitted when unset.
    #[serde(
        deserialize_with = "lenient_freshness",
        skip_serializing_if = "Option::is_none"
    )]
    pub freshness: Option<Freshness>,
}

/// An unknown freshness value reads as unset rather than failing the whole document.
fn lenient_freshness<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Freshness>, D::Error> {
    Ok(match Option::<String>::deserialize(d)?.as_deref() {
        Some("Current") => Some(Freshness::Current),
        Some("Stale") => Some(Freshness::Stale),
        _ => None,
    })
}

/// The `metadata` of an `APIGroupDiscovery`: only the name is used.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GroupMeta {
    /// The group name; empty (and then omitted) for the core group.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
}

/// `APIGroupDiscovery`: one group and its versions, as an item of the
/// `APIGroupDiscoveryList`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiGroupDiscovery {
    /// `metadata.name` is the group.
    #[serde(deserialize_with = "nullable")]
    pub metadata: GroupMeta,
    /// Versions, highest priority first.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<ApiVersionDiscovery>,
}

/// `APIGroupDiscoveryList` as read from a backend (`kind`/`apiVersion` are checked by the
/// caller through the response's content type, as upstream does).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ApiGroupDiscoveryList {
    /// The groups.
    #[serde(deserialize_with = "nullable")]
    pub items: Vec<ApiGroupDiscovery>,
}

impl ApiGroupDiscoveryList {
    /// Fills every missing `responseKind` (resources and subresources) with an empty one,
    /// as kube-aggregator does for documents it fetches (old client-go versions crash on
    /// a null one, kubernetes/kubernetes#118361).
    pub fn fill_response_kinds(&mut self) {
        for g in &mut self.items {
            for v in &mut g.versions {
                fill_version(v);
            }
        }
    }
}

/// [`ApiGroupDiscoveryList::fill_response_kinds`] for one version's resources.
pub(crate) fn fill_version(v: &mut ApiVersionDiscovery) {
    for r in &mut v.resources {
        r.response_kind
            .get_or_insert_with(GroupVersionKind::default);
        for s in &mut r.subresources {
            s.response_kind
                .get_or_insert_with(GroupVersionKind::default);
        }
    }
}

/// `metav1.APIResource` as a legacy `APIResourceList` carries it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApiResource {
    /// Plural name, or `<resource>/<subresource>`.
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    /// Singular name.
    #[serde(deserialize_with = "nullable")]
    pub singular_name: String,
    /// Namespaced or cluster-scoped.
    #[serde(deserialize_with = "nullable")]
    pub namespaced: bool,
    /// Group of the kind, usually empty (the list's group).
    #[serde(deserialize_with = "nullable")]
    pub group: String,
    /// Version of the kind, usually empty (the list's version).
    #[serde(deserialize_with = "nullable")]
    pub version: String,
    /// Kind.
    #[serde(deserialize_with = "nullable")]
    pub kind: String,
    /// Verbs.
    #[serde(deserialize_with = "nullable")]
    pub verbs: Vec<String>,
    /// Short names.
    #[serde(deserialize_with = "nullable")]
    pub short_names: Vec<String>,
    /// Categories.
    #[serde(deserialize_with = "nullable")]
    pub categories: Vec<String>,
}

/// A legacy `APIResourceList` (`GET /apis/<group>/<version>`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApiResourceList {
    /// `<group>/<version>`, or `v1` for the core group.
    #[serde(deserialize_with = "nullable")]
    pub group_version: String,
    /// Resources and subresources.
    #[serde(deserialize_with = "nullable")]
    pub resources: Vec<ApiResource>,
}

/// A legacy resource list could not be converted: a subresource's scope differs from its
/// parent's (upstream's error text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Error: Parent {parent} (scope: {parent_scope}) and subresource {subresource} (scope: {scope}) scope do not match"
)]
pub struct ConvertError {
    /// The parent resource.
    pub parent: String,
    /// Its scope.
    pub parent_scope: String,
    /// The subresource.
    pub subresource: String,
    /// The subresource's scope.
    pub scope: String,
}

/// The v2 scope of a legacy resource: `Namespaced` or `Cluster`.
fn scope(namespaced: bool) -> &'static str {
    if namespaced { "Namespaced" } else { "Cluster" }
}

/// Converts legacy resources to v2 entries: top-level resources first, in order, then each
/// `<parent>/<sub>` attached to its parent (a parent that is missing is created with an
/// empty `responseKind`), as upstream's `ConvertGroupVersionIntoToDiscovery`.
///
/// A subresource without a kind gets an empty `responseKind`; `acceptedTypes` is never
/// filled (legacy lists do not carry it).
///
/// # Errors
///
/// [`ConvertError`] when a subresource is namespaced and its parent is not, or the other
/// way round (upstream's message). The discovery manager then marks that group-version
/// stale.
pub fn convert_legacy_resources(
    list: &[ApiResource],
) -> Result<Vec<ApiResourceDiscovery>, ConvertError> {
    let mut out: Vec<ApiResourceDiscovery> = Vec::new();
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for r in list.iter().filter(|r| !r.name.contains('/')) {
        out.push(ApiResourceDiscovery {
            resource: r.name.clone(),
            response_kind: Some(GroupVersionKind {
                group: r.group.clone(),
                version: r.version.clone(),
                kind: r.kind.clone(),
            }),
            scope: scope(r.namespaced).to_owned(),
            singular_resource: r.singular_name.clone(),
            verbs: r.verbs.clone(),
            short_names: r.short_names.clone(),
            categories: r.categories.clone(),
            subresources: Vec::new(),
        });
        index.insert(r.name.as_str(), out.len() - 1);
    }
    for r in list {
        let Some((parent, sub)) = r.name.split_once('/') else {
            continue;
        };
        let s = scope(r.namespaced);
        let at = match index.get(parent) {
            Some(&i) => i,
            None => {
                out.push(ApiResourceDiscovery {
                    resource: parent.to_owned(),
                    response_kind: Some(GroupVersionKind::default()),
                    scope: s.to_owned(),
                    ..ApiResourceDiscovery::default()
                });
                index.insert(parent, out.len() - 1);
                out.len() - 1
            }
        };
        if out[at].scope != s {
            return Err(ConvertError {
                parent: parent.to_owned(),
                parent_scope: out[at].scope.clone(),
                subresource: sub.to_owned(),
                scope: s.to_owned(),
            });
        }
        let response_kind = if r.kind.is_empty() {
            GroupVersionKind::default()
        } else {
            GroupVersionKind {
                group: r.group.clone(),
                version: r.version.clone(),
                kind: r.kind.clone(),
            }
        };
        out[at].subresources.push(ApiSubresourceDiscovery {
            subresource: sub.to_owned(),
            response_kind: Some(response_kind),
            accepted_types: Vec::new(),
            verbs: r.verbs.clone(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_resources_convert_with_subresources_attached() {
        let list: ApiResourceList = serde_json::from_str(
            r#"{"kind":"APIResourceList","groupVersion":"metrics.k8s.io/v1beta1","resources":[
                {"name":"nodes","singularName":"","namespaced":false,"kind":"NodeMetrics","verbs":["get","list"]},
                {"name":"pods/status","namespaced":true,"kind":"PodMetrics","verbs":["get"]},
                {"name":"pods","singularName":"pod","namespaced":true,"kind":"PodMetrics","verbs":null,"shortNames":["pm"]}]}"#,
        )
        .unwrap();
        let v2 = convert_legacy_resources(&list.resources).unwrap();
        let json = serde_json::to_string(&v2).unwrap();
        assert_eq!(
            json,
            r#"[{"resource":"nodes","responseKind":{"group":"","version":"","kind":"NodeMetrics"},"scope":"Cluster","singularResource":"","verbs":["get","list"]},{"resource":"pods","responseKind":{"group":"","version":"","kind":"PodMetrics"},"scope":"Namespaced","singularResource":"pod","verbs":[],"shortNames":["pm"],"subresources":[{"subresource":"status","responseKind":{"group":"","version":"","kind":"PodMetrics"},"verbs":["get"]}]}]"#
        );
        let orphan = [ApiResource {
            name: "widgets/scale".into(),
            namespaced: true,
            ..ApiResource::default()
        }];
        let v2 = convert_legacy_resources(&orphan).unwrap();
        assert_eq!(v2[0].resource, "widgets");
        assert_eq!(v2[0].response_kind, Some(GroupVersionKind::default()));
        let mismatch = [
            ApiResource {
                name: "a".into(),
                ..ApiResource::default()
            },
            ApiResource {
                name: "a/b".into(),
                namespaced: true,
                ..ApiResource::default()
            },
        ];
        assert_eq!(
            convert_legacy_resources(&mismatch).unwrap_err().to_string(),
            "Error: Parent a (scope: Cluster) and subresource b (scope: Namespaced) scope do not match"
        );
    }

    #[test]
    fn backend_documents_decode_leniently() {
        let mut list: ApiGroupDiscoveryList = serde_json::from_str(
            r#"{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[
               {"metadata":{"name":"a","creationTimestamp":null},"versions":[{"version":"v1","freshness":"Weird",
               "resources":[{"resource":"x","scope":"Cluster","verbs":null,"subresources":[{"subresource":"s","verbs":["get"]}]}]}]},
               {"metadata":null,"versions":null}]}"#,
        )
        .unwrap();
        assert_eq!(list.items.len(), 2);
        assert_eq!(list.items[0].versions[0].freshness, None);
        list.fill_response_kinds();
        let r = &list.items[0].versions[0].resources[0];
        assert_eq!(r.response_kind, Some(GroupVersionKind::default()));
        assert_eq!(
            r.subresources[0].response_kind,
            Some(GroupVersionKind::default())
        );
    }
}
