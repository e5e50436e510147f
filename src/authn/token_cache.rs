//! The token result cache (k8s.io/apiserver
//! `pkg/authentication/token/cache/cached_token_authenticator.go`): results keyed by an
//! HMAC-SHA256 of token and audiences under a random per-process key, successes and
//! failures kept for their own TTLs, errors never kept, and concurrent lookups of one key
//! coalesced into one.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

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

type Key = [u8; 32];

/// Above this many entries an insert first drops the expired ones.
const PRUNE_AT: usize = 4096;

pub(crate) struct TokenCache {
    hmac_key: hmac::Key,
    ttl: CacheTtl,
    timer: Timer,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    entries: HashMap<Key, (Option<UserInfo>, Instant)>,
    flights: HashMap<Key, Arc<Flight>>,
    prune_at: usize,
}

/// One lookup in progress, shared by everyone asking for the same key meanwhile.
#[derive(Default)]
struct Flight {
    state: Mutex<FlightState>,
}

#[derive(Default)]
struct FlightState {
    outcome: Option<Outcome>,
    wakers: Vec<Waker>,
}

#[derive(Clone)]
enum Outcome {
    Done(AuthenticationResult),
    /// The leader's future was dropped before finishing; a waiter takes over.
    Abandoned,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl std::fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCache")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl TokenCache {
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

    /// The cached result for `key`, or the result of `lookup` (run at most once at a time
    /// per key; concurrent callers share it).
    pub(crate) async fn get_or_lookup<F, Fut>(&self, key: Key, lookup: F) -> AuthenticationResult
    where
        F: Fn() -> Fut,
        Fut: Future<Output = AuthenticationResult>,
    {
        loop {
            let flight = {
                let mut state = lock(&self.state);
                if let Some((user, expires)) = state.entries.get(&key) {
                    if *expires > self.timer.now() {
                        return Ok(user.clone());
                    }
                    state.entries.remove(&key);
                }
                match state.flights.get(&key) {
                    Some(f) => Some(f.clone()),
                    None => {
                        state.flights.insert(key, Arc::new(Flight::default()));
                        None
                    }
                }
            };
            match flight {
                Some(flight) => match (Wait { flight }).await {
                    Outcome::Done(result) => return result,
                    Outcome::Abandoned => continue,
                },
                None => {
                    let mut guard = Leader {
                        cache: self,
                        key,
                        done: false,
                    };
                    let result = lookup().await;
                    guard.finish(Outcome::Done(result.clone()));
                    return result;
                }
            }
        }
    }

    fn complete(&self, key: Key, outcome: Outcome) {
        let flight = {
            let mut state = lock(&self.state);
            if let Outcome::Done(Ok(user)) = &outcome {
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
            state.flights.remove(&key)
        };
        if let Some(flight) = flight {
            let wakers = {
                let mut f = lock(&flight.state);
                f.outcome = Some(outcome);
                std::mem::take(&mut f.wakers)
            };
            wakers.into_iter().for_each(Waker::wake);
        }
    }
}

/// Publishes the leader's result, or [`Outcome::Abandoned`] if it is dropped first.
struct Leader<'a> {
    cache: &'a TokenCache,
    key: Key,
    done: bool,
}

impl Leader<'_> {
    fn finish(&mut self, outcome: Outcome) {
        self.done = true;
        self.cache.complete(self.key, outcome);
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.cache.complete(self.key, Outcome::Abandoned);
        }
    }
}

struct Wait {
    flight: Arc<Flight>,
}

impl Future for Wait {
    type Output = Outcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome> {
        let mut f = lock(&self.flight.state);
        if let Some(outcome) = &f.outcome {
            return Poll::Ready(outcome.clone());
        }
        if !f.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            f.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}
