//! Authorization metrics, as k8s.io/apiserver `pkg/endpoints/filters/metrics.go` keeps
//! them: `authorization_attempts_total{result}` and
//! `authorization_duration_seconds{result}`.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::{Authorization, AuthorizationError, Decision};
use crate::outcome_metrics::{CounterName, Outcomes};

/// The authorization metrics an [`AuthorizationLayer`](super::AuthorizationLayer)
/// records into (see [`AuthorizationLayer::metrics`](super::AuthorizationLayer::metrics)).
/// `result` is `allowed`, `denied`, `no-opinion` or `error`, as upstream's
/// `recordAuthorizationMetrics` names them.
#[derive(Debug, Default)]
pub struct AuthorizationMetrics {
    outcomes: Outcomes,
}

impl AuthorizationMetrics {
    /// One decision, reached after `seconds`.
    pub(crate) fn record(
        &self,
        decision: &Result<Authorization, AuthorizationError>,
        seconds: f64,
    ) {
        let label = match decision {
            Ok(a) if a.decision == Decision::Allow => "allowed",
            Err(_) => "error",
            Ok(a) if a.decision == Decision::Deny => "denied",
            Ok(_) => "no-opinion",
        };
        self.outcomes.record(label, seconds);
    }
}

impl Collector for AuthorizationMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        self.outcomes.encode(
            &mut encoder,
            (
                CounterName::Total("authorization_attempts"),
                "Counter of authorization attempts broken down by result. It can be either 'allowed', 'denied', 'no-opinion' or 'error'.",
            ),
            (
                "authorization_duration_seconds",
                "Authorization duration in seconds broken out by result.",
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_and_durations_by_result() {
        let m = AuthorizationMetrics::default();
        m.record(&Ok(Authorization::new(Decision::Allow)), 0.002);
        m.record(&Ok(Authorization::new(Decision::Allow)), 0.002);
        m.record(&Ok(Authorization::new(Decision::Deny)), 0.002);
        m.record(&Ok(Authorization::new(Decision::NoOpinion)), 0.002);
        m.record(&Err(AuthorizationError::new("the webhook is down")), 0.002);
        let lines = [
            "# TYPE authorization_attempts counter",
            "authorization_attempts_total{result=\"allowed\"} 2",
            "authorization_attempts_total{result=\"denied\"} 1",
            "authorization_attempts_total{result=\"no-opinion\"} 1",
            "authorization_attempts_total{result=\"error\"} 1",
            "authorization_duration_seconds_bucket{le=\"0.002\",result=\"allowed\"} 2",
        ];
        crate::outcome_metrics::assert_renders(m, &lines);
    }
}
