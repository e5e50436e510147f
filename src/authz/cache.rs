//! A bounded LRU whose entries expire: the shape of k8s.io/apimachinery
//! `pkg/util/cache/lruexpirecache.go`, which the webhook authorizer keeps its decisions in.
//!
//! Time is passed in by the caller (from the injected timer), so the cache itself never
//! reads a clock and tests can step it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Entries keyed by string, each with its own expiry; at most `capacity` of them, the
/// least recently used evicted first.
#[derive(Debug)]
pub(crate) struct ExpiringLru<V> {
    capacity: usize,
    entries: HashMap<Arc<str>, Slot<V>>,
    // Recency order: a strictly increasing use stamp per entry; the smallest is the
    // least recently used. Keys are shared with `entries`, so a long key is stored once.
    recency: BTreeMap<u64, Arc<str>>,
    next_stamp: u64,
}

#[derive(Debug)]
struct Slot<V> {
    value: V,
    expires: Instant,
    stamp: u64,
}

impl<V: Clone> ExpiringLru<V> {
    /// An empty cache holding at most `capacity` entries (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        ExpiringLru {
            capacity: capacity.max(1),
            entries: HashMap::new(),
            recency: BTreeMap::new(),
            next_stamp: 0,
        }
    }

    /// The value under `key` if it has not expired at `now`, marking it most recently
    /// used. An expired entry is removed, as upstream's `Get` does.
    pub(crate) fn get(&mut self, key: &str, now: Instant) -> Option<V> {
        let stamp = self.stamp();
        let slot = self.entries.get_mut(key)?;
        if now >= slot.expires {
            let old = slot.stamp;
            self.recency.remove(&old);
            self.entries.remove(key);
            return None;
        }
        let old = std::mem::replace(&mut slot.stamp, stamp);
        let value = slot.value.clone();
        if let Some(k) = self.recency.remove(&old) {
            self.recency.insert(stamp, k);
        }
        Some(value)
    }

    /// Stores `value` under `key` until `now + ttl`, replacing any earlier entry, and
    /// evicts the least recently used entry when over capacity.
    pub(crate) fn insert(&mut self, key: String, value: V, ttl: Duration, now: Instant) {
        let stamp = self.stamp();
        // An unrepresentable expiry (a TTL of centuries) means "until evicted".
        let expires = now
            .checked_add(ttl)
            .unwrap_or(now + Duration::from_secs(1 << 32));
        if let Some(slot) = self.entries.get_mut(key.as_str()) {
            slot.value = value;
            slot.expires = expires;
            let old = std::mem::replace(&mut slot.stamp, stamp);
            if let Some(k) = self.recency.remove(&old) {
                self.recency.insert(stamp, k);
            }
            return;
        }
        let key: Arc<str> = key.into();
        self.recency.insert(stamp, key.clone());
        self.entries.insert(
            key,
            Slot {
                value,
                expires,
                stamp,
            },
        );
        while self.entries.len() > self.capacity {
            let Some((_, oldest)) = self.recency.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
    }

    /// Entries held, expired ones included until they are looked up or evicted.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    fn stamp(&mut self) -> u64 {
        self.next_stamp += 1;
        self.next_stamp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_at_their_own_ttl() {
        let t0 = Instant::now();
        let mut c = ExpiringLru::new(8);
        c.insert("a".into(), 1, Duration::from_secs(300), t0);
        c.insert("b".into(), 2, Duration::from_secs(30), t0);
        let t = t0 + Duration::from_secs(29);
        assert_eq!((c.get("a", t), c.get("b", t)), (Some(1), Some(2)));
        let t = t0 + Duration::from_secs(30);
        assert_eq!((c.get("a", t), c.get("b", t)), (Some(1), None));
        assert_eq!(c.len(), 1, "an expired entry is dropped when looked up");
        assert_eq!(c.get("a", t0 + Duration::from_secs(300)), None);
    }

    #[test]
    fn least_recently_used_is_evicted_first() {
        let t0 = Instant::now();
        let ttl = Duration::from_secs(60);
        let mut c = ExpiringLru::new(2);
        c.insert("a".into(), 1, ttl, t0);
        c.insert("b".into(), 2, ttl, t0);
        assert_eq!(c.get("a", t0), Some(1));
        c.insert("c".into(), 3, ttl, t0);
        assert_eq!(c.len(), 2);
        assert_eq!(c.get("b", t0), None, "b was least recently used");
        assert_eq!((c.get("a", t0), c.get("c", t0)), (Some(1), Some(3)));
    }

    #[test]
    fn replacing_renews_value_expiry_and_recency() {
        let t0 = Instant::now();
        let mut c = ExpiringLru::new(2);
        c.insert("a".into(), 1, Duration::from_secs(1), t0);
        c.insert("b".into(), 2, Duration::from_secs(60), t0);
        c.insert("a".into(), 10, Duration::from_secs(60), t0);
        c.insert("c".into(), 3, Duration::from_secs(60), t0);
        let t = t0 + Duration::from_secs(2);
        assert_eq!((c.get("a", t), c.get("b", t)), (Some(10), None));
        assert_eq!(c.len(), 2);
    }
}
