//! The webhook backend: audit events `POST`ed as `audit.k8s.io/v1` `EventList`s to the
//! server of a kubeconfig, in batches or one by one while the request waits, as
//! kube-apiserver's `--audit-webhook-*` flags configure it (k8s.io/apiserver
//! `plugin/pkg/audit/webhook/webhook.go`, `plugin/pkg/audit/buffered/buffered.go`,
//! `pkg/server/options/audit.go`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::{AuditMetrics, AuditSink, Event, Processed};
use crate::rt::{Executor, Timer};
use crate::webhook::{Backoff, WebhookClient};

/// `--audit-webhook-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WebhookMode {
    /// `batch` (the default): events are buffered and sent in batches by a background
    /// task; requests never wait, and events that find the buffer full are dropped (and
    /// counted).
    #[default]
    Batch,
    /// `blocking`: each event is sent as it happens and the request waits for the
    /// answer; a failed send is counted and logged, and the request goes on.
    Blocking,
    /// `blocking-strict`: as `blocking`, but a `RequestReceived` event that could not be
    /// sent fails the request (500).
    BlockingStrict,
}

impl std::str::FromStr for WebhookMode {
    type Err = String;

    /// `batch`, `blocking` or `blocking-strict`; anything else is refused with upstream's
    /// message.
    fn from_str(s: &str) -> Result<WebhookMode, String> {
        match s {
            "batch" => Ok(WebhookMode::Batch),
            "blocking" => Ok(WebhookMode::Blocking),
            "blocking-strict" => Ok(WebhookMode::BlockingStrict),
            _ => Err(format!(
                "invalid audit webhook mode {s}, allowed modes are \"batch,blocking,blocking-strict\""
            )),
        }
    }
}

/// The `--audit-webhook-*` settings; the defaults are kube-apiserver's.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookConfig {
    /// `--audit-webhook-mode`.
    pub mode: WebhookMode,
    /// `--audit-webhook-batch-buffer-size` (10000): events held before new ones are
    /// dropped.
    pub buffer_size: usize,
    /// `--audit-webhook-batch-max-size` (400): events per batch.
    pub max_batch_size: usize,
    /// `--audit-webhook-batch-max-wait` (30 s): how long a batch waits to fill.
    pub max_batch_wait: Duration,
    /// `--audit-webhook-batch-throttle-qps` and `-burst` (10 and 15): batches sent per
    /// second; `None` (`--audit-webhook-batch-throttle-enable=false`) for no limit.
    pub throttle: Option<(f64, u32)>,
    /// `--audit-webhook-initial-backoff` (10 s): the wait before the first retry of a
    /// failed send; then 1.5 times longer each time, up to 5 attempts, as upstream.
    pub initial_backoff: Duration,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig {
            mode: WebhookMode::Batch,
            buffer_size: 10_000,
            max_batch_size: 400,
            max_batch_wait: Duration::from_secs(30),
            throttle: Some((10.0, 15)),
            initial_backoff: Duration::from_secs(10),
        }
    }
}

/// An [`AuditSink`] that sends events to a webhook (`--audit-webhook-config-file`).
///
/// Every failed send is retried, whatever the failure (upstream's audit webhook retries
/// any error), with the backoff of [`WebhookConfig::initial_backoff`]. What is lost in the
/// end (a send that failed every attempt, events that found the batch buffer full) is
/// counted in [`AuditMetrics`]' `apiserver_audit_error_total{plugin}` (`webhook`, or
/// `buffered` for a full buffer) and logged, at most once every 10 seconds per cause,
/// with the count since.
#[derive(Clone)]
pub struct WebhookSink {
    shared: Arc<Shared>,
}

struct Shared {
    client: WebhookClient,
    mode: WebhookMode,
    queue: Option<mpsc::Sender<Bytes>>,
    executor: Executor,
    metrics: Arc<AuditMetrics>,
    full: Mutex<Throttled>,
    failed: Arc<Mutex<Throttled>>,
}

impl std::fmt::Debug for WebhookSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSink")
            .field("url", self.shared.client.url())
            .field("mode", &self.shared.mode)
            .finish_non_exhaustive()
    }
}

impl WebhookSink {
    /// A sink posting with `client` as `config` says; in batch mode the batching task is
    /// spawned on `executor` and runs until the last clone of the sink is dropped (then
    /// it sends what is buffered).
    pub fn new(
        client: WebhookClient,
        config: &WebhookConfig,
        executor: Executor,
        timer: Timer,
        metrics: Arc<AuditMetrics>,
    ) -> WebhookSink {
        let client = client.with_backoff(Backoff {
            initial: config.initial_backoff,
            factor: 1.5,
            jitter: 0.2,
            steps: 5,
        });
        let client = client.retry_every_error();
        let failed = Arc::new(Mutex::new(Throttled::default()));
        let queue = (config.mode == WebhookMode::Batch).then(|| {
            let (tx, rx) = mpsc::channel(config.buffer_size.max(1));
            let batcher = Batcher {
                client: client.clone(),
                executor: executor.clone(),
                timer,
                max_size: config.max_batch_size.max(1),
                max_wait: config.max_batch_wait,
                throttle: config
                    .throttle
                    .map(|(qps, burst)| TokenBucket::new(qps, burst)),
                metrics: metrics.clone(),
                failed: failed.clone(),
            };
            executor.spawn(batcher.run(rx));
            tx
        });
        WebhookSink {
            shared: Arc::new(Shared {
                client,
                mode: config.mode,
                queue,
                executor,
                metrics,
                full: Mutex::new(Throttled::default()),
                failed,
            }),
        }
    }
}

impl WebhookSink {
    /// The sink of `--audit-webhook-config-file`: the kubeconfig's server, CA and client
    /// credentials, as [`WebhookSink::new`].
    ///
    /// # Errors
    ///
    /// The kubeconfig does not load, or its server or credentials are unusable (the
    /// error names the file).
    pub fn from_kubeconfig(
        path: &std::path::Path,
        config: &WebhookConfig,
        executor: Executor,
        timer: Timer,
        metrics: Arc<AuditMetrics>,
    ) -> Result<WebhookSink, crate::webhook::KubeconfigError> {
        let client = crate::webhook::Kubeconfig::load(path)?
            .client(executor.clone(), timer.clone())
            .map_err(|e| e.in_file(path))?;
        Ok(WebhookSink::new(client, config, executor, timer, metrics))
    }
}

impl AuditSink for WebhookSink {
    fn process_event(&self, event: &Event) -> Processed {
        let json = Bytes::from(event.to_json());
        let shared = &self.shared;
        match &shared.queue {
            Some(queue) => match queue.try_send(json) {
                Ok(()) => Processed::Kept,
                // Upstream's buffered backend: the event is dropped, the request goes on.
                Err(mpsc::error::TrySendError::Full(_)) => {
                    shared.metrics.error("buffered", 1);
                    lock(&shared.full).note(1, "audit buffer queue blocked; events dropped");
                    Processed::Kept
                }
                Err(mpsc::error::TrySendError::Closed(_)) => Processed::Lost,
            },
            None => {
                let (done, wait) = oneshot::channel();
                let (client, metrics, failed) = (
                    shared.client.clone(),
                    shared.metrics.clone(),
                    shared.failed.clone(),
                );
                shared.executor.spawn(async move {
                    let sent = send(&client, &[json], &metrics, &failed).await;
                    let _ = done.send(sent);
                });
                let strict = shared.mode == WebhookMode::BlockingStrict;
                Processed::Waiting(Box::pin(async move {
                    let sent = wait.await.unwrap_or(false);
                    // `blocking` goes on whatever happened (upstream ignores the error).
                    sent || !strict
                }))
            }
        }
    }
}

/// Posts `events` as one `EventList`; counts and logs a failure. Whether it was sent.
async fn send(
    client: &WebhookClient,
    events: &[Bytes],
    metrics: &AuditMetrics,
    failed: &Mutex<Throttled>,
) -> bool {
    match client.post_json(event_list(events)).await {
        Ok(_) => true,
        Err(e) => {
            metrics.error("webhook", events.len() as u64);
            lock(failed).note(
                events.len(),
                &format!("sending audit events to the webhook failed: {e}"),
            );
            false
        }
    }
}

/// `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[...]}`.
pub(crate) fn event_list(events: &[Bytes]) -> Bytes {
    let len = events.iter().map(|e| e.len() + 1).sum::<usize>();
    let mut out = Vec::with_capacity(len + 80);
    out.extend_from_slice(
        br#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":["#,
    );
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(e);
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}

/// The batching task of batch mode.
struct Batcher {
    client: WebhookClient,
    executor: Executor,
    timer: Timer,
    max_size: usize,
    max_wait: Duration,
    throttle: Option<TokenBucket>,
    metrics: Arc<AuditMetrics>,
    failed: Arc<Mutex<Throttled>>,
}

impl Batcher {
    /// Collects batches (up to `max_size` events, or what came within `max_wait` of the
    /// first) and sends each on its own task, at most at the throttle's rate, until the
    /// queue closes; then sends what is left.
    async fn run(mut self, mut queue: mpsc::Receiver<Bytes>) {
        while let Some(first) = queue.recv().await {
            let mut batch = vec![first];
            let mut deadline = self.timer.sleep(self.max_wait);
            while batch.len() < self.max_size {
                tokio::select! {
                    next = queue.recv() => match next {
                        Some(event) => batch.push(event),
                        None => break,
                    },
                    () = &mut deadline => break,
                }
            }
            if let Some(bucket) = &mut self.throttle {
                let wait = bucket.take(self.timer.now());
                if !wait.is_zero() {
                    self.timer.sleep(wait).await;
                }
            }
            let (client, metrics, failed) = (
                self.client.clone(),
                self.metrics.clone(),
                self.failed.clone(),
            );
            self.executor.spawn(async move {
                send(&client, &batch, &metrics, &failed).await;
            });
        }
    }
}

/// A token bucket (client-go's `NewTokenBucketRateLimiter`): `burst` tokens, refilled at
/// `qps` a second; each batch takes one.
#[derive(Debug)]
struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    fn new(qps: f64, burst: u32) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps: qps.max(f64::MIN_POSITIVE),
            burst,
            tokens: burst,
            last: None,
        }
    }

    /// Takes a token at `now`; how long to wait before using it.
    fn take(&mut self, now: Instant) -> Duration {
        if let Some(last) = self.last {
            let refill = now.saturating_duration_since(last).as_secs_f64() * self.qps;
            self.tokens = (self.tokens + refill).min(self.burst);
        }
        self.last = Some(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

/// A cause logged at most once every 10 seconds, with the count of events since.
#[derive(Debug, Default)]
struct Throttled {
    last: Option<Instant>,
    count: usize,
}

impl Throttled {
    fn note(&mut self, events: usize, what: &str) {
        self.count += events;
        if self
            .last
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
        {
            tracing::error!(events = self.count, "{what}");
            self.last = Some(Instant::now());
            self.count = 0;
        }
    }
}

fn lock(m: &Mutex<Throttled>) -> std::sync::MutexGuard<'_, Throttled> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
#[path = "webhook_tests.rs"]
mod tests;
