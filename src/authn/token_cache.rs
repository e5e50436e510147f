//! The token result cache (k8s.io/apiserver
//! [`pkg/authentication/token/cache/cached_token_authenticator.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/authentication/token/cache/cached_token_authenticator.go)): results keyed by an
//! HMAC-SHA256 of token and audiences under a random per-process key, successes and
//! failures kept for their own TTLs, errors never kept, and concurrent lookups of one key
//! coalesced into one (a `futures_util` `Shared` future per key in flight).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use futures_util::future::{BoxFuture, Shared};
use ring::hmac;

use super::{AuthenticationError, AuthenticationResult, UserInfo};
use crate::rt::Timer;

/// How long token results are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheTtl {
    /// For tokens that authenticated. Zero: not cached.
    pub success: Duration,
    /// For tokens that did not. Zero: not cached.
    pub failure: Duration,
}

impl CacheTtl {
    /// Both TTLs equal to `ttl`, as `--authentication-token-webhook-cache-ttl` sets them.
    pub fn both(ttl: Duration) -> Self {
        CacheTtl {
            success: ttl,
            failure: ttl,
        }
    }
}

impl Default for CacheTtl {
    /// kube-apiserver's `--authentication-token-webhook-cache-ttl` default: 2 minutes.
    fn default() -> Self {
        CacheTtl::both(Duration::from_secs(120))
    }
}

/// An HMAC-SHA256 of token and audiences: the cache never holds a token, and a key
/// cannot be computed without the per-process secret.
type Key = [u8; 32];

/// Above this many entries an insert first drops the expired ones.
const PRUNE_AT: usize = 4096;

/// A lookup in progress, shared by everyone asking for the same key meanwhile. Whoever
/// polls it drives it, so a caller that goes away leaves it to the others.
type Lookup = Shared<BoxFuture<'static, AuthenticationResult>>;

/// The cache of one token authenticator; shared (`Arc`) by its clones.
pub(crate) struct TokenCache {
    hmac_key: hmac::Key,
    ttl: CacheTtl,
    timer: Timer,
    state: Mutex<State>,
}

/// The entries and the lookups in flight, under one mutex held only for map operations
/// (never across a webhook call).
#[derive(Default)]
struct State {
    /// Results by key with their expiry (on the injected timer's clock); `None` is a
    /// remembered "not ok".
    entries: HashMap<Key, (Option<UserInfo>, Instant)>,
    /// Lookups in progress, removed when they complete.
    flights: HashMap<Key, Lookup>,
    /// The entry count at which the next insert prunes expired entries.
    prune_at: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

debug_fields!(TokenCache { ttl });

impl TokenCache {
    /// An empty cache keeping results for `ttl`, timed with `timer`, under a fresh random
    /// HMAC key. Fails only when the system has no randomness.
    pub(crate) fn new(ttl: CacheTtl, timer: Timer) -> Result<Self, AuthenticationError> {
        let rng = ring::rand::SystemRandom::new();
        let hmac_key = hmac::Key::generate(hmac::HMAC_SHA256, &rng)
            .map_err(|_| AuthenticationError::Other("token cache: no system randomness".into()))?;
        Ok(TokenCache {
            hmac_key,
            ttl,
            timer,
            state: Mutex::new(State::default()),
        })
    }

    pub(crate) fn ttl(&self) -> CacheTtl {
        self.ttl
    }

    pub(crate) fn timer(&self) -> Timer {
        self.timer.clone()
    }

    /// Length-prefixed fields, so `("ab", ["c"])` and `("a", ["bc"])` differ.
    pub(crate) fn key(&self, token: &str, audiences: &[String]) -> Key {
        let mut ctx = hmac::Context::with_key(&self.hmac_key);
        for field in std::iter::once(token).chain(audiences.iter().map(String::as_str)) {
            ctx.update(&(field.len() as u64).to_be_bytes());
            ctx.update(field.as_bytes());
        }
        let mut key = [0u8; 32];
        key.copy_from_slice(ctx.sign().as_ref());
        key
    }

    /// The cached result for `key`, or the result of the future `lookup` makes (made at
    /// most once at a time per key; concurrent callers share it).
    pub(crate) async fn get_or_lookup<F, Fut>(
        self: &Arc<Self>,
        key: Key,
        lookup: F,
    ) -> AuthenticationResult
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = AuthenticationResult> + Send + 'static,
    {
        let flight = {
            let mut state = lock(&self.state);
            if let Some((user, expires)) = state.entries.get(&key) {
                if *expires > self.timer.now() {
                    return Ok(user.clone());
                }
                state.entries.remove(&key);
            }
            state
                .flights
                .entry(key)
                .or_insert_with(|| {
                    let cache = Arc::clone(self);
                    let fut = lookup();
                    async move {
                        let result = fut.await;
                        cache.complete(key, &result);
                        result
                    }
                    .boxed()
                    .shared()
                })
                .clone()
        };
        flight.await
    }

    /// Keeps a result for its TTL (errors are never kept) and ends its flight.
    fn complete(&self, key: Key, result: &AuthenticationResult) {
        let mut state = lock(&self.state);
        if let Ok(user) = result {
            let ttl = if user.is_some() {
                self.ttl.success
            } else {
                self.ttl.failure
            };
            if !ttl.is_zero() {
                let now = self.timer.now();
                if state.entries.len() >= state.prune_at.max(PRUNE_AT) {
                    state.entries.retain(|_, (_, exp)| *exp > now);
                    // Grow the threshold with the live set so pruning stays amortised.
                    state.prune_at = state.entries.len() * 2;
                }
                state.entries.insert(key, (user.clone(), now + ttl));
            }
        }
        state.flights.remove(&key);
    }
}
