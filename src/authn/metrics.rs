//! Authentication metrics, as k8s.io/apiserver `pkg/endpoints/filters/metrics.go` keeps
//! them: `authentication_attempts{result}`, `authentication_duration_seconds{result}` and
//! `authenticated_user_requests{username}`.

use std::sync::Mutex;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use super::AuthenticationResult;
use crate::outcome_metrics::{CounterName, Outcomes};

/// The authentication metrics an [`AuthenticationLayer`](super::AuthenticationLayer)
/// records into (see [`AuthenticationLayer::metrics`](super::AuthenticationLayer::metrics)).
/// `result` is `success`, `failure` (no authenticator recognised the request) or `error`;
/// `username` is upstream's compressed name (`admin`, `client`, `kube_proxy`, `kubelet`,
/// `system:serviceaccount:kube-system:default`, `email_id` for a name with `@`, else
/// `other`), so no user adds a series. Upstream names these counters without `_total`;
/// they are written so, untyped.
#[derive(Debug, Default)]
pub struct AuthenticationMetrics {
    outcomes: Outcomes,
    users: Mutex<Vec<(&'static str, u64)>>,
}

impl AuthenticationMetrics {
    /// One authentication that ended with `result` after `seconds`.
    pub(crate) fn record(&self, result: &AuthenticationResult, seconds: f64) {
        let label = match result {
            Ok(Some(user)) => {
                let name = compress_username(&user.name);
                let mut users = self.users.lock().unwrap_or_else(|e| e.into_inner());
                match users.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, count)) => *count += 1,
                    None => users.push((name, 1)),
                }
                "success"
            }
            Ok(None) => "failure",
            Err(_) => "error",
        };
        self.outcomes.record(label, seconds);
    }
}

/// upstream's `compressUsername`.
fn compress_username(name: &str) -> &'static str {
    match name {
        "admin" => "admin",
        "client" => "client",
        "kube_proxy" => "kube_proxy",
        "kubelet" => "kubelet",
        "system:serviceaccount:kube-system:default" => "system:serviceaccount:kube-system:default",
        n if n.contains('@') => "email_id",
        _ => "other",
    }
}

impl Collector for AuthenticationMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let users = self.users.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if !users.is_empty() {
            let mut family = encoder.encode_descriptor(
                "authenticated_user_requests",
                "Counter of authenticated requests broken out by username.",
                None,
                MetricType::Unknown,
            )?;
            for (name, count) in users {
                ConstGauge::new(count as i64)
                    .encode(family.encode_family(&[("username", name)])?)?;
            }
        }
        self.outcomes.encode(
            &mut encoder,
            (
                CounterName::Exact("authentication_attempts"),
                "Counter of authenticated attempts.",
            ),
            (
                "authentication_duration_seconds",
                "Authentication duration in seconds broken out by result.",
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authn::{AuthenticationError, UserInfo};

    #[test]
    fn attempts_users_and_durations_as_upstream_names_them() {
        let m = AuthenticationMetrics::default();
        m.record(
            &Ok(Some(UserInfo::new("alice@example.com", ["dev"]))),
            0.0005,
        );
        m.record(&Ok(Some(UserInfo::new("kubelet", ["nodes"]))), 0.003);
        m.record(&Ok(Some(UserInfo::new("bob", ["dev"]))), 0.003);
        m.record(&Ok(None), 0.001);
        m.record(&Err(AuthenticationError::Other("down".into())), 0.5);
        let lines = [
            "authenticated_user_requests{username=\"email_id\"} 1",
            "authenticated_user_requests{username=\"kubelet\"} 1",
            "authenticated_user_requests{username=\"other\"} 1",
            "authentication_attempts{result=\"success\"} 3",
            "authentication_attempts{result=\"failure\"} 1",
            "authentication_attempts{result=\"error\"} 1",
            "authentication_duration_seconds_count{result=\"success\"} 3",
            "authentication_duration_seconds_bucket{le=\"0.001\",result=\"success\"} 1",
            "authentication_duration_seconds_bucket{le=\"16.384\",result=\"error\"} 1",
        ];
        let text = crate::outcome_metrics::assert_renders(m, &lines);
        assert!(!text.contains("bob"), "{text}");
    }
}
