//! How a [`TargetSet`] reaches the manager: APIServices that appear enter as empty `Stale`
//! entries, changed Services are due at once, and those gone leave the document.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{DiscoveryManager, ServiceState, TargetState, lock};
use crate::discovery::document::VersionEntry;
use crate::discovery::target::{GroupVersion, ServiceKey, Target, TargetSet, TargetSink};
use crate::discovery::v2::{ApiVersionDiscovery, Freshness};

impl TargetSink for DiscoveryManager {
    /// Applies the full set of APIServices: new ones enter as empty `Stale` entries and
    /// their Service is fetched at once; changed ones are refetched; deleted ones leave
    /// the published document before this returns.
    fn sync(&self, set: &TargetSet) {
        let mut guard = lock(&self.shared.state);
        let st = &mut *guard;
        if st.generation.is_some_and(|g| g >= set.generation) {
            return;
        }
        st.generation = Some(set.generation);
        let now = self.shared.timer.now();
        let mut changed = false;
        let mut wanted: HashMap<&str, &Target> = HashMap::with_capacity(set.remote.len());
        for t in &set.remote {
            wanted.insert(t.name.as_str(), t);
        }
        let gone: Vec<String> = st
            .targets
            .keys()
            .filter(|n| !wanted.contains_key(n.as_str()))
            .cloned()
            .collect();
        for name in gone {
            if let Some(old) = st.targets.remove(&name) {
                changed |= st.builder.remove(&old.target.group, &old.target.version);
            }
        }
        for t in &set.remote {
            match st.targets.get_mut(&t.name) {
                Some(old) if old.target.same_spec(t) => old.target = t.clone(),
                existing => {
                    if let Some(old) = existing.as_ref() {
                        if (old.target.group.as_str(), old.target.version.as_str())
                            != (t.group.as_str(), t.version.as_str())
                        {
                            changed |= st.builder.remove(&old.target.group, &old.target.version);
                        }
                    }
                    let last_good = existing.and_then(|o| o.last_good.take());
                    let service =
                        st.services
                            .entry(t.service.clone())
                            .or_insert_with(|| ServiceState {
                                due: now,
                                failures: 0,
                                in_flight: false,
                                tried: false,
                                cached: None,
                            });
                    // A new or changed APIService makes its Service due now (upstream
                    // refetches when the cache is older than the change).
                    service.due = now;
                    let resources = last_good.clone().unwrap_or_default();
                    let entry = st
                        .builder
                        .get(&t.group, &t.version)
                        .map(|e| e.discovery.clone())
                        .unwrap_or(ApiVersionDiscovery {
                            version: t.version.clone(),
                            resources,
                            freshness: Some(Freshness::Stale),
                        });
                    changed |= st.builder.set(
                        &t.group,
                        VersionEntry {
                            discovery: entry,
                            group_priority_minimum: t.group_priority_minimum,
                            version_priority: t.version_priority,
                        },
                    );
                    st.targets.insert(
                        t.name.clone(),
                        TargetState {
                            target: t.clone(),
                            last_good,
                        },
                    );
                }
            }
        }
        // Cached results of Services no longer referenced are dropped.
        let used: HashSet<&ServiceKey> = st.targets.values().map(|t| &t.target.service).collect();
        st.services.retain(|k, _| used.contains(k));
        drop(used);
        if st.initial.is_none() {
            st.initial = Some(st.services.keys().cloned().collect());
        }
        if let Some(initial) = &mut st.initial {
            let services = &st.services;
            initial.retain(|k| services.contains_key(k));
        }
        let local: HashMap<GroupVersion, (i32, i32)> = set
            .local
            .iter()
            .map(|l| {
                (
                    (l.group.clone(), l.version.clone()),
                    (l.group_priority_minimum, l.version_priority),
                )
            })
            .collect();
        if local != st.local {
            st.local = local.clone();
            self.shared.local.store(Arc::new(local));
        }
        if changed {
            self.publish(st);
        }
        self.check_synced(st);
        drop(guard);
        self.wake();
    }
}
