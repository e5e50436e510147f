//! A bounded LRU whose entries expire: the shape of k8s.io/apimachinery
//! `pkg/util/cache/lruexpirecache.go`, which the webhook authorizer keeps its decisions in.
//!
//! Time is passed in by the caller (from the injected timer), so the cache itself never
//! reads a clock and tests can step it.

use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use lru::LruCache;

/// Entries keyed by bytes, each with its own expiry; at most `capacity` of them, the
/// least recently used evicted first (an `lru::LruCache` of values and expiries).
///
/// Keys are hashed with aHash under a key drawn at random per cache: the keys carry what
/// callers choose (user names, paths), so the hash must be keyed against collision
/// floods, and std's SipHash cost about 0.8k instructions per lookup of a typical
/// decision key (benches/load/README.md) where aHash costs a fraction of that.
#[derive(Debug)]
pub(crate) struct ExpiringLru<V> {
    entries: LruCache<Box<[u8]>, (V, Instant), ahash::RandomState>,
}

impl<V: Clone> ExpiringLru<V> {
    /// An empty cache holding at most `capacity` entries (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        ExpiringLru {
            entries: LruCache::with_hasher(
                NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN),
                ahash::RandomState::new(),
            ),
        }
    }

    /// The value under `key` if it has not expired at `now`, marking it most recently
    /// used. An expired entry is removed, as upstream's `Get` does.
    pub(crate) fn get(&mut self, key: &[u8], now: Instant) -> Option<V> {
        match self.entries.get(key) {
            Some((value, expires)) if now < *expires => Some(value.clone()),
            Some(_) => {
                self.entries.pop(key);
                None
            }
            None => None,
        }
    }

    /// Stores `value` under `key` until `now + ttl`, replacing any earlier entry, and
    /// evicts the least recently used entry when over capacity.
    pub(crate) fn insert(
        &mut self,
        key: impl Into<Box<[u8]>>,
        value: V,
        ttl: Duration,
        now: Instant,
    ) {
        // An unrepresentable expiry (a TTL of centuries) means "until evicted".
        let expires = now
            .checked_add(ttl)
            .unwrap_or(now + Duration::from_secs(1 << 32));
        self.entries.put(key.into(), (value, expires));
    }

    /// Entries held, expired ones included until they are looked up or evicted.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_at_their_own_ttl() {
        let t0 = Instant::now();
        let mut c = ExpiringLru::new(8);
        c.insert(*b"a", 1, Duration::from_secs(300), t0);
        c.insert(*b"b", 2, Duration::from_secs(30), t0);
        let t = t0 + Duration::from_secs(29);
        assert_eq!((c.get(b"a", t), c.get(b"b", t)), (Some(1), Some(2)));
        let t = t0 + Duration::from_secs(30);
        assert_eq!((c.get(b"a", t), c.get(b"b", t)), (Some(1), None));
        assert_eq!(c.len(), 1, "an expired entry is dropped when looked up");
        assert_eq!(c.get(b"a", t0 + Duration::from_secs(300)), None);
    }

    #[test]
    fn least_recently_used_is_evicted_first() {
        let t0 = Instant::now();
        let ttl = Duration::from_secs(60);
        let mut c = ExpiringLru::new(2);
        c.insert(*b"a", 1, ttl, t0);
        c.insert(*b"b", 2, ttl, t0);
        assert_eq!(c.get(b"a", t0), Some(1));
        c.insert(*b"c", 3, ttl, t0);
        assert_eq!(c.len(), 2);
        assert_eq!(c.get(b"b", t0), None, "b was least recently used");
        assert_eq!((c.get(b"a", t0), c.get(b"c", t0)), (Some(1), Some(3)));
    }

    #[test]
    fn replacing_renews_value_expiry_and_recency() {
        let t0 = Instant::now();
        let minute = Duration::from_secs(60);
        let mut c = ExpiringLru::new(2);
        c.insert(*b"a", 1, Duration::from_secs(1), t0);
        c.insert(*b"b", 2, minute, t0);
        c.insert(*b"a", 10, minute, t0);
        c.insert(*b"c", 3, minute, t0);
        let t = t0 + Duration::from_secs(2);
        assert_eq!((c.get(b"a", t), c.get(b"b", t)), (Some(10), None));
        assert_eq!(c.len(), 2);
    }
}
