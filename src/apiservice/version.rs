//! Kubernetes-aware version ordering and the group/version priority sort used by discovery.
//!
//! Mirrors apimachinery `pkg/version/helpers.go` (`CompareKubeAwareVersionStrings`) and
//! kube-aggregator `pkg/apis/apiregistration/v1/helper/helpers.go`
//! (`SortedByGroupAndVersion`, `ByGroupPriorityMinimum`, `ByVersionPriority`).

use std::cmp::Ordering;
use std::collections::HashMap;

use super::types::ApiService;

/// Stability level of a kube-like version; the discriminants are upstream's `versionType`
/// values, and the derived order is the sort order (GA highest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stability {
    Alpha = 0,
    Beta = 1,
    Ga = 2,
}

/// A parsed `v<major>[(alpha|beta)<minor>]`; `minor` is 0 for GA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KubeVersion {
    major: i64,
    stability: Stability,
    minor: i64,
}

/// Parses a kube-like version (`^v(\d+)(?:(alpha|beta)(\d+))?$`, ASCII digits). Numbers
/// must fit Go's 64-bit `int` (what `strconv.Atoi` accepts on the platforms kube-apiserver
/// ships for); an overflowing number makes the string not kube-like. Leading zeros are allowed.
fn parse_kube_version(v: &str) -> Option<KubeVersion> {
    let rest = v.strip_prefix('v')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (major, tail) = rest.split_at(digits);
    let major = parse_digits(major)?;
    if tail.is_empty() {
        return Some(KubeVersion {
            major,
            stability: Stability::Ga,
            minor: 0,
        });
    }
    let (stability, minor) = if let Some(minor) = tail.strip_prefix("alpha") {
        (Stability::Alpha, minor)
    } else if let Some(minor) = tail.strip_prefix("beta") {
        (Stability::Beta, minor)
    } else {
        return None;
    };
    let minor = parse_digits(minor)?;
    Some(KubeVersion {
        major,
        stability,
        minor,
    })
}

/// A non-empty run of ASCII digits that fits an `i64`.
fn parse_digits(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Compares two API version strings the Kubernetes way; [`Ordering::Greater`] means `a`
/// sorts **before** `b` (is preferred).
///
/// Kube-like versions (`v1`, `v2beta1`, `v1alpha3`) rank above all others; among them GA >
/// beta > alpha, then the larger major, then the larger minor. Two non-kube-like strings
/// compare as plain byte strings with the *earlier* one greater (`foo1` before `foo10`
/// before `foo2`). Identical strings are `Equal`, as are kube-like spellings of the same
/// number (`v01` and `v1`). Mirrors apimachinery `CompareKubeAwareVersionStrings`.
///
/// ```
/// use std::cmp::Ordering;
/// use kube_aggregator::apiservice::compare_kube_aware_versions;
///
/// let mut versions = vec!["v1beta1", "foo", "v1", "v2", "v1alpha1"];
/// versions.sort_by(|a, b| compare_kube_aware_versions(b, a));
/// assert_eq!(versions, ["v2", "v1", "v1beta1", "v1alpha1", "foo"]);
/// assert_eq!(compare_kube_aware_versions("v10", "v2"), Ordering::Greater);
/// ```
#[must_use]
pub fn compare_kube_aware_versions(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    match (parse_kube_version(a), parse_kube_version(b)) {
        (None, None) => b.cmp(a),
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => x
            .stability
            .cmp(&y.stability)
            .then(x.major.cmp(&y.major))
            .then(x.minor.cmp(&y.minor)),
    }
}

/// One API group and its APIServices in preference order, as produced by
/// [`sort_by_group_and_version`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupVersions<'a> {
    /// `spec.group` shared by every entry of `versions` (empty for the legacy core group).
    pub group: &'a str,
    /// The group's APIServices, preferred first; never empty.
    pub versions: Vec<&'a ApiService>,
}

impl<'a> GroupVersions<'a> {
    /// The preferred version's APIService (the first one), as discovery reports it.
    pub fn preferred(&self) -> Option<&'a ApiService> {
        self.versions.first().copied()
    }
}

/// Buckets APIServices by group and orders groups and versions for discovery.
///
/// Groups are ordered by their first APIService in the list sorted by
/// `spec.groupPriorityMinimum` descending, ties by APIService name ascending (byte order);
/// a group therefore ranks by the highest `groupPriorityMinimum` among its versions.
/// Within a group, APIServices are ordered by `spec.versionPriority` descending, ties by
/// [`compare_kube_aware_versions`] (preferred first). Availability is not considered:
/// unavailable APIServices are listed too. Mirrors kube-aggregator `SortedByGroupAndVersion`;
/// upstream's sort is unstable, this one keeps name order for otherwise equal entries.
///
/// Runs in O(n log n) for n APIServices.
///
/// ```
/// use kube_aggregator::apiservice::{ApiService, sort_by_group_and_version};
///
/// let svc = |name: &str, group_priority: i32, version_priority: i32| -> ApiService {
///     let (version, group) = name.split_once('.').unwrap();
///     let mut s = ApiService::default();
///     s.metadata.name = name.into();
///     s.spec.group = group.into();
///     s.spec.version = version.into();
///     s.spec.group_priority_minimum = group_priority;
///     s.spec.version_priority = version_priority;
///     s
/// };
/// let all = [svc("v1beta1.metrics.k8s.io", 100, 100), svc("v1.apps", 17800, 15),
///            svc("v1beta2.metrics.k8s.io", 100, 100), svc("v1.metrics.k8s.io", 100, 50)];
/// let sorted = sort_by_group_and_version(&all);
/// assert_eq!(sorted[0].group, "apps");
/// let metrics: Vec<&str> = sorted[1].versions.iter().map(|s| s.spec.version.as_str()).collect();
/// // Priority first, then the Kubernetes order among equal priorities.
/// assert_eq!(metrics, ["v1beta2", "v1beta1", "v1"]);
/// ```
#[must_use]
pub fn sort_by_group_and_version<'a>(
    services: impl IntoIterator<Item = &'a ApiService>,
) -> Vec<GroupVersions<'a>> {
    let mut sorted: Vec<&'a ApiService> = services.into_iter().collect();
    sorted.sort_by(|a, b| {
        b.spec
            .group_priority_minimum
            .cmp(&a.spec.group_priority_minimum)
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });

    let mut groups: Vec<GroupVersions<'a>> = Vec::new();
    let mut index: HashMap<&'a str, usize> = HashMap::new();
    for svc in sorted {
        let group = svc.spec.group.as_str();
        match index.get(group) {
            Some(&i) => groups[i].versions.push(svc),
            None => {
                index.insert(group, groups.len());
                groups.push(GroupVersions {
                    group,
                    versions: vec![svc],
                });
            }
        }
    }
    for group in &mut groups {
        group.versions.sort_by(|a, b| {
            b.spec
                .version_priority
                .cmp(&a.spec.version_priority)
                .then_with(|| compare_kube_aware_versions(&b.spec.version, &a.spec.version))
        });
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(name: &str, group_priority: i32, version_priority: i32) -> ApiService {
        let mut svc = ApiService::default();
        let (version, group) = name.split_once('.').expect("name is version.group");
        svc.metadata.name = name.to_owned();
        svc.spec.group = group.to_owned();
        svc.spec.version = version.to_owned();
        svc.spec.group_priority_minimum = group_priority;
        svc.spec.version_priority = version_priority;
        svc
    }

    fn sorted_versions(input: &[&str]) -> Vec<String> {
        let services: Vec<ApiService> = input
            .iter()
            .map(|v| svc(&format!("{v}.group"), 100, 100))
            .collect();
        let groups = sort_by_group_and_version(&services);
        assert_eq!(groups.len(), 1);
        groups[0]
            .versions
            .iter()
            .map(|s| s.spec.version.clone())
            .collect()
    }

    fn layout(groups: &[GroupVersions<'_>]) -> Vec<(String, Vec<String>)> {
        groups
            .iter()
            .map(|g| {
                (
                    g.group.to_owned(),
                    g.versions.iter().map(|s| s.metadata.name.clone()).collect(),
                )
            })
            .collect()
    }

    // conformance-vectors §7.1
    #[test]
    fn version_order_inside_one_group() {
        let rows: &[(&[&str], &[&str])] = &[
            (&["v1", "v2"], &["v2", "v1"]),
            (&["v2", "v10"], &["v10", "v2"]),
            (
                &["v2", "v2beta1", "v10beta2", "v10beta1", "v10alpha1", "v1"],
                &["v2", "v1", "v10beta2", "v10beta1", "v2beta1", "v10alpha1"],
            ),
            (
                &["v1", "v2", "test", "foo10", "final", "foo2", "foo1"],
                &["v2", "v1", "final", "foo1", "foo10", "foo2", "test"],
            ),
            (
                &[
                    "v12alpha1",
                    "v10",
                    "v11beta2",
                    "v10beta3",
                    "v3beta1",
                    "v2",
                    "v11alpha2",
                    "foo1",
                    "v1",
                    "foo10",
                ],
                &[
                    "v10",
                    "v2",
                    "v1",
                    "v11beta2",
                    "v10beta3",
                    "v3beta1",
                    "v12alpha1",
                    "v11alpha2",
                    "foo1",
                    "foo10",
                ],
            ),
        ];
        for (input, expected) in rows {
            assert_eq!(sorted_versions(input), *expected, "input {input:?}");
        }
    }

    // conformance-vectors §7.2 TestCompareKubeAwareVersionStrings
    #[test]
    fn pairwise_comparison() {
        let rows = [
            ("v1", "v2", false),
            ("v2", "v1", true),
            ("v10", "v2", true),
            ("v1", "v2alpha1", true),
            ("v1", "v2beta1", true),
            ("v1alpha2", "v1alpha1", true),
            ("v1beta1", "v2alpha3", true),
            ("v1alpha10", "v1alpha2", true),
            ("v1beta10", "v1beta2", true),
            ("foo", "v1beta2", false),
            ("bar", "foo", true),
            ("version1", "version2", true),
            ("version1", "version10", true),
        ];
        for (a, b, greater) in rows {
            assert_eq!(
                compare_kube_aware_versions(a, b) == Ordering::Greater,
                greater,
                "{a} vs {b}"
            );
            // The comparison is antisymmetric.
            assert_eq!(
                compare_kube_aware_versions(b, a) == Ordering::Less,
                greater,
                "{b} vs {a}"
            );
        }
        assert_eq!(compare_kube_aware_versions("v1", "v1"), Ordering::Equal);
        assert_eq!(compare_kube_aware_versions("foo", "foo"), Ordering::Equal);
        assert_eq!(compare_kube_aware_versions("v01", "v1"), Ordering::Equal);
    }

    // conformance-vectors §7.2 parseKubeVersion
    #[test]
    fn parse_table() {
        assert_eq!(parse_kube_version("v1.1"), None);
        assert_eq!(parse_kube_version("v1alpha1.1"), None);
        assert_eq!(
            parse_kube_version("v1alpha1"),
            Some(KubeVersion {
                major: 1,
                stability: Stability::Alpha,
                minor: 1
            })
        );
        assert_eq!(
            parse_kube_version("v2beta10"),
            Some(KubeVersion {
                major: 2,
                stability: Stability::Beta,
                minor: 10
            })
        );
        assert_eq!(
            parse_kube_version("v3"),
            Some(KubeVersion {
                major: 3,
                stability: Stability::Ga,
                minor: 0
            })
        );
        assert_eq!(Stability::Alpha as u8, 0);
        assert_eq!(Stability::Beta as u8, 1);
        assert_eq!(Stability::Ga as u8, 2);
    }

    #[test]
    fn parse_rejects_near_misses() {
        for v in [
            "",
            "v",
            "1",
            "V1",
            "v1alpha",
            "v1beta",
            "v1gamma1",
            "valpha1",
            "v1 ",
            "v+1",
            "v1alpha+1",
            "v١",
        ] {
            assert_eq!(parse_kube_version(v), None, "{v:?}");
        }
    }

    #[test]
    fn go_int_overflow_is_not_kube_like() {
        let max = format!("v{}", i64::MAX);
        let over = "v9223372036854775808";
        assert_eq!(parse_kube_version(&max).map(|v| v.major), Some(i64::MAX));
        assert_eq!(parse_kube_version(over), None);
        assert_eq!(parse_kube_version("v1beta9223372036854775808"), None);
        assert_eq!(compare_kube_aware_versions(over, "v1"), Ordering::Less);
        assert_eq!(compare_kube_aware_versions(&max, "v1"), Ordering::Greater);
        // Both non-kube-like: lexicographic, earlier string first.
        assert_eq!(compare_kube_aware_versions("foo", over), Ordering::Greater);
    }

    // conformance-vectors §7.4 TestVersionSortingNoPriority uses the same comparison.
    #[test]
    fn aggregated_discovery_default_order() {
        assert_eq!(
            sorted_versions(&["v1alpha1", "v2beta1", "v1", "v1beta1", "v2"]),
            ["v2", "v1", "v2beta1", "v1beta1", "v1alpha1"]
        );
    }

    // conformance-vectors §7.3 rows (groups after apiregistration.k8s.io).
    #[test]
    fn legacy_apis_empty() {
        assert!(sort_by_group_and_version(&Vec::<ApiService>::new()).is_empty());
    }

    #[test]
    fn legacy_apis_simple_add() {
        let services = [svc("v1.foo", 11, 0), svc("v1.bar", 10, 0)];
        let groups = sort_by_group_and_version(&services);
        assert_eq!(
            layout(&groups),
            [
                ("foo".to_owned(), vec!["v1.foo".to_owned()]),
                ("bar".to_owned(), vec!["v1.bar".to_owned()])
            ]
        );
        assert_eq!(groups[0].preferred().map(ApiService::name), Some("v1.foo"));
        assert_eq!(groups[1].preferred().map(ApiService::name), Some("v1.bar"));
    }

    #[test]
    fn legacy_apis_sorting() {
        let services = [
            svc("v1.foo", 20, 10),
            svc("v2.bar", 11, 0),
            svc("v2.foo", 1, 15),
            svc("v1.bar", 11, 0),
        ];
        let groups = sort_by_group_and_version(&services);
        assert_eq!(
            layout(&groups),
            [
                (
                    "foo".to_owned(),
                    vec!["v2.foo".to_owned(), "v1.foo".to_owned()]
                ),
                (
                    "bar".to_owned(),
                    vec!["v2.bar".to_owned(), "v1.bar".to_owned()]
                ),
            ]
        );
        assert_eq!(groups[0].preferred().map(ApiService::name), Some("v2.foo"));
        assert_eq!(groups[1].preferred().map(ApiService::name), Some("v2.bar"));
    }

    #[test]
    fn legacy_apis_unavailable_service_is_listed() {
        let mut unavailable = svc("v1.foo", 11, 0);
        unavailable.set_condition(
            "Available",
            crate::apiservice::types::ConditionStatus::False,
            "FailedDiscoveryCheck",
            "down",
            "2024-01-01T00:00:00Z",
        );
        let services = [unavailable];
        let groups = sort_by_group_and_version(&services);
        assert_eq!(
            layout(&groups),
            [("foo".to_owned(), vec!["v1.foo".to_owned()])]
        );
    }

    #[test]
    fn group_priority_ties_break_by_name_then_version_priority_wins() {
        // Equal groupPriorityMinimum: "v1.bar" < "v1.foo" < "v2.a" by name.
        let services = [svc("v2.a", 5, 1), svc("v1.foo", 5, 1), svc("v1.bar", 5, 1)];
        let groups = sort_by_group_and_version(&services);
        let order: Vec<&str> = groups.iter().map(|g| g.group).collect();
        assert_eq!(order, ["bar", "foo", "a"]);

        // versionPriority beats the version comparison.
        let services = [svc("v1.g", 1, 200), svc("v1alpha1.g", 1, 900)];
        let groups = sort_by_group_and_version(&services);
        assert_eq!(
            layout(&groups),
            [(
                "g".to_owned(),
                vec!["v1alpha1.g".to_owned(), "v1.g".to_owned()]
            )]
        );
    }
}
