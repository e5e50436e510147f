//! The remote availability controller: which APIService is checked when (its schedule,
//! its five workers); how one check runs and what it writes is `check.rs`.

mod check;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::future::join_all;
use futures_util::stream::FuturesUnordered;

use super::{AvailabilityMetrics, MountedTenants, ServiceResolver, UnavailableCause};
use crate::apiservice::ServiceReference;
use crate::registry::{Registry, Route, RoutingTable};
use crate::rt::Timer;
use crate::tenancy::Tenant;

/// How many APIServices are checked at the same time (upstream: 5 workers).
const WORKERS: usize = 5;

/// Timing of the availability controller. Defaults are upstream's
/// (`apiserver.go` and `remote_available_controller.go` of kube-aggregator); every
/// duration is measured on the controller's [`Timer`], so tests may shorten them or run
/// on a paused clock.
#[derive(Debug, Clone)]
pub struct AvailabilityConfig {
    /// How often an available APIService is checked again (upstream: 30 s resync).
    pub resync_period: Duration,
    /// Timeout of one probe attempt, headers included (upstream: the HTTP client's 5 s).
    /// A timed-out attempt fails with upstream's `... context deadline exceeded
    /// (Client.Timeout exceeded while awaiting headers)`.
    pub probe_timeout: Duration,
    /// Probe attempts run in parallel; any success passes (upstream: 5). Each attempt
    /// resolves the Service afresh, so one check samples several endpoints. 0 counts as 1.
    pub probe_attempts: usize,
    /// First retry delay after a failed check (upstream: 5 ms), doubled per failure up to
    /// [`AvailabilityConfig::backoff_max`]; a passing check resets it.
    pub backoff_base: Duration,
    /// Longest retry delay (upstream: 30 s).
    pub backoff_max: Duration,
    /// When a request found the backend unreachable (beyond upstream: the APIService is
    /// marked unavailable at once, see [`Registry::report_unreachable`]), the first
    /// re-check comes this long after, then with doubling delays up to
    /// [`AvailabilityConfig::backoff_max`]. Default 1 s.
    pub passive_recheck: Duration,
    /// Beyond upstream: how many checks in a row must fail softly (the check timed out,
    /// a 5xx or 429: [`UnavailableCause::is_soft`]) before an available APIService turns
    /// `Available=False`. Until then it stays `True`, its condition's message says it is
    /// degraded and why, and requests keep flowing. A hard failure turns it unavailable
    /// at once. Default 3; 1 is upstream's behaviour (every failed check flips).
    pub soft_failure_threshold: u32,
    /// Beyond upstream: after a soft failure the next check comes this long after, then
    /// with doubling delays up to [`AvailabilityConfig::backoff_max`], so that a slow
    /// extension server is not probed harder while it struggles. Default 5 s: with the
    /// defaults, a server that hangs for good turns unavailable about 25 s after its
    /// first failed check (within one resync period).
    pub degraded_recheck: Duration,
}

impl Default for AvailabilityConfig {
    fn default() -> Self {
        AvailabilityConfig {
            resync_period: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(5),
            probe_attempts: 5,
            backoff_base: Duration::from_millis(5),
            backoff_max: Duration::from_secs(30),
            passive_recheck: Duration::from_secs(1),
            soft_failure_threshold: 3,
            degraded_recheck: Duration::from_secs(5),
        }
    }
}

/// Keeps each remote APIService's `Available` condition current.
///
/// One check of an APIService, in upstream's order (the first failure decides):
///
/// 1. resolve the Service with the [`ServiceResolver`]: a [`ResolveError`](super::ResolveError) gives its
///    reason and message (`ServiceNotFound`, `ServicePortError`, `EndpointsNotFound`,
///    `MissingEndpoints` as `False`; `ServiceAccessError` as `Unknown`);
/// 2. the APIService's backend client must exist: a transport error is
///    `FailedDiscoveryCheck` with the error's text;
/// 3. [`AvailabilityConfig::probe_attempts`] probes in parallel, each `GET
///    https://<resolved>/apis/<group>/<version>` (`/api/<version>` for `v1.`) as
///    `system:kube-aggregator` in `system:masters`, through the APIService's own client
///    (its TLS settings and the proxy client certificate); only a 2xx passes (redirects
///    are not followed, 304 fails). No success: `FailedDiscoveryCheck` with the last
///    attempt's error, e.g. `failing or missing response from <url>: bad status from
///    <url>: 403`;
/// 4. otherwise `True`, `Passed`, `all checks passed`.
///
/// The outcome is written with [`Registry::set_available_condition`] (so status sinks hear
/// of changes) and counted in the [`AvailabilityMetrics`]. Cloning shares the registry,
/// resolver and metrics; run one controller per registry.
#[derive(Clone)]
pub struct AvailabilityController {
    registry: Registry,
    tenants: Option<Arc<dyn MountedTenants>>,
    resolver: Arc<dyn ServiceResolver>,
    timer: Timer,
    config: AvailabilityConfig,
    metrics: Arc<AvailabilityMetrics>,
}

debug_fields!(AvailabilityController { config });

/// What one check found: passed, or the cause of its failure.
pub(crate) type CheckResult = Result<(), UnavailableCause>;

/// A finished check: where its APIService lives, the route checked and what it found.
struct Checked {
    tenant: Option<Tenant>,
    registry: Registry,
    route: Arc<Route>,
    result: CheckResult,
}

/// A check in flight.
type CheckFuture<'a> = Pin<Box<dyn Future<Output = Checked> + Send + 'a>>;

/// What the controller keeps for one registry (the stack's, or a tenant's).
#[derive(Default)]
struct ScopeState {
    schedule: HashMap<String, Schedule>,
    gauged: HashSet<String>,
    in_flight: HashSet<String>,
}

/// The metrics label of a tenant: empty for the stack's own APIServices.
fn tenant_name(tenant: &Option<Tenant>) -> &str {
    tenant.as_ref().map_or("", Tenant::name)
}

/// When an APIService is checked next, and how its retries back off.
struct Schedule {
    due: Instant,
    failures: u32,
    service: ServiceReference,
    /// Marked unavailable by a request: retries back off from `passive_recheck`.
    passive: bool,
    /// Soft failures in a row since the last pass or hard failure.
    soft_failures: u32,
}

impl AvailabilityController {
    /// A controller over `registry`'s APIServices, resolving Services with `resolver`,
    /// timing probes, backoff and resyncs with `timer` and recording into `metrics`.
    /// Nothing happens until [`AvailabilityController::run`] is polled.
    pub fn new(
        registry: Registry,
        resolver: impl ServiceResolver,
        timer: Timer,
        config: AvailabilityConfig,
        metrics: Arc<AvailabilityMetrics>,
    ) -> AvailabilityController {
        AvailabilityController {
            registry,
            tenants: None,
            resolver: Arc::new(resolver),
            timer,
            config,
            metrics,
        }
    }

    /// The metrics this controller maintains (`aggregator_unavailable_apiservice` and
    /// `aggregator_unavailable_apiservice_total`, as upstream's).
    pub fn metrics(&self) -> &Arc<AvailabilityMetrics> {
        &self.metrics
    }

    /// Checks every APIService of the registry once, all at once, as a check of
    /// [`AvailabilityController::run`] would, and writes nothing (no condition, no
    /// metric): the preflight of a host, which reports what each check found before it
    /// serves (the gateway's `check`). Local APIServices pass. In name order.
    pub async fn check_once(&self) -> Vec<(String, Result<(), UnavailableCause>)> {
        let table = self.registry.snapshot_owned();
        let client = self.registry.client_certificate();
        let checks = table.routes().map(|route| {
            let client = client.clone();
            async move {
                let result = self.check(route, client).await;
                (route.apiservice.name().to_owned(), result)
            }
        });
        let mut results = join_all(checks).await;
        results.sort_by(|a, b| a.0.cmp(&b.0));
        results
    }

    /// Checks the APIServices of every tenant of `tenants` too (see [`crate::tenant`]),
    /// with the same workers, schedule and resolver: one controller for the whole stack.
    /// A tenant's conditions go to its own registry, and its metrics carry a `cluster`
    /// label.
    pub fn tenants(mut self, tenants: impl MountedTenants) -> AvailabilityController {
        self.tenants = Some(Arc::new(tenants));
        self
    }

    /// The stack's registry and every mounted tenant's, each with its current table.
    fn scopes(&self) -> HashMap<Option<Tenant>, (Registry, Arc<RoutingTable>)> {
        let mut scopes = HashMap::new();
        scopes.insert(
            None,
            (self.registry.clone(), self.registry.snapshot_owned()),
        );
        for (tenant, registry) in self.tenants.iter().flat_map(|t| t.registries()) {
            let table = registry.snapshot_owned();
            scopes.insert(Some(tenant), (registry, table));
        }
        scopes
    }

    /// Runs forever: checks every remote APIService when it appears or its service
    /// changes, then on its schedule. Spawn it on the host's executor (the
    /// [`Aggregator`](crate::Aggregator)'s worker runs it). Dropping the future stops it;
    /// conditions then stay as last written.
    ///
    /// A passing check is repeated after [`AvailabilityConfig::resync_period`]; a failing
    /// one after the backoff. The loop wakes for the next due check, a finished check,
    /// or a new registry generation, whichever comes first.
    ///
    /// Up to five checks run at once, each on its own: a check that hangs until its probe
    /// timeout (a black-holed backend) holds one of the five and delays nobody else's, as
    /// with upstream's five independent workers. The next due APIService starts as soon
    /// as any check finishes. With [`AvailabilityController::tenants`], the five are
    /// shared by every tenant's APIServices.
    pub async fn run(self) {
        let mut states: HashMap<Option<Tenant>, ScopeState> = HashMap::new();
        let mut running: FuturesUnordered<CheckFuture<'_>> = FuturesUnordered::new();
        loop {
            // Read before the tables, so a change while this pass runs wakes the next.
            let tenants_seen = self.tenants.as_ref().map(|t| t.generation());
            let scopes = self.scopes();
            let now = self.timer.now();
            // A tenant that is gone takes its schedule and its gauges along (its checks in
            // flight finish and are dropped).
            states.retain(|tenant, state| {
                let keep = scopes.contains_key(tenant);
                if !keep {
                    for name in &state.gauged {
                        self.metrics.forget_in(tenant_name(tenant), name);
                    }
                }
                keep
            });
            for (tenant, (registry, table)) in &scopes {
                let state = states.entry(tenant.clone()).or_default();
                self.follow(tenant_name(tenant), registry, table, state, now);
            }
            // Start the longest overdue APIServices on the free workers; the rest wait
            // for a worker, so thousands coming due together never open thousands of
            // probe connections.
            let free = WORKERS.saturating_sub(running.len());
            if free > 0 {
                let mut overdue: Vec<(&Option<Tenant>, &String, Instant)> = states
                    .iter()
                    .flat_map(|(tenant, state)| {
                        state
                            .schedule
                            .iter()
                            .filter(|(n, s)| s.due <= now && !state.in_flight.contains(*n))
                            .map(move |(n, s)| (tenant, n, s.due))
                    })
                    .collect();
                overdue.sort_unstable_by_key(|(_, _, due)| *due);
                let start: Vec<(Option<Tenant>, String)> = overdue
                    .into_iter()
                    .take(free)
                    .map(|(t, n, _)| (t.clone(), n.clone()))
                    .collect();
                for (tenant, name) in start {
                    let Some((registry, table)) = scopes.get(&tenant) else {
                        continue;
                    };
                    if let (Some(route), Some(state)) =
                        (table.get(&name).cloned(), states.get_mut(&tenant))
                    {
                        state.in_flight.insert(name);
                        running.push(Box::pin(self.check_owned(tenant, registry.clone(), route)));
                    }
                }
            }
            let generation = scopes.get(&None).map_or(0, |(_, t)| t.generation());
            drop(scopes);
            let next = states
                .values()
                .flat_map(|state| {
                    state
                        .schedule
                        .iter()
                        .filter(|(n, _)| !state.in_flight.contains(*n))
                        .map(|(_, s)| s.due)
                })
                .min();
            let wait = next.map_or(self.config.resync_period, |d| {
                d.saturating_duration_since(self.timer.now())
            });
            let mut sleep = self.timer.sleep(wait);
            let mut changed = self.registry.changed(generation);
            let mut tenants_changed = self
                .tenants
                .as_ref()
                .zip(tenants_seen)
                .map(|(t, seen)| t.changed(seen));
            let event = std::future::poll_fn(|cx| {
                if !running.is_empty() {
                    if let Poll::Ready(Some(done)) = running.poll_next_unpin(cx) {
                        return Poll::Ready(Some(done));
                    }
                }
                let tenants = tenants_changed
                    .as_mut()
                    .is_some_and(|c| Pin::new(c).poll(cx).is_ready());
                if sleep.as_mut().poll(cx).is_ready()
                    || Pin::new(&mut changed).poll(cx).is_ready()
                    || tenants
                {
                    return Poll::Ready(None);
                }
                Poll::Pending
            })
            .await;
            if let Some(Checked {
                tenant,
                registry,
                route,
                result,
            }) = event
            {
                let done = self.timer.now();
                let name = route.apiservice.name();
                let Some(state) = states.get_mut(&tenant) else {
                    continue;
                };
                state.in_flight.remove(name);
                let soft_failures = state.schedule.get(name).map_or(0, |s| s.soft_failures);
                let outcome = self.judge(&registry, name, &result, soft_failures);
                self.record(tenant_name(&tenant), &registry, name, &outcome, &result);
                if let Some(s) = state.schedule.get_mut(name) {
                    match &result {
                        Ok(()) => {
                            s.failures = 0;
                            s.soft_failures = 0;
                            s.passive = false;
                            s.due = done + self.config.resync_period;
                        }
                        Err(cause) if cause.is_soft() => {
                            s.soft_failures = s.soft_failures.saturating_add(1);
                            let delay = self
                                .config
                                .degraded_recheck
                                .saturating_mul(1u32 << (s.soft_failures - 1).min(20));
                            s.due = done + delay.min(self.config.backoff_max);
                        }
                        Err(_) => {
                            s.soft_failures = 0;
                            let base = if s.passive {
                                self.config.passive_recheck
                            } else {
                                self.config.backoff_base
                            };
                            let delay = base.saturating_mul(1u32 << s.failures.min(20));
                            s.failures = s.failures.saturating_add(1);
                            s.due = done + delay.min(self.config.backoff_max);
                        }
                    }
                }
            }
        }
    }

    /// Follows one scope's table: new APIServices and changed services are due now; the
    /// gauges of APIServices that are gone are forgotten, local ones included (upstream's
    /// local controller removes theirs too); those found unreachable by requests are
    /// already unavailable and re-checked soon.
    fn follow(
        &self,
        tenant: &str,
        registry: &Registry,
        table: &RoutingTable,
        state: &mut ScopeState,
        now: Instant,
    ) {
        state.gauged.retain(|name| {
            let keep = table.get(name).is_some();
            if !keep {
                self.metrics.forget_in(tenant, name);
            }
            keep
        });
        state
            .schedule
            .retain(|name, _| table.get(name).is_some_and(|r| !r.apiservice.is_local()));
        for route in table.routes_unordered() {
            let name = route.apiservice.name();
            if !state.gauged.contains(name) {
                state.gauged.insert(name.to_owned());
            }
            let Some(service) = &route.apiservice.spec.service else {
                self.metrics.set_unavailable_in(tenant, name, false);
                continue;
            };
            let fresh = || Schedule {
                due: now,
                failures: 0,
                service: service.clone(),
                passive: false,
                soft_failures: 0,
            };
            let entry = state.schedule.entry(name.to_owned()).or_insert_with(fresh);
            if entry.service != *service {
                *entry = fresh();
            }
        }
        for (name, cause) in registry.take_unreachable() {
            self.metrics.set_unavailable_in(tenant, &name, true);
            self.metrics
                .unavailable_transition_in(tenant, &name, "FailedDiscoveryCheck");
            self.metrics
                .unavailable_cause_in(tenant, &name, "FailedDiscoveryCheck", &cause);
            if let Some(s) = state.schedule.get_mut(&name) {
                s.failures = 0;
                s.soft_failures = 0;
                s.passive = true;
                s.due = now + self.config.passive_recheck;
            }
        }
    }
}

#[cfg(test)]
mod tests;
