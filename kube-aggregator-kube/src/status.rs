//! [`StatusWriter`]: the `Available` conditions of a registry written back to the
//! cluster's `apiservices/status`, by the leader only.
//!
//! Upstream's availability controller (kube-aggregator
//! `pkg/controllers/status/remote/remote_available_controller.go`, `updateAPIServiceStatus`)
//! writes from every kube-apiserver, so replicas that disagree overwrite each other
//! (kubernetes/kubernetes#111890). Here only the replica holding the Lease writes; the
//! others keep their own conditions for their own gate and write nothing.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::Utc;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{
    APIService, APIServiceCondition, APIServiceStatus,
};
use kube::api::PostParams;
use kube::{Api, Client};
use kube_aggregator::apiservice::ApiService;
use kube_aggregator::registry::{Registry, StatusSink};
use tokio::sync::{Notify, watch};

use crate::index::AbortOnDrop;

/// How many times one write reads the object anew after a `409 Conflict`.
const CONFLICT_RETRIES: usize = 3;

/// First wait after a failed write; doubled per failure up to [`StatusWriter::resync`].
const BACKOFF_BASE: Duration = Duration::from_millis(500);

/// What the sink hands the writer: the newest wanted status of each APIService.
#[derive(Default)]
struct Queue {
    pending: Mutex<BTreeMap<String, ApiService>>,
    ready: Notify,
    writes: AtomicU64,
}

impl Queue {
    fn push(&self, apiservice: ApiService) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.insert(apiservice.metadata.name.clone(), apiservice);
        drop(pending);
        self.ready.notify_one();
    }

    /// Queues `apiservice` unless a newer status of it is queued already.
    fn retry(&self, apiservice: ApiService) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending
            .entry(apiservice.metadata.name.clone())
            .or_insert(apiservice);
    }

    fn take(&self) -> BTreeMap<String, ApiService> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The sink the writer adds to the registry.
struct QueueSink(Arc<Queue>);

impl StatusSink for QueueSink {
    fn status_changed(&self, apiservice: &ApiService) {
        self.0.push(apiservice.clone());
    }
}

/// Writes the registry's `Available` conditions to the `status` subresource of the
/// cluster's APIServices while `leading` is true:
///
/// - when it starts leading, every APIService of the registry as this replica sees it
///   (a new leader writes what it sees), then each change the registry reports, and all
///   of them again every resync period (upstream's 30 s);
/// - a write reads the stored APIService, and writes only when its `Available` condition
///   differs in status, reason or message (`lastTransitionTime` kept when the status
///   stays, now when it flips, as upstream's `SetAPIServiceCondition`), with the read
///   `resourceVersion` (optimistic concurrency: on `409 Conflict` it reads again, up to
///   three times); an APIService no longer in the cluster is skipped;
/// - a failed write is retried after a backoff (0.5 s doubling up to the resync period),
///   the newest wanted status first.
///
/// Followers write nothing. Dropping the writer stops it.
pub struct StatusWriter {
    queue: Arc<Queue>,
    task: Arc<AbortOnDrop>,
}

impl std::fmt::Debug for StatusWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusWriter")
            .field("writes", &self.writes())
            .finish_non_exhaustive()
    }
}

impl StatusWriter {
    /// Upstream's resync period of the availability controller.
    pub const DEFAULT_RESYNC: Duration = Duration::from_secs(30);

    /// Starts writing `registry`'s conditions through `client` whenever `leading` is true
    /// (a [`Leadership::leading`](crate::Leadership::leading); a channel whose sender is
    /// dropped keeps its last value, so `watch::channel(true).1` always writes), on a
    /// task of the current tokio runtime.
    pub fn spawn(
        client: Client,
        registry: &Registry,
        leading: watch::Receiver<bool>,
    ) -> StatusWriter {
        StatusWriter::with_resync(client, registry, leading, StatusWriter::DEFAULT_RESYNC)
    }

    /// [`StatusWriter::spawn`] with another resync period.
    pub fn with_resync(
        client: Client,
        registry: &Registry,
        leading: watch::Receiver<bool>,
        resync: Duration,
    ) -> StatusWriter {
        let queue = Arc::new(Queue::default());
        registry.add_status_sink(QueueSink(queue.clone()));
        let task = tokio::spawn(run(
            Api::all(client),
            registry.clone(),
            queue.clone(),
            leading,
            resync,
        ));
        StatusWriter {
            queue,
            task: Arc::new(AbortOnDrop(task)),
        }
    }

    /// How many status updates this writer has made.
    pub fn writes(&self) -> u64 {
        self.queue.writes.load(Ordering::Relaxed)
    }

    /// Whether the writer still runs (it ends only when its `leading` channel's sender
    /// is gone while it says false).
    pub fn is_running(&self) -> bool {
        !self.task.0.is_finished()
    }
}

async fn run(
    api: Api<APIService>,
    registry: Registry,
    queue: Arc<Queue>,
    mut leading: watch::Receiver<bool>,
    resync: Duration,
) {
    let queue_all = |queue: &Queue| {
        for route in registry.snapshot().routes() {
            queue.retry(route.apiservice.clone());
        }
    };
    // A channel whose sender is gone keeps its last value for good.
    let mut closed = false;
    loop {
        if !*leading.borrow() && (closed || leading.wait_for(|l| *l).await.is_err()) {
            return;
        }
        queue_all(&queue);
        let mut backoff = BACKOFF_BASE;
        while *leading.borrow() {
            let mut failed = false;
            for (name, wanted) in queue.take() {
                if !*leading.borrow() {
                    queue.retry(wanted);
                    continue;
                }
                match write(&api, &name, &wanted).await {
                    Ok(true) => {
                        queue.writes.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(apiservice = %name, error = %e, "writing the APIService's status failed; it is retried");
                        queue.retry(wanted);
                        failed = true;
                    }
                }
            }
            let wait = if failed {
                let wait = backoff;
                backoff = (backoff * 2).min(resync);
                wait
            } else {
                backoff = BACKOFF_BASE;
                resync
            };
            tokio::select! {
                () = queue.ready.notified(), if !failed => {}
                changed = leading.changed(), if !closed => closed = changed.is_err(),
                () = tokio::time::sleep(wait) => {
                    if !failed {
                        queue_all(&queue);
                    }
                }
            }
        }
    }
}

/// Writes `wanted`'s `Available` condition to the stored APIService `name` when it
/// differs; whether it wrote.
async fn write(
    api: &Api<APIService>,
    name: &str,
    wanted: &ApiService,
) -> Result<bool, kube::Error> {
    let Some(condition) = wanted.available_condition() else {
        return Ok(false);
    };
    let mut conflicts = 0;
    loop {
        let Some(stored) = api.get_opt(name).await? else {
            return Ok(false);
        };
        let Some(next) = with_available(stored, condition) else {
            return Ok(false);
        };
        let body = serde_json::to_vec(&next).map_err(kube::Error::SerdeError)?;
        match api.replace_status(name, &PostParams::default(), body).await {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 && conflicts < CONFLICT_RETRIES => {
                conflicts += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// `stored` with its `Available` condition set to `wanted`'s status, reason and message,
/// or `None` when it has them already.
fn with_available(
    mut stored: APIService,
    wanted: &kube_aggregator::apiservice::ApiServiceCondition,
) -> Option<APIService> {
    let status = stored.status.get_or_insert_with(APIServiceStatus::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let existing = conditions.iter().position(|c| c.type_ == wanted.type_);
    let reason = Some(wanted.reason.clone()).filter(|r| !r.is_empty());
    let message = Some(wanted.message.clone()).filter(|m| !m.is_empty());
    let last_transition_time = match existing.map(|i| &conditions[i]) {
        Some(c) if c.status == wanted.status && c.reason == reason && c.message == message => {
            return None;
        }
        Some(c) if c.status == wanted.status => c.last_transition_time.clone(),
        _ => Some(Time(Utc::now())),
    };
    let condition = APIServiceCondition {
        type_: wanted.type_.clone(),
        status: wanted.status.clone(),
        reason,
        message,
        last_transition_time,
    };
    match existing {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
    Some(stored)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(
        status: &str,
        reason: &str,
        message: &str,
    ) -> kube_aggregator::apiservice::ApiServiceCondition {
        serde_json::from_value(serde_json::json!({
            "type": "Available",
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": "2026-12-07T00:00:00Z",
        }))
        .unwrap()
    }

    fn stored(conditions: serde_json::Value) -> APIService {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "v1beta1.metrics.k8s.io", "resourceVersion": "7"},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    #[test]
    fn the_same_condition_is_not_written() {
        let stored = stored(serde_json::json!([{
            "type": "Available", "status": "True", "reason": "Passed",
            "message": "all checks passed", "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]));
        assert!(with_available(stored, &wanted("True", "Passed", "all checks passed")).is_none());
    }

    #[test]
    fn a_new_message_keeps_the_transition_time_and_a_flip_sets_it() {
        let original = stored(serde_json::json!([{
            "type": "Available", "status": "False", "reason": "FailedDiscoveryCheck",
            "message": "old", "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]));
        let next = with_available(
            original.clone(),
            &wanted("False", "FailedDiscoveryCheck", "new"),
        )
        .unwrap();
        let condition = &next.status.unwrap().conditions.unwrap()[0];
        assert_eq!(condition.message.as_deref(), Some("new"));
        assert_eq!(
            condition
                .last_transition_time
                .as_ref()
                .unwrap()
                .0
                .to_rfc3339(),
            "2026-01-01T00:00:00+00:00"
        );
        assert_eq!(next.metadata.resource_version.as_deref(), Some("7"));

        let before = Utc::now();
        let next =
            with_available(original, &wanted("True", "Passed", "all checks passed")).unwrap();
        let conditions = next.status.unwrap().conditions.unwrap();
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].reason.as_deref(), Some("Passed"));
        assert!(conditions[0].last_transition_time.as_ref().unwrap().0 >= before);
    }

    #[test]
    fn other_conditions_are_kept() {
        let original = stored(serde_json::json!([{
            "type": "Custom", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]));
        let next = with_available(
            original,
            &wanted("True", "Local", "Local APIServices are always available"),
        )
        .unwrap();
        let conditions = next.status.unwrap().conditions.unwrap();
        let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Custom", "Available"]);
    }
}
