//! A map split into copy-on-write shards: cloning it copies 64 pointers, and a change
//! copies only the shard it touches (about 1/64 of the entries). The registry publishes a
//! new routing snapshot per change this way without copying every APIService.
//!
//! Floor 0 of the import order (docs/architecture.md): uses nothing of the crate; used by
//! `registry`.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

// FNV-1a: the keys are APIService and group names from the host's configuration, not from
// requests, so a keyed hash buys nothing here, and FNV is several times cheaper than
// SipHash on short names (the lookup runs on every request).
use fnv::FnvHasher as Fnv;

/// Shards per map: a clone copies this many `Arc`s, a change copies one shard's entries.
/// 64 keeps both small from a handful of APIServices to tens of thousands.
const SHARDS: usize = 64;

/// One shard: an ordinary hash map, shared between snapshots until one of them changes it.
type Shard<V> = HashMap<Arc<str>, V, BuildHasherDefault<Fnv>>;

/// See the module docs. Keys are names (`Arc<str>`, shared with the values that hold them).
#[derive(Debug, Clone)]
pub(crate) struct ShardedMap<V> {
    shards: Vec<Arc<Shard<V>>>,
    len: usize,
}

impl<V> Default for ShardedMap<V> {
    fn default() -> Self {
        ShardedMap {
            shards: (0..SHARDS).map(|_| Arc::new(Shard::default())).collect(),
            len: 0,
        }
    }
}

/// The shard of a key: the high bits of its FNV-1a hash (the low bits pick the bucket
/// inside the shard).
fn shard_of(key: &str) -> usize {
    let mut h = Fnv::default();
    h.write(key.as_bytes());
    (h.finish() >> 58) as usize % SHARDS
}

impl<V: Clone> ShardedMap<V> {
    /// The value of `key`: one hash, two lookups (the shard, then the key). No allocation.
    pub(crate) fn get(&self, key: &str) -> Option<&V> {
        self.shards[shard_of(key)].get(key)
    }

    /// The stored key with its value, so a caller can reuse the key's `Arc` rather than
    /// allocate a new one.
    pub(crate) fn get_key_value(&self, key: &str) -> Option<(&Arc<str>, &V)> {
        self.shards[shard_of(key)].get_key_value(key)
    }

    #[cfg(test)]
    pub(crate) fn contains_key(&self, key: &str) -> bool {
        self.shards[shard_of(key)].contains_key(key)
    }

    /// Inserts or replaces; copies the key's shard first when another snapshot shares it
    /// (`Arc::make_mut`). Returns the replaced value.
    pub(crate) fn insert(&mut self, key: Arc<str>, value: V) -> Option<V> {
        let shard = Arc::make_mut(&mut self.shards[shard_of(&key)]);
        let old = shard.insert(key, value);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    /// Removes `key`; the shard is copied only when the key is there.
    pub(crate) fn remove(&mut self, key: &str) -> Option<(Arc<str>, V)> {
        let i = shard_of(key);
        if !self.shards[i].contains_key(key) {
            return None;
        }
        let removed = Arc::make_mut(&mut self.shards[i]).remove_entry(key);
        if removed.is_some() {
            self.len -= 1;
        }
        removed
    }

    /// The keys for which `keep` is false, removed; only shards that lose a key are copied.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) -> Vec<Arc<str>> {
        let mut removed = Vec::new();
        for shard in &mut self.shards {
            if shard.keys().all(|k| keep(k)) {
                continue;
            }
            Arc::make_mut(shard).retain(|k, _| {
                let kept = keep(k);
                if !kept {
                    removed.push(k.clone());
                }
                kept
            });
        }
        self.len -= removed.len();
        removed
    }

    /// The number of entries, kept as a count (not summed over the shards).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Every entry, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &V)> {
        self.shards.iter().flat_map(|s| s.iter())
    }

    /// Every value, in no particular order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.shards.iter().flat_map(|s| s.values())
    }

    /// True when `self` and `other` share the shard that holds `key` (it was not copied).
    #[cfg(test)]
    pub(crate) fn shares_shard_of(&self, other: &ShardedMap<V>, key: &str) -> bool {
        let i = shard_of(key);
        Arc::ptr_eq(&self.shards[i], &other.shards[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_copies_one_shard() {
        let mut a: ShardedMap<u32> = ShardedMap::default();
        for i in 0..1000 {
            a.insert(Arc::from(format!("k{i}")), i);
        }
        let mut b = a.clone();
        b.insert(Arc::from("k1"), 7);
        assert_eq!((a.get("k1"), b.get("k1")), (Some(&1), Some(&7)));
        let copied = (0..1000)
            .filter(|i| !a.shares_shard_of(&b, &format!("k{i}")))
            .count();
        assert!(copied < 1000 / 16, "{copied} keys live in copied shards");
        assert_eq!(
            b.remove("k2").map(|(k, v)| (k.to_string(), v)),
            Some(("k2".into(), 2))
        );
        assert_eq!((a.len(), b.len()), (1000, 999));
        let gone = b.retain(|k| k != "k3" && k != "k4");
        assert_eq!(gone.len(), 2);
        assert_eq!(b.len(), 997);
        assert_eq!(b.iter().count(), 997);
        assert!(a.contains_key("k3") && !b.contains_key("k3"));
    }
}
