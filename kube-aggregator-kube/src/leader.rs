//! [`LeaderElection`]: one replica of several holds a `coordination.k8s.io/v1` Lease and
//! is the leader, with the algorithm of client-go's `tools/leaderelection`
//! (`leaderelection.go`, `tryAcquireOrRenew`; the record as `resourcelock/leaselock.go`
//! writes it into the Lease's spec).
//!
//! - A candidate reads the Lease every retry period (with jitter). It takes the Lease
//!   when nobody holds it, or when the record it last saw has not changed for
//!   `leaseDurationSeconds`, measured on its own clock from the moment it saw the change
//!   (never from the Lease's `renewTime`, so clock skew between replicas does not
//!   matter); the update carries the `resourceVersion` read, so of two candidates only
//!   one wins (the other gets `409 Conflict`).
//! - The leader renews every retry period (first with the object it wrote last, then,
//!   if that conflicts, after a fresh read). When it has not renewed within the renew
//!   deadline, or it sees another holder, it stops leading and becomes a candidate again.
//! - Defaults are upstream's (`k8s.io/component-base/config/v1alpha1/defaults.go`): a
//!   15 s lease, a 10 s renew deadline, a 2 s retry period.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::chrono::Utc;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::index::AbortOnDrop;

/// client-go's `JitterFactor`: a candidate waits up to 2.2 retry periods between tries.
const JITTER_FACTOR: f64 = 1.2;

/// The timing of a [`LeaderElection`] (the `--leader-elect-*` flags of Kubernetes
/// components).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTiming {
    /// How long a candidate waits, after it last saw the Lease change, before it takes
    /// it over (`--leader-elect-lease-duration`, 15 s). Written to the Lease in whole
    /// seconds; at least 1 s.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops leading
    /// (`--leader-elect-renew-deadline`, 10 s). Shorter than the lease duration.
    pub renew_deadline: Duration,
    /// How long a candidate waits between tries, and the leader between renewals
    /// (`--leader-elect-retry-period`, 2 s). The renew deadline must exceed 1.2 of it.
    pub retry_period: Duration,
}

impl Default for LeaseTiming {
    fn default() -> Self {
        LeaseTiming {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl LeaseTiming {
    /// Checks the timing as client-go's `NewLeaderElector` does; the message names the
    /// rule broken.
    pub fn validate(&self) -> Result<(), LeaderElectionError> {
        let fail = |m: String| Err(LeaderElectionError(m));
        if self.lease_duration < Duration::from_secs(1) {
            return fail(format!(
                "lease duration must be at least 1s, not {:?}",
                self.lease_duration
            ));
        }
        if self.renew_deadline.is_zero() || self.retry_period.is_zero() {
            return fail("renew deadline and retry period must be greater than zero".into());
        }
        if self.lease_duration <= self.renew_deadline {
            return fail(format!(
                "lease duration ({:?}) must be greater than renew deadline ({:?})",
                self.lease_duration, self.renew_deadline
            ));
        }
        if self.renew_deadline.as_secs_f64() <= self.retry_period.as_secs_f64() * JITTER_FACTOR {
            return fail(format!(
                "renew deadline ({:?}) must be greater than retry period ({:?}) * {JITTER_FACTOR}",
                self.renew_deadline, self.retry_period
            ));
        }
        Ok(())
    }
}

/// Why a [`LeaderElection`] cannot start: its timing or identity is not valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionError(String);

impl std::fmt::Display for LeaderElectionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "leader election: {}", self.0)
    }
}

impl std::error::Error for LeaderElectionError {}

/// A candidate for the Lease `namespace/name`, known by `identity` (unique among the
/// replicas: a Pod's name, or the host name and a random suffix, as client-go's users
/// make it). [`LeaderElection::spawn`] starts it.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    timing: LeaseTiming,
}

impl LeaderElection {
    /// A candidate for the Lease `namespace/name` with the default timing.
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: impl Into<String>,
    ) -> LeaderElection {
        LeaderElection {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.into(),
            timing: LeaseTiming::default(),
        }
    }

    /// With `timing` instead of the defaults.
    pub fn timing(mut self, timing: LeaseTiming) -> LeaderElection {
        self.timing = timing;
        self
    }

    /// Runs the election on a task of the current tokio runtime, until the returned
    /// [`Leadership`] (and every clone of it) is dropped. Fails when the timing is not
    /// valid ([`LeaseTiming::validate`]) or the identity is empty.
    pub fn spawn(self) -> Result<Leadership, LeaderElectionError> {
        self.timing.validate()?;
        if self.identity.is_empty() {
            return Err(LeaderElectionError("the identity is empty".into()));
        }
        let (leading_tx, leading) = watch::channel(false);
        let (leader_tx, leader) = watch::channel(None);
        let identity: Arc<str> = self.identity.as_str().into();
        let elector = Elector {
            election: self,
            observed: None,
            observed_time: Instant::now(),
            lease: None,
            leader: leader_tx,
        };
        let task = tokio::spawn(elector.run(leading_tx));
        Ok(Leadership {
            identity,
            leading,
            leader,
            task: Arc::new(AbortOnDrop(task)),
        })
    }
}

/// A running candidate: whether it leads, and who does. Cloning shares the candidate;
/// dropping the last clone stops it (it stops renewing, and another replica takes over
/// once the lease duration has passed).
pub struct Leadership {
    identity: Arc<str>,
    leading: watch::Receiver<bool>,
    leader: watch::Receiver<Option<String>>,
    task: Arc<AbortOnDrop>,
}

impl Clone for Leadership {
    fn clone(&self) -> Self {
        Leadership {
            identity: self.identity.clone(),
            leading: self.leading.clone(),
            leader: self.leader.clone(),
            task: self.task.clone(),
        }
    }
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("identity", &self.identity)
            .field("leading", &*self.leading.borrow())
            .field("leader", &*self.leader.borrow())
            .finish_non_exhaustive()
    }
}

impl Leadership {
    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Whether this candidate leads now.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// The holder of the Lease as this candidate last saw it (`None` before the first
    /// read, or when nobody holds it).
    pub fn leader(&self) -> Option<String> {
        self.leader.borrow().clone()
    }

    /// Whether this candidate leads, as a channel that changes when it starts or stops.
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }
}

/// The candidate's state: what it last saw of the Lease and when.
struct Elector {
    election: LeaderElection,
    /// The record last seen (the Lease's spec).
    observed: Option<LeaseSpec>,
    /// When the record last seen changed, on this candidate's clock.
    observed_time: Instant,
    /// The Lease last read or written: its `resourceVersion` goes with the next update.
    lease: Option<Lease>,
    leader: watch::Sender<Option<String>>,
}

impl Elector {
    async fn run(mut self, leading: watch::Sender<bool>) {
        let timing = self.election.timing;
        loop {
            while !self.try_within(timing.renew_deadline).await {
                tokio::time::sleep(jittered(timing.retry_period)).await;
            }
            tracing::info!(lease = %self.describe(), identity = %self.election.identity, "acquired the lease: leading");
            leading.send_replace(true);
            loop {
                tokio::time::sleep(timing.retry_period).await;
                if !self.renew().await {
                    break;
                }
            }
            leading.send_replace(false);
            tracing::warn!(lease = %self.describe(), identity = %self.election.identity, "lost the lease: not leading");
        }
    }

    /// Tries to renew until the renew deadline, every retry period: false when the
    /// deadline passed without a renewal or another candidate holds the Lease.
    async fn renew(&mut self) -> bool {
        let timing = self.election.timing;
        let deadline = Instant::now() + timing.renew_deadline;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.try_within(left).await {
                return true;
            }
            if !self.is_leader() || Instant::now() + timing.retry_period >= deadline {
                return false;
            }
            tokio::time::sleep(timing.retry_period).await;
        }
    }

    /// [`Elector::try_acquire_or_renew`], given up (as failed) after `limit`.
    async fn try_within(&mut self, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.try_acquire_or_renew())
            .await
            .unwrap_or(false)
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.election.namespace, self.election.name)
    }

    fn is_leader(&self) -> bool {
        self.observed
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            == Some(self.election.identity.as_str())
    }

    /// Whether the record last seen is still within its lease duration.
    fn lease_valid(&self, now: Instant) -> bool {
        let seconds = self
            .observed
            .as_ref()
            .and_then(|s| s.lease_duration_seconds)
            .unwrap_or(0);
        self.observed_time + Duration::from_secs(u64::try_from(seconds).unwrap_or(0)) > now
    }

    /// Takes `lease` as the one last seen; its record as observed now when it changed.
    fn observe(&mut self, lease: Lease) {
        if lease.spec != self.observed {
            self.observed = lease.spec.clone();
            self.observed_time = Instant::now();
            let holder = self
                .observed
                .as_ref()
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty());
            self.leader.send_if_modified(|leader| {
                let changed = *leader != holder;
                *leader = holder;
                changed
            });
        }
        self.lease = Some(lease);
    }

    /// One round of client-go's `tryAcquireOrRenew`: true when this candidate holds the
    /// Lease afterwards.
    async fn try_acquire_or_renew(&mut self) -> bool {
        let wall = MicroTime(Utc::now());
        let now = Instant::now();
        let seconds =
            i32::try_from(self.election.timing.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let mut record = LeaseSpec {
            holder_identity: Some(self.election.identity.clone()),
            lease_duration_seconds: Some(seconds),
            acquire_time: Some(wall.clone()),
            renew_time: Some(wall),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        };

        // 1. The leader's fast path: update what it wrote last.
        if self.is_leader() && self.lease_valid(now) {
            if let (Some(lease), Some(observed)) = (self.lease.clone(), self.observed.clone()) {
                record.acquire_time = observed.acquire_time;
                record.lease_transitions = observed.lease_transitions;
                match self.update(lease, record.clone()).await {
                    Ok(lease) => {
                        self.observe(lease);
                        return true;
                    }
                    Err(e) => {
                        tracing::debug!(lease = %self.describe(), error = %e, "optimistic renewal failed; reading the lease")
                    }
                }
            }
        }

        // 2. Read the Lease, or create it.
        let current = match self.election.api.get_opt(&self.election.name).await {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.election.name.clone()),
                        namespace: Some(self.election.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(record),
                };
                return match self
                    .election
                    .api
                    .create(&PostParams::default(), &lease)
                    .await
                {
                    Ok(lease) => {
                        self.observe(lease);
                        true
                    }
                    Err(e) => {
                        tracing::warn!(lease = %self.describe(), error = %e, "creating the lease failed");
                        false
                    }
                };
            }
            Err(e) => {
                tracing::warn!(lease = %self.describe(), error = %e, "reading the lease failed");
                return false;
            }
        };

        // 3. Held by another and not expired: wait.
        self.observe(current.clone());
        let held = self
            .observed
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            .is_some_and(|h| !h.is_empty());
        if held && self.lease_valid(now) && !self.is_leader() {
            return false;
        }

        // 4. Take it over (or renew after a conflict).
        let observed = self.observed.clone().unwrap_or_default();
        if self.is_leader() {
            record.acquire_time = observed.acquire_time;
            record.lease_transitions = observed.lease_transitions;
        } else {
            record.lease_transitions =
                Some(observed.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        match self.update(current, record).await {
            Ok(lease) => {
                self.observe(lease);
                true
            }
            Err(e) => {
                tracing::debug!(lease = %self.describe(), error = %e, "updating the lease failed");
                false
            }
        }
    }

    /// Replaces the spec of `lease` (with its `resourceVersion`: a stale one is 409).
    async fn update(&self, mut lease: Lease, record: LeaseSpec) -> Result<Lease, kube::Error> {
        lease.spec = Some(record);
        self.election
            .api
            .replace(&self.election.name, &PostParams::default(), &lease)
            .await
    }
}

/// `period` plus up to [`JITTER_FACTOR`] of it (client-go's `wait.Jitter`).
fn jittered(period: Duration) -> Duration {
    use std::hash::BuildHasher;
    let random = std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now());
    let fraction = (random % 1_000_000) as f64 / 1_000_000.0;
    period + period.mul_f64(JITTER_FACTOR * fraction)
}

/// An identity for this process, as Kubernetes components make theirs: the host name
/// (a Pod's name, in a pod), `_`, and a random suffix, so that a restarted process does
/// not take the previous one's place in the Lease.
pub fn default_identity() -> String {
    use std::hash::BuildHasher;
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "kube-aggregator".to_owned());
    let random = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
    format!("{host}_{random:016x}")
}
