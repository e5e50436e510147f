//! The registry's snapshots: groups rebuilt incrementally in upstream's order, a resync
//! published as one generation, and timestamps taken from the injected clock.

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
    let names = crate::testing::strings(&list["groups"], "name");
    assert_eq!(names, ["apiregistration.k8s.io", "stable"]);
}

/// A resync replaces the whole set in one snapshot, rebuilding only what changed.
#[test]
fn resync_rebuilds_changed_groups_in_one_generation() {
    let registry = Registry::new(NoTransport);
    let resynced = |groups: [(&str, i32); 2]| {
        let apiservices = groups.map(|(group, priority)| local(group, "v1", priority));
        let resync = registry.apply(ApiServiceEvent::Resynced(apiservices.to_vec()));
        resync.expect("valid APIServices");
        registry.snapshot_owned()
    };
    let first = resynced([("a", 10), ("b", 20)]);
    let second = resynced([("a", 10), ("c", 30)]);
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

/// With a clock from `set_clock`, `creationTimestamp` and `lastTransitionTime` follow the
/// injected timer's wall clock, not the system's.
#[test]
fn timestamps_follow_the_injected_clock() {
    let clock = crate::testing::ManualClock::new();
    let timer = clock.timer();
    let registry = Registry::new(NoTransport);
    registry.set_clock(timer.clone());
    let svc: ApiService = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "v1.remote.example.io"},
        "spec": {"group": "remote.example.io", "version": "v1", "groupPriorityMinimum": 100,
                 "versionPriority": 15, "service": {"namespace": "ns", "name": "svc"}}
    }))
    .unwrap();
    registry.apply(ApiServiceEvent::Applied(svc)).unwrap();
    let created = timer.rfc3339();

    // A day later on the injected clock; the system clock has moved by microseconds.
    clock.advance(std::time::Duration::from_secs(86_400));
    registry.set_available_condition(
        "v1.remote.example.io",
        ConditionStatus::True,
        "Passed",
        "all checks passed",
    );
    let table = registry.snapshot_owned();
    let route = table.get("v1.remote.example.io").unwrap();
    assert_eq!(
        route.apiservice.metadata.creation_timestamp.as_deref(),
        Some(created.as_str())
    );
    let condition = &route.apiservice.status.conditions[0];
    assert_eq!(condition.last_transition_time, Some(timer.rfc3339()));
    assert_ne!(
        condition.last_transition_time,
        Some(crate::rt::rfc3339_now())
    );
}
