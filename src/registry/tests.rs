use super::*;
use crate::testing::NoTransport;

fn local(group: &str, version: &str, group_priority: i32) -> ApiService {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("{version}.{group}")},
        "spec": {"group": group, "version": version, "groupPriorityMinimum": group_priority, "versionPriority": 15}
    }))
    .unwrap()
}

fn group_names(table: &RoutingTable) -> Vec<&str> {
    table.groups().iter().map(|g| g.name.as_str()).collect()
}

/// Upstream TestStatelessGroupPriorityMinimum: a group's place follows the highest
/// groupPriorityMinimum among its current versions; unchanged groups are shared
/// between snapshots, and a group goes with its last version.
#[test]
fn incremental_groups_follow_upstream_ordering() {
    let registry = Registry::new(NoTransport);
    for svc in [
        local("stable", "v1", 1000),
        local("experimental", "v1", 100),
        local("experimental", "v1alpha1", 10000),
    ] {
        registry.apply(ApiServiceEvent::Applied(svc)).unwrap();
    }
    let before = registry.snapshot_owned();
    assert_eq!(group_names(&before), ["experimental", "stable"]);
    let versions: Vec<&str> = before
        .group("experimental")
        .unwrap()
        .versions
        .iter()
        .map(|r| r.apiservice.spec.version.as_str())
        .collect();
    assert_eq!(versions, ["v1", "v1alpha1"]);

    registry
        .apply(ApiServiceEvent::Deleted("v1alpha1.experimental".into()))
        .unwrap();
    let after = registry.snapshot_owned();
    assert_eq!(group_names(&after), ["stable", "experimental"]);
    assert!(
        Arc::ptr_eq(
            before.groups.get("stable").unwrap(),
            after.groups.get("stable").unwrap()
        ),
        "an untouched group is shared"
    );
    assert!(after.lookup("experimental", "v1alpha1").is_none());

    registry
        .apply(ApiServiceEvent::Deleted("v1.experimental".into()))
        .unwrap();
    let last = registry.snapshot_owned();
    assert!(last.group("experimental").is_none());
    let list: serde_json::Value = serde_json::from_slice(last.api_group_list_json()).unwrap();
    let names: Vec<&str> = list["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["apiregistration.k8s.io", "stable"]);
}

/// A resync replaces the whole set in one snapshot, rebuilding only what changed.
#[test]
fn resync_rebuilds_changed_groups_in_one_generation() {
    let registry = Registry::new(NoTransport);
    registry
        .apply(ApiServiceEvent::Resynced(vec![
            local("a", "v1", 10),
            local("b", "v1", 20),
        ]))
        .unwrap();
    let first = registry.snapshot_owned();
    registry
        .apply(ApiServiceEvent::Resynced(vec![
            local("a", "v1", 10),
            local("c", "v1", 30),
        ]))
        .unwrap();
    let second = registry.snapshot_owned();
    assert_eq!(second.generation(), first.generation() + 1);
    assert!(
        Arc::ptr_eq(
            first.groups.get("a").unwrap(),
            second.groups.get("a").unwrap()
        ),
        "an unchanged APIService keeps its route and group"
    );
    assert_eq!(group_names(&second), ["c", "a"]);
    assert!(second.group("b").is_none());
}
