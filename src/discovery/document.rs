//! The aggregated discovery document: group-versions with their priorities, sorted and
//! encoded as apiserver's `resourceDiscoveryManager` does
//! ([`pkg/endpoints/discovery/aggregated/handler.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/discovery/aggregated/handler.go)).
//!
//! Order: `apiregistration.k8s.io` first (priority 20001), then groups by the highest
//! `groupPriorityMinimum` of their versions, descending, ties by group name; versions by
//! `versionPriority` descending, ties by the Kubernetes version order. This differs from
//! the legacy `/apis`, which breaks group ties by APIService name, exactly as upstream
//! differs.
//!
//! A [`DocumentBuilder`] keeps every group-version; [`DocumentBuilder::build`] re-encodes
//! only the groups changed since the last build and joins the cached encodings of the
//! others, so one update costs one group's encoding, the sort and one SHA-512 pass.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use http::HeaderValue;

use super::negotiate::AggregatedVersion;
use super::v2::{
    ApiGroupDiscovery, ApiResourceDiscovery, ApiVersionDiscovery, Freshness, GroupMeta,
    GroupVersionKind,
};
use crate::apiservice::compare_kube_aware_versions;

/// `groupPriorityMinimum` of a group-version that was given none (upstream's default).
pub const DEFAULT_GROUP_PRIORITY: i32 = 1000;
/// `versionPriority` of a group-version that was given none (upstream's default).
pub const DEFAULT_VERSION_PRIORITY: i32 = 15;
/// The group priority that pins `apiregistration.k8s.io` first (upstream: 20001, above
/// the 20000 an APIService may have).
pub const APIREGISTRATION_GROUP_PRIORITY: i32 = 20001;

/// One group-version of the document and where it sorts. Build one per APIService (its
/// `spec` priorities) or per group-version the host serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionEntry {
    /// The entry as served (version, resources, freshness).
    pub discovery: ApiVersionDiscovery,
    /// The group's place: a group ranks by the highest value among its versions.
    pub group_priority_minimum: i32,
    /// The version's place inside its group, highest first.
    pub version_priority: i32,
}

/// One group of a built document: versions sorted, and its encoded JSON item.
#[derive(Debug)]
pub struct GroupDocument {
    name: String,
    priority: i32,
    versions: Vec<VersionEntry>,
    json: Bytes,
}

impl GroupDocument {
    fn new(name: &str, versions: impl Iterator<Item = VersionEntry>) -> GroupDocument {
        let mut versions: Vec<VersionEntry> = versions.collect();
        versions.sort_by(|a, b| {
            b.version_priority.cmp(&a.version_priority).then_with(|| {
                compare_kube_aware_versions(&b.discovery.version, &a.discovery.version)
            })
        });
        let priority = versions
            .iter()
            .map(|v| v.group_priority_minimum)
            .max()
            .unwrap_or(0);
        let item = ApiGroupDiscovery {
            metadata: GroupMeta {
                name: name.to_owned(),
            },
            versions: versions.iter().map(|v| v.discovery.clone()).collect(),
        };
        let json = Bytes::from(serde_json::to_vec(&item).unwrap_or_default());
        GroupDocument {
            name: name.to_owned(),
            priority,
            versions,
            json,
        }
    }

    /// The group name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The group's versions, highest priority first.
    pub fn versions(&self) -> &[VersionEntry] {
        &self.versions
    }
}

/// A built, immutable aggregated discovery document with its encodings and ETag.
///
/// Both encodings (`v2`, `v2beta1`) are made once at build time, so serving it is a
/// clone of `Bytes`. Cheap to share (`Arc`); the manager publishes a new one per change.
#[derive(Debug)]
pub struct AggregatedDocument {
    groups: Vec<Arc<GroupDocument>>,
    v2: Bytes,
    v2beta1: Bytes,
    etag: HeaderValue,
}

impl AggregatedDocument {
    fn from_groups(mut groups: Vec<Arc<GroupDocument>>) -> AggregatedDocument {
        // Higher group priority first, ties by name (upstream's sort; legacy /apis breaks
        // ties by APIService name instead).
        groups.sort_by(|a, b| {
            b.priority
                .cmp(&a.priority)
                .then_with(|| a.name.cmp(&b.name))
        });
        let v2 = encode(&groups, AggregatedVersion::V2);
        let v2beta1 = encode(&groups, AggregatedVersion::V2Beta1);
        let etag = etag_of(&v2);
        AggregatedDocument {
            groups,
            v2,
            v2beta1,
            etag,
        }
    }

    /// The groups in document order.
    pub fn groups(&self) -> &[Arc<GroupDocument>] {
        &self.groups
    }

    /// The JSON body for `version`:
    /// `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/<v>","metadata":{},"items":[...]}`.
    pub fn body(&self, version: AggregatedVersion) -> &Bytes {
        match version {
            AggregatedVersion::V2 => &self.v2,
            AggregatedVersion::V2Beta1 => &self.v2beta1,
        }
    }

    /// The quoted ETag: upper-case hex SHA-512 of the v2 JSON, the same for both versions
    /// (as upstream, which hashes the v2 object whatever the encoding).
    pub fn etag(&self) -> &HeaderValue {
        &self.etag
    }

    /// This document with the host's own groups merged in: a group-version this document
    /// has masks the host's (the aggregator's source wins, as upstream's source
    /// precedence); the host's versions sort by `priority(group, version)` when it knows
    /// one (the host's local APIServices), else by upstream's defaults (1000, 15).
    ///
    /// ```
    /// use kube_aggregator::discovery::DocumentBuilder;
    /// use kube_aggregator::discovery::v2::{ApiGroupDiscovery, ApiVersionDiscovery, GroupMeta};
    ///
    /// let ours = DocumentBuilder::new().build(); // apiregistration.k8s.io only
    /// let apps = ApiGroupDiscovery {
    ///     metadata: GroupMeta { name: "apps".into() },
    ///     versions: vec![ApiVersionDiscovery { version: "v1".into(), ..ApiVersionDiscovery::default() }],
    /// };
    /// // The host's apps/v1 is a local APIService with priority 17800.
    /// let merged = ours.with_host_groups(vec![apps], |g, _| (g == "apps").then_some((17800, 15)));
    /// let names: Vec<&str> = merged.groups().iter().map(|g| g.name()).collect();
    /// assert_eq!(names, ["apiregistration.k8s.io", "apps"]);
    /// ```
    pub fn with_host_groups(
        &self,
        host: Vec<ApiGroupDiscovery>,
        priority: impl Fn(&str, &str) -> Option<(i32, i32)>,
    ) -> AggregatedDocument {
        if host.iter().all(|g| g.versions.is_empty()) {
            return AggregatedDocument {
                groups: self.groups.clone(),
                v2: self.v2.clone(),
                v2beta1: self.v2beta1.clone(),
                etag: self.etag.clone(),
            };
        }
        let mut by_name: HashMap<String, usize> = HashMap::new();
        let mut groups: Vec<Arc<GroupDocument>> = self.groups.clone();
        for (i, g) in groups.iter().enumerate() {
            by_name.insert(g.name.clone(), i);
        }
        let mut extra: Vec<(String, Vec<VersionEntry>)> = Vec::new();
        for g in host {
            let name = g.metadata.name;
            let existing = by_name.get(name.as_str()).map(|&i| groups[i].clone());
            let mut added = Vec::new();
            for mut v in g.versions {
                let masked = existing
                    .as_ref()
                    .is_some_and(|e| e.versions.iter().any(|x| x.discovery.version == v.version));
                if masked
                    || added
                        .iter()
                        .any(|a: &VersionEntry| a.discovery.version == v.version)
                {
                    continue;
                }
                super::v2::fill_version(&mut v);
                let (gp, vp) = priority(&name, &v.version)
                    .unwrap_or((DEFAULT_GROUP_PRIORITY, DEFAULT_VERSION_PRIORITY));
                added.push(VersionEntry {
                    discovery: v,
                    group_priority_minimum: gp,
                    version_priority: vp,
                });
            }
            if !added.is_empty() {
                extra.push((name, added));
            }
        }
        for (name, added) in extra {
            match by_name.get(name.as_str()) {
                Some(&i) => {
                    let versions = groups[i].versions.iter().cloned().chain(added);
                    groups[i] = Arc::new(GroupDocument::new(&name, versions));
                }
                None => {
                    by_name.insert(name.clone(), groups.len());
                    groups.push(Arc::new(GroupDocument::new(&name, added.into_iter())));
                }
            }
        }
        AggregatedDocument::from_groups(groups)
    }
}

fn encode(groups: &[Arc<GroupDocument>], version: AggregatedVersion) -> Bytes {
    let head = format!(
        r#"{{"kind":"APIGroupDiscoveryList","apiVersion":"{}","metadata":{{}},"items":["#,
        version.api_version()
    );
    let size = head.len() + 2 + groups.iter().map(|g| g.json.len() + 1).sum::<usize>();
    let mut out = BytesMut::with_capacity(size);
    out.put_slice(head.as_bytes());
    for (i, g) in groups.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        out.put_slice(&g.json);
    }
    out.put_slice(b"]}");
    out.freeze()
}

/// The quoted upper-case hex SHA-512 of `bytes`: the ETag upstream's discovery and
/// OpenAPI handlers send (`"` + 128 hex digits + `"`).
///
/// ```
/// use kube_aggregator::discovery::{etag_of, sha512_hex};
///
/// let tag = etag_of(b"{}");
/// assert_eq!(tag.len(), 130);
/// assert_eq!(tag.to_str().unwrap(), format!("\"{}\"", sha512_hex(b"{}")));
/// ```
pub fn etag_of(bytes: &[u8]) -> HeaderValue {
    let mut s = String::with_capacity(130);
    s.push('"');
    s.push_str(&sha512_hex(bytes));
    s.push('"');
    HeaderValue::from_str(&s).unwrap_or(HeaderValue::from_static("\"\""))
}

/// Upper-case hex SHA-512 of `bytes` (128 characters).
pub fn sha512_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let digest = ring::digest::digest(&ring::digest::SHA512, bytes);
    let mut s = String::with_capacity(128);
    for b in digest.as_ref() {
        let _ = write!(s, "{b:02X}");
    }
    s
}

#[derive(Debug, Default)]
struct BuilderGroup {
    versions: HashMap<String, VersionEntry>,
    built: Option<Arc<GroupDocument>>,
}

/// The mutable side: group-versions in, [`AggregatedDocument`]s out.
///
/// Starts with `apiregistration.k8s.io/v1` (the read-only APIService API this crate
/// serves), pinned first.
///
/// ```
/// use kube_aggregator::discovery::{DocumentBuilder, VersionEntry};
/// use kube_aggregator::discovery::v2::ApiVersionDiscovery;
///
/// let entry = |version: &str, priority: i32| VersionEntry {
///     discovery: ApiVersionDiscovery { version: version.into(), ..ApiVersionDiscovery::default() },
///     group_priority_minimum: 100,
///     version_priority: priority,
/// };
/// let mut builder = DocumentBuilder::new();
/// assert!(builder.set("metrics.k8s.io", entry("v1beta1", 100)));
/// assert!(!builder.set("metrics.k8s.io", entry("v1beta1", 100))); // nothing new
/// let before = builder.build();
/// assert!(builder.remove("metrics.k8s.io", "v1beta1")); // the group goes with it
/// let after = builder.build();
/// assert_eq!((before.groups().len(), after.groups().len()), (2, 1));
/// assert_ne!(before.etag(), after.etag());
/// ```
#[derive(Debug)]
pub struct DocumentBuilder {
    groups: HashMap<String, BuilderGroup>,
}

impl Default for DocumentBuilder {
    fn default() -> Self {
        DocumentBuilder::new()
    }
}

impl DocumentBuilder {
    /// A builder holding only `apiregistration.k8s.io/v1`.
    pub fn new() -> DocumentBuilder {
        let mut b = DocumentBuilder {
            groups: HashMap::new(),
        };
        b.set(crate::apiservice::API_GROUP, apiregistration_entry());
        b
    }

    /// Adds or replaces `group`/`entry.discovery.version`. Returns whether anything changed
    /// (an equal entry changes nothing and costs no re-encoding at the next build).
    pub fn set(&mut self, group: &str, entry: VersionEntry) -> bool {
        let g = self.groups.entry(group.to_owned()).or_default();
        if g.versions.get(&entry.discovery.version) == Some(&entry) {
            return false;
        }
        g.versions.insert(entry.discovery.version.clone(), entry);
        g.built = None;
        true
    }

    /// Removes `group`/`version` (the group goes with its last version). Returns whether
    /// anything changed.
    pub fn remove(&mut self, group: &str, version: &str) -> bool {
        let Some(g) = self.groups.get_mut(group) else {
            return false;
        };
        if g.versions.remove(version).is_none() {
            return false;
        }
        g.built = None;
        if g.versions.is_empty() {
            self.groups.remove(group);
        }
        true
    }

    /// The entry of `group`/`version`, if present.
    pub fn get(&self, group: &str, version: &str) -> Option<&VersionEntry> {
        self.groups.get(group)?.versions.get(version)
    }

    /// Builds the document, re-encoding only the groups changed since the last build.
    pub fn build(&mut self) -> AggregatedDocument {
        let mut groups = Vec::with_capacity(self.groups.len());
        for (name, g) in &mut self.groups {
            let built = g
                .built
                .get_or_insert_with(|| {
                    Arc::new(GroupDocument::new(name, g.versions.values().cloned()))
                })
                .clone();
            groups.push(built);
        }
        AggregatedDocument::from_groups(groups)
    }
}

/// `apiregistration.k8s.io/v1` as this crate serves it: `apiservices` (get, list) with
/// its `status` subresource, group priority 20001, version priority 0.
fn apiregistration_entry() -> VersionEntry {
    let kind = GroupVersionKind {
        group: crate::apiservice::API_GROUP.into(),
        version: "v1".into(),
        kind: "APIService".into(),
    };
    VersionEntry {
        discovery: ApiVersionDiscovery {
            version: "v1".into(),
            resources: vec![ApiResourceDiscovery {
                resource: "apiservices".into(),
                response_kind: Some(kind.clone()),
                scope: "Cluster".into(),
                singular_resource: "apiservice".into(),
                verbs: vec!["get".into(), "list".into()],
                categories: vec!["api-extensions".into()],
                subresources: vec![super::v2::ApiSubresourceDiscovery {
                    subresource: "status".into(),
                    response_kind: Some(kind),
                    accepted_types: Vec::new(),
                    verbs: vec!["get".into()],
                }],
                ..ApiResourceDiscovery::default()
            }],
            freshness: Some(Freshness::Current),
        },
        group_priority_minimum: APIREGISTRATION_GROUP_PRIORITY,
        version_priority: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(version: &str, gp: i32, vp: i32) -> VersionEntry {
        VersionEntry {
            discovery: ApiVersionDiscovery {
                version: version.into(),
                resources: Vec::new(),
                freshness: Some(Freshness::Current),
            },
            group_priority_minimum: gp,
            version_priority: vp,
        }
    }

    fn order(doc: &AggregatedDocument) -> Vec<String> {
        doc.groups()
            .iter()
            .map(|g| {
                let versions: Vec<&str> = g
                    .versions()
                    .iter()
                    .map(|v| v.discovery.version.as_str())
                    .collect();
                format!("{}:{}", g.name(), versions.join(","))
            })
            .collect()
    }

    /// docs/conformance-vectors.md §7.4 (apiserver handler_test.go).
    #[test]
    fn upstream_ordering_vectors() {
        // TestVersionSortingNoPriority
        let mut b = DocumentBuilder::new();
        for v in ["v1alpha1", "v2beta1", "v1", "v1beta1", "v2"] {
            b.set("default", entry(v, 1000, 15));
        }
        assert_eq!(
            order(&b.build())[1],
            "default:v2,v1,v2beta1,v1beta1,v1alpha1"
        );
        // TestVersionSortingWithPriority
        let mut b = DocumentBuilder::new();
        b.set("default", entry("v1", 1000, 100));
        b.set("default", entry("v1alpha1", 1000, 200));
        assert_eq!(order(&b.build())[1], "default:v1alpha1,v1");
        // TestGroupVersionSortingConflictingPriority
        let mut b = DocumentBuilder::new();
        b.set("default", entry("v1", 1000, 100));
        b.set("test", entry("v1alpha1", 500, 100));
        b.set("test", entry("v1alpha1", 2000, 100));
        b.set("test", entry("v1alpha2", 1000, 15));
        let doc = b.build();
        assert_eq!(order(&doc)[1..], ["test:v1alpha1,v1alpha2", "default:v1"]);
        // TestStatelessGroupPriorityMinimum
        let mut b = DocumentBuilder::new();
        b.set("stable", entry("v1", 1000, 15));
        b.set("experimental", entry("v1", 100, 15));
        b.set("experimental", entry("v1alpha1", 10000, 15));
        assert_eq!(
            order(&b.build())[1..],
            ["experimental:v1,v1alpha1", "stable:v1"]
        );
        b.remove("experimental", "v1alpha1");
        assert_eq!(order(&b.build())[1..], ["stable:v1", "experimental:v1"]);
        // Equal priorities: group name order.
        let mut b = DocumentBuilder::new();
        b.set("b", entry("v1", 10, 15));
        b.set("a", entry("v1", 10, 15));
        let doc = b.build();
        assert_eq!(order(&doc), ["apiregistration.k8s.io:v1", "a:v1", "b:v1"]);
    }

    #[test]
    fn encoding_etag_and_host_merge() {
        let mut b = DocumentBuilder::new();
        b.set("metrics.k8s.io", entry("v1beta1", 100, 100));
        let doc = b.build();
        let v2 = std::str::from_utf8(doc.body(AggregatedVersion::V2)).unwrap();
        assert!(v2.starts_with(r#"{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[{"metadata":{"name":"apiregistration.k8s.io"},"versions":[{"version":"v1","resources":[{"resource":"apiservices""#), "{v2}");
        assert!(v2.ends_with(r#"{"metadata":{"name":"metrics.k8s.io"},"versions":[{"version":"v1beta1","freshness":"Current"}]}]}"#), "{v2}");
        let beta = std::str::from_utf8(doc.body(AggregatedVersion::V2Beta1)).unwrap();
        assert_eq!(beta.replace("/v2beta1", "/v2"), v2);
        let etag = doc.etag().to_str().unwrap();
        assert_eq!(etag.len(), 130);
        assert_eq!(etag, format!("\"{}\"", sha512_hex(v2.as_bytes())));
        assert!(
            etag[1..129]
                .bytes()
                .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
        );

        // The host's metrics.k8s.io/v1beta1 is masked; its own groups join by priority.
        let host: Vec<ApiGroupDiscovery> = serde_json::from_str(
            r#"[{"metadata":{"name":"metrics.k8s.io"},"versions":[{"version":"v1beta1","resources":[{"resource":"fake","verbs":[]}]},{"version":"v1","freshness":"Current"}]},
                {"metadata":{"name":"apps"},"versions":[{"version":"v1","freshness":"Current"}]}]"#,
        )
        .unwrap();
        let merged = doc.with_host_groups(host, |g, _| (g == "apps").then_some((17800, 15)));
        assert_eq!(
            order(&merged),
            [
                "apiregistration.k8s.io:v1",
                "apps:v1",
                "metrics.k8s.io:v1beta1,v1"
            ]
        );
        let fake = merged.groups()[2].versions()[0].discovery.resources.len();
        assert_eq!(fake, 0, "the aggregator's entry masks the host's");
        assert_ne!(merged.etag(), doc.etag());
    }
}
