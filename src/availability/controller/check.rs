//! How one availability check runs (resolve the Service, then the parallel probes) and
//! what its outcome writes: the condition and the metrics.

use std::sync::Arc;

use futures_util::future::join_all;

use super::{AvailabilityController, CheckResult, Checked};
use crate::apiservice::ConditionStatus;
use crate::availability::probe::Probe;
use crate::availability::{ServiceResolver, UnavailableCause};
use crate::registry::{Registry, Route};
use crate::tenancy::Tenant;
use crate::transport::CertificateSummary;

/// The outcome of one check: the condition to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Outcome {
    status: ConditionStatus,
    reason: String,
    message: String,
}

impl AvailabilityController {
    /// The condition a check's `result` writes for `name`: `True` when it passed; still
    /// `True`, degraded, for a soft failure of an available APIService that has not
    /// repeated [`AvailabilityConfig::soft_failure_threshold`] times (`soft_failures` are
    /// those before this one); otherwise the cause's.
    pub(super) fn judge(
        &self,
        registry: &Registry,
        name: &str,
        result: &CheckResult,
        soft_failures: u32,
    ) -> Outcome {
        let cause = match result {
            Ok(()) => {
                return Outcome {
                    status: ConditionStatus::True,
                    reason: "Passed".into(),
                    message: "all checks passed".into(),
                };
            }
            Err(cause) => cause,
        };
        let threshold = self.config.soft_failure_threshold.max(1);
        let failed = soft_failures.saturating_add(1);
        let available = registry
            .snapshot()
            .get(name)
            .is_some_and(|r| r.is_available());
        if cause.is_soft() && available && failed < threshold {
            return Outcome {
                status: ConditionStatus::True,
                reason: "Passed".into(),
                message: format!(
                    "degraded: {failed} of {threshold} checks in a row failed; requests still flow, and the APIService turns unavailable if {threshold} fail: {cause}"
                ),
            };
        }
        let mut message = cause.to_string();
        if cause.is_soft() && failed > 1 {
            message = format!("{message} ({failed} failed checks in a row)");
        }
        Outcome {
            status: if cause.is_unknown() {
                ConditionStatus::Unknown
            } else {
                ConditionStatus::False
            },
            reason: cause.reason().into(),
            message,
        }
    }

    /// [`Self::check`] of a route it owns, returning the route with the outcome.
    pub(super) async fn check_owned(
        &self,
        tenant: Option<Tenant>,
        registry: Registry,
        route: Arc<Route>,
    ) -> Checked {
        let client_certificate = registry.client_certificate();
        let result = self.check(&route, client_certificate).await;
        Checked {
            tenant,
            registry,
            route,
            result,
        }
    }

    /// Writes `outcome` as `name`'s condition in `registry` and updates the metrics (with
    /// `tenant`'s `cluster` label): the gauge on every check, the failed-checks counter on
    /// every failure, the transition counters only when a written change turned an
    /// available APIService unavailable (with the new reason and the cause), as upstream
    /// counts them.
    pub(super) fn record(
        &self,
        tenant: &str,
        registry: &Registry,
        name: &str,
        outcome: &Outcome,
        result: &CheckResult,
    ) {
        if registry.snapshot().get(name).is_none() {
            // Deleted while its check ran: its gauge went with it (`follow`) and must not
            // come back, as upstream forgets a deleted APIService's metrics.
            self.metrics.forget_in(tenant, name);
            return;
        }
        if let Err(cause) = result {
            self.metrics.failed_check_in(tenant, name, cause.name());
        }
        let available = outcome.status == ConditionStatus::True;
        self.metrics.set_unavailable_in(tenant, name, !available);
        if let Some(was_available) = registry.set_available_condition(
            name,
            outcome.status,
            &outcome.reason,
            &outcome.message,
        ) {
            // In the log only when a check failed (a passing one has no cause).
            let cause = result.as_ref().err().map(UnavailableCause::name);
            if was_available && !available {
                self.metrics
                    .unavailable_transition_in(tenant, name, &outcome.reason);
                self.metrics.unavailable_cause_in(
                    tenant,
                    name,
                    &outcome.reason,
                    cause.unwrap_or_default(),
                );
            }
            if was_available != available && tenant.is_empty() {
                tracing::info!(apiservice = name, available, reason = %outcome.reason, cause, condition_message = %outcome.message, "availability changed");
            } else if was_available != available {
                tracing::info!(cluster = tenant, apiservice = name, available, reason = %outcome.reason, cause, condition_message = %outcome.message, "availability changed");
            } else if available && result.is_err() {
                tracing::warn!(cluster = tenant, apiservice = name, cause, condition_message = %outcome.message, "availability check failed; degraded");
            }
        }
    }

    /// One check of `route`: the steps of [`AvailabilityController`]'s docs, in upstream's
    /// `sync` order; `client` is our proxy client certificate, for the messages.
    pub(super) async fn check(
        &self,
        route: &Route,
        client: Option<CertificateSummary>,
    ) -> CheckResult {
        let Some(backend) = route.remote() else {
            return Ok(());
        };
        let service = &backend.service;
        let gv_path = if route.apiservice.spec.group.is_empty() {
            format!("/api/{}", route.apiservice.spec.version)
        } else {
            format!(
                "/apis/{}/{}",
                route.apiservice.spec.group, route.apiservice.spec.version
            )
        };
        if let Err(e) = self.resolver.resolve(service).await {
            return Err(UnavailableCause::of_resolve_error(e, service, &gv_path));
        }
        let client_svc = match &backend.client {
            Ok(c) => c.clone(),
            Err(e) => {
                return Err(UnavailableCause::BackendClient {
                    message: e.to_string(),
                });
            }
        };
        let probe = Probe {
            resolver: &*self.resolver,
            timer: &self.timer,
            budget: self.config.probe_timeout,
            client: client.as_ref(),
        };
        let attempts = (0..self.config.probe_attempts.max(1))
            .map(|_| probe.run(service, &client_svc, &gv_path));
        let results = join_all(attempts).await;
        let mut last_error = None;
        for r in results {
            match r {
                Ok(()) => return Ok(()),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or(UnavailableCause::Unreachable {
            url: gv_path,
            detail: "no probe attempt ran".into(),
        }))
    }
}
