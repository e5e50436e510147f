//! A Service's requests spread over its endpoints, and outlier detection: an endpoint
//! that keeps failing is ejected for a while, probed, and let back when the probe passes.
//!
//! Only a Service with several endpoints ([`ServiceEndpoints::Many`], the ready
//! endpoints of its EndpointSlices with `--enable-aggregator-routing`) is balanced; one
//! address (a ClusterIP, a DNS name) is used as it is, with no state kept. Balancing
//! takes the less loaded of two endpoints drawn at random ("power of two choices" on the
//! requests in flight, as Envoy's least-request balancer). Ejection follows Envoy's
//! outlier detection (`source/common/upstream/outlier_detection_impl.cc`): consecutive
//! failures (`consecutive_5xx`), an ejection time that grows with each ejection
//! (`base_ejection_time` × ejections, up to `max_ejection_time`), and at most
//! `max_ejection_percent` of the endpoints out at once. Where Envoy lets an endpoint back
//! when its time is up, here a probe (the availability check's `GET
//! /apis/<group>/<version>`, sent by the aggregator, never a client's request) must pass
//! first; without an executor to send it, the endpoint is let back on trial, one failure
//! from the next ejection.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use fnv::FnvHashMap;
use http::uri::Authority;

use super::AggregatorLayer;
use crate::resolver::ServiceEndpoints;

/// When an endpoint of a Service with several is ejected, and for how long. Defaults are
/// Envoy's, but for the share of endpoints that may be out at once (half, not a tenth:
/// an extension server has few replicas).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutlierDetection {
    /// Failures in a row that eject an endpoint: a connection or TLS failure, or a 5xx
    /// answer (Envoy's `consecutive_5xx`, 5). A success resets the count.
    pub consecutive_failures: u32,
    /// How long the first ejection lasts; the n-th in a row lasts n times as long
    /// (Envoy's `base_ejection_time`, 30 s). An endpoint that stays in for this long
    /// counts one ejection fewer.
    pub base_ejection_time: Duration,
    /// The longest ejection (Envoy's `max_ejection_time`, 300 s).
    pub max_ejection_time: Duration,
    /// At most this share of a Service's endpoints, in percent, is out at once (rounded
    /// down: with three endpoints and 50, one). A single endpoint is never ejected.
    pub max_ejection_percent: u8,
}

impl Default for OutlierDetection {
    fn default() -> Self {
        OutlierDetection {
            consecutive_failures: 5,
            base_ejection_time: Duration::from_secs(30),
            max_ejection_time: Duration::from_secs(300),
            max_ejection_percent: 50,
        }
    }
}

impl AggregatorLayer {
    /// Ejects failing endpoints of Services with several as `config` says (default
    /// [`OutlierDetection::default`]).
    pub fn outlier_detection(self, config: OutlierDetection) -> AggregatorLayer {
        let mut shared = (*self.shared).clone();
        shared.balancer = Arc::new(Balancer::new(config));
        AggregatorLayer {
            shared: Arc::new(shared),
        }
    }
}

/// What the balancer knows of one endpoint.
#[derive(Debug, Default)]
struct Endpoint {
    in_flight: u32,
    /// Failures in a row.
    failures: u32,
    /// Ejections so far, less one per `base_ejection_time` spent in.
    ejections: u32,
    /// Out until then.
    ejected_until: Option<Instant>,
    /// Its ejection is over and a probe is under way: still out.
    probing: bool,
    /// When it last came back in.
    returned: Option<Instant>,
}

impl Endpoint {
    fn is_out(&self, now: Instant) -> bool {
        self.probing || self.ejected_until.is_some_and(|until| until > now)
    }

    fn is_idle(&self) -> bool {
        self.in_flight == 0 && self.failures == 0 && self.ejected_until.is_none() && !self.probing
    }
}

/// The endpoints' state, shared by every request of the stack.
#[derive(Debug)]
pub(crate) struct Balancer {
    config: OutlierDetection,
    endpoints: Mutex<FnvHashMap<Authority, Endpoint>>,
    random: AtomicU64,
}

/// Past this many endpoints known, those with nothing to remember are forgotten.
const PRUNE_ABOVE: usize = 1024;

impl Balancer {
    pub(crate) fn new(config: OutlierDetection) -> Balancer {
        use std::hash::BuildHasher;
        let seed = std::collections::hash_map::RandomState::new().hash_one(0u8);
        Balancer {
            config,
            endpoints: Mutex::new(FnvHashMap::default()),
            random: AtomicU64::new(seed),
        }
    }

    fn lock(&self) -> MutexGuard<'_, FnvHashMap<Authority, Endpoint>> {
        self.endpoints
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A random number (splitmix64 over a shared counter).
    fn next_random(&self) -> u64 {
        let mut z = self
            .random
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The endpoint of `endpoints` a request goes to, and the ejected endpoints whose
    /// time is up and that the caller is to probe now (`can_probe`; otherwise they are
    /// let back on trial).
    pub(crate) fn pick(
        self: &Arc<Self>,
        endpoints: &ServiceEndpoints,
        now: Instant,
        can_probe: bool,
    ) -> (Picked, Vec<Authority>) {
        let all = match endpoints {
            ServiceEndpoints::One(authority) => {
                return (
                    Picked {
                        authority: authority.clone(),
                        tracked: None,
                    },
                    Vec::new(),
                );
            }
            ServiceEndpoints::Many(all) => all,
        };
        let mut state = self.lock();
        let mut due = Vec::new();
        let mut eligible: Vec<usize> = Vec::with_capacity(all.len());
        for (i, authority) in all.iter().enumerate() {
            let Some(endpoint) = state.get_mut(authority) else {
                eligible.push(i);
                continue;
            };
            if endpoint.probing {
                continue;
            }
            match endpoint.ejected_until {
                Some(until) if until > now => continue,
                Some(_) if can_probe => {
                    endpoint.ejected_until = None;
                    endpoint.probing = true;
                    due.push(authority.clone());
                    continue;
                }
                Some(_) => {
                    // On trial: one more failure ejects it again.
                    endpoint.ejected_until = None;
                    endpoint.failures = self.config.consecutive_failures.saturating_sub(1);
                    endpoint.returned = Some(now);
                }
                None => {}
            }
            eligible.push(i);
        }
        if eligible.is_empty() {
            // Every endpoint out (a probe under way for each): requests still go somewhere.
            eligible.extend(0..all.len());
        }
        let chosen = if eligible.len() == 1 {
            eligible[0]
        } else {
            let r = self.next_random();
            let n = eligible.len() as u64;
            let a = (r % n) as usize;
            let mut b = ((r >> 32) % (n - 1)) as usize;
            if b >= a {
                b += 1;
            }
            let load = |i: usize| state.get(&all[eligible[i]]).map_or(0, |e| e.in_flight);
            if load(b) < load(a) {
                eligible[b]
            } else {
                eligible[a]
            }
        };
        let authority = all[chosen].clone();
        if state.len() > PRUNE_ABOVE {
            state.retain(|_, e| !e.is_idle());
        }
        state.entry(authority.clone()).or_default().in_flight += 1;
        drop(state);
        (
            Picked {
                authority,
                tracked: Some((self.clone(), all.clone())),
            },
            due,
        )
    }

    /// A request to `authority` (one of `all`) is over: `failed` or not. The ejection
    /// time when this failure ejected it.
    fn finish(
        &self,
        authority: &Authority,
        all: &[Authority],
        failed: Option<bool>,
        now: Instant,
    ) -> Option<Duration> {
        let mut state = self.lock();
        let endpoint = state.get_mut(authority)?;
        endpoint.in_flight = endpoint.in_flight.saturating_sub(1);
        match failed {
            None => return None,
            Some(false) => {
                endpoint.failures = 0;
                return None;
            }
            Some(true) => endpoint.failures = endpoint.failures.saturating_add(1),
        }
        if endpoint.failures < self.config.consecutive_failures.max(1) || endpoint.is_out(now) {
            return None;
        }
        let max_out = all.len() * usize::from(self.config.max_ejection_percent.min(100)) / 100;
        let out = all
            .iter()
            .filter(|a| state.get(*a).is_some_and(|e| e.is_out(now)))
            .count();
        if out >= max_out {
            return None;
        }
        let endpoint = state.get_mut(authority)?;
        Some(self.eject(endpoint, now))
    }

    /// Ejects `endpoint`: the time it is out.
    fn eject(&self, endpoint: &mut Endpoint, now: Instant) -> Duration {
        let base = self.config.base_ejection_time.max(Duration::from_millis(1));
        if let Some(returned) = endpoint.returned {
            let spent = now.saturating_duration_since(returned).as_nanos() / base.as_nanos();
            endpoint.ejections = endpoint
                .ejections
                .saturating_sub(u32::try_from(spent).unwrap_or(u32::MAX));
        }
        endpoint.ejections = endpoint.ejections.saturating_add(1);
        let time = base
            .saturating_mul(endpoint.ejections)
            .min(self.config.max_ejection_time.max(base));
        endpoint.ejected_until = Some(now + time);
        endpoint.failures = 0;
        time
    }

    /// The probe of `authority` is over: back in when it `passed`, else ejected again
    /// (for longer). The ejection time when it failed.
    pub(crate) fn probed(
        &self,
        authority: &Authority,
        passed: bool,
        now: Instant,
    ) -> Option<Duration> {
        let mut state = self.lock();
        let endpoint = state.get_mut(authority)?;
        endpoint.probing = false;
        if passed {
            endpoint.failures = 0;
            endpoint.returned = Some(now);
            None
        } else {
            Some(self.eject(endpoint, now))
        }
    }

    /// Whether `authority` is out now (ejected, or waiting for its probe).
    #[cfg(test)]
    fn is_out(&self, authority: &Authority, now: Instant) -> bool {
        self.lock().get(authority).is_some_and(|e| e.is_out(now))
    }
}

/// The endpoint a request goes to. Dropped without [`Picked::finish`] (the request was
/// given up), it counts neither as a success nor as a failure.
#[derive(Debug)]
pub(crate) struct Picked {
    authority: Authority,
    /// The balancer and the Service's endpoints, when there are several.
    tracked: Option<(Arc<Balancer>, Arc<[Authority]>)>,
}

impl Picked {
    pub(crate) fn authority(&self) -> &Authority {
        &self.authority
    }

    /// Whether the Service has several endpoints (a failure of one is not the
    /// Service's).
    pub(crate) fn is_balanced(&self) -> bool {
        self.tracked.is_some()
    }

    /// The request is over; `failed` when the endpoint could not be reached or answered
    /// 5xx. The ejection time when this ejected the endpoint.
    pub(crate) fn finish(mut self, failed: bool, now: Instant) -> Option<Duration> {
        let (balancer, all) = self.tracked.take()?;
        balancer.finish(&self.authority, &all, Some(failed), now)
    }
}

impl Drop for Picked {
    fn drop(&mut self) {
        if let Some((balancer, all)) = self.tracked.take() {
            balancer.finish(&self.authority, &all, None, Instant::now());
        }
    }
}

#[cfg(test)]
#[path = "balance_tests.rs"]
mod tests;
