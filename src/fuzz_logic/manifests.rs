//! Manifest files through parsing, validation and a registry resync.

use super::*;

/// `data` is a manifest file (multi-document YAML or JSON). Checks that parsing,
/// validation and its messages, the version ordering and a registry resync never panic;
/// that every parsed APIService survives a JSON round trip unchanged; and that the
/// registry publishes exactly the APIServices validation accepts.
pub fn fuzz_manifests(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(services) = crate::source::parse_manifests(text) else {
        return;
    };
    let mut accepted = std::collections::BTreeSet::new();
    for svc in &services {
        match validate(svc) {
            Ok(()) => {
                accepted.insert(svc.metadata.name.clone());
            }
            Err(e) => {
                assert!(!e.errors.is_empty(), "a rejection names no field: {e:?}");
                let _ = e.to_string();
                for field in &e.errors {
                    let _ = field.body();
                }
            }
        }
        if let Ok(json) = serde_json::to_string(svc) {
            let back: Result<ApiService, _> = serde_json::from_str(&json);
            assert_eq!(back.as_ref().ok(), Some(svc), "JSON round trip of {json}");
        }
    }
    // The ordering must be a consistent total order, or group sorting is unstable.
    for a in services.iter().take(8) {
        for b in services.iter().take(8) {
            let (va, vb) = (&a.spec.version, &b.spec.version);
            assert_eq!(
                compare_kube_aware_versions(va, vb),
                compare_kube_aware_versions(vb, va).reverse(),
                "{va:?} vs {vb:?}"
            );
            if va == vb {
                assert_eq!(compare_kube_aware_versions(va, vb), Ordering::Equal);
            }
        }
    }
    let registry = Registry::new(NoTransport);
    let _ = registry.apply(ApiServiceEvent::Resynced(services));
    let table = registry.snapshot();
    // Later duplicates of a name replace earlier ones, so compare by name.
    let published: std::collections::BTreeSet<String> = table
        .routes()
        .map(|r| r.apiservice.name().to_owned())
        .collect();
    assert!(
        published.is_subset(&accepted),
        "published {published:?}, accepted {accepted:?}"
    );
    let _ = table.api_group_list_json();
}
