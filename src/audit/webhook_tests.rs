//! The webhook backend against webhooks in memory that answer, fail or hang: batches,
//! retries, drops counted, and requests that wait only in the blocking modes.

use std::sync::atomic::{AtomicUsize, Ordering};

use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use tower::util::BoxCloneSyncService;

use super::*;
use crate::audit::event::{RequestMetadata, ResponseStatus};
use crate::audit::{Level, Stage};
use crate::body::Body;

/// What the webhook does with each call.
#[derive(Clone, Copy, PartialEq)]
enum Behaviour {
    Answer,
    Fail,
    Hang,
}

/// A webhook in memory: the `EventList`s it received (their items' audit IDs), and how
/// many calls it got.
#[derive(Clone, Default)]
struct Received {
    lists: Arc<Mutex<Vec<Vec<String>>>>,
    calls: Arc<AtomicUsize>,
}

fn client(behaviour: Behaviour, received: &Received) -> WebhookClient {
    let received = received.clone();
    let service = tower::service_fn(move |req: Request<Body>| {
        let received = received.clone();
        async move {
            received.calls.fetch_add(1, Ordering::SeqCst);
            let body = req.into_body().collect().await?.to_bytes();
            let list: serde_json::Value = serde_json::from_slice(&body)?;
            assert_eq!(list["kind"], "EventList");
            assert_eq!(list["apiVersion"], "audit.k8s.io/v1");
            let ids = list["items"]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .map(|e| e["auditID"].as_str().unwrap_or_default().to_owned())
                        .collect()
                })
                .unwrap_or_default();
            match behaviour {
                Behaviour::Answer => {
                    received.lists.lock().unwrap().push(ids);
                    Ok(Response::new(Body::empty()))
                }
                Behaviour::Fail => {
                    let mut res = Response::new(Body::full("boom"));
                    *res.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                    Ok(res)
                }
                Behaviour::Hang => std::future::pending().await,
            }
        }
    });
    WebhookClient::new(
        BoxCloneSyncService::new(service),
        "https://audit.example:8443/events".parse().unwrap(),
        Timer::tokio(),
    )
    .with_timeout(Duration::from_secs(3600))
}

fn event(n: usize) -> Event {
    let mut e = Event::new(
        Level::Metadata,
        RequestMetadata::get_apis(format!("id-{n}")),
    );
    e.stage = Stage::ResponseComplete;
    e.response_status = Some(ResponseStatus::code(200));
    e
}

fn start(
    behaviour: Behaviour,
    config: WebhookConfig,
) -> (WebhookSink, Received, Arc<AuditMetrics>) {
    let received = Received::default();
    let metrics = Arc::new(AuditMetrics::default());
    let sink = WebhookSink::new(
        client(behaviour, &received),
        &config,
        Executor::tokio(),
        Timer::tokio(),
        metrics.clone(),
    );
    (sink, received, metrics)
}

fn fast(mode: WebhookMode) -> WebhookConfig {
    WebhookConfig {
        mode,
        max_batch_size: 2,
        max_batch_wait: Duration::from_millis(50),
        throttle: None,
        initial_backoff: Duration::from_millis(5),
        ..WebhookConfig::default()
    }
}

async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !check() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn batches_are_event_lists_of_at_most_the_batch_size() {
    let (sink, received, _) = start(Behaviour::Answer, fast(WebhookMode::Batch));
    for n in 0..5 {
        assert!(matches!(sink.process_event(&event(n)), Processed::Kept));
    }
    eventually("five events sent", || {
        received
            .lists
            .lock()
            .unwrap()
            .iter()
            .map(Vec::len)
            .sum::<usize>()
            == 5
    })
    .await;
    let mut lists = received.lists.lock().unwrap().clone();
    lists.sort();
    assert_eq!(
        lists,
        [vec!["id-0", "id-1"], vec!["id-2", "id-3"], vec!["id-4"]]
    );
}

#[tokio::test]
async fn a_failing_webhook_is_retried_five_times_then_counted() {
    let (sink, received, metrics) = start(Behaviour::Fail, fast(WebhookMode::Batch));
    assert!(matches!(sink.process_event(&event(0)), Processed::Kept));
    eventually("the loss counted", || {
        metrics
            .render()
            .contains("apiserver_audit_error_total{plugin=\"webhook\"} 1")
    })
    .await;
    assert_eq!(received.calls.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn a_hanging_webhook_never_delays_a_request_in_batch_mode() {
    let config = WebhookConfig {
        buffer_size: 4,
        max_batch_size: 1,
        // One batch a second at most: the buffer fills behind the hanging sends.
        throttle: Some((1.0, 1)),
        ..fast(WebhookMode::Batch)
    };
    let (sink, received, metrics) = start(Behaviour::Hang, config);
    let started = Instant::now();
    for n in 0..50 {
        assert!(matches!(sink.process_event(&event(n)), Processed::Kept));
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "50 events took {:?}",
        started.elapsed()
    );
    let text = metrics.render();
    let dropped: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("apiserver_audit_error_total{plugin=\"buffered\"} "))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(dropped >= 40, "drops counted: {text}");
    assert!(received.lists.lock().unwrap().is_empty());
}

#[tokio::test]
async fn blocking_modes_make_the_request_wait_for_the_webhook() {
    // A hanging webhook holds the request.
    let (sink, _, _) = start(Behaviour::Hang, fast(WebhookMode::Blocking));
    let Processed::Waiting(wait) = sink.process_event(&event(0)) else {
        panic!("blocking mode must make the request wait");
    };
    assert!(
        tokio::time::timeout(Duration::from_millis(100), wait)
            .await
            .is_err(),
        "the request went on while the webhook hung"
    );

    // An answer lets it go on, with the event in its own list.
    let (sink, received, _) = start(Behaviour::Answer, fast(WebhookMode::Blocking));
    let Processed::Waiting(wait) = sink.process_event(&event(1)) else {
        panic!("blocking mode must make the request wait");
    };
    assert!(wait.await);
    assert_eq!(received.lists.lock().unwrap().clone(), [vec!["id-1"]]);

    // A failure after every retry: blocking goes on, blocking-strict does not.
    for (mode, goes_on) in [
        (WebhookMode::Blocking, true),
        (WebhookMode::BlockingStrict, false),
    ] {
        let (sink, received, metrics) = start(Behaviour::Fail, fast(mode));
        let Processed::Waiting(wait) = sink.process_event(&event(2)) else {
            panic!("{mode:?} must make the request wait");
        };
        assert_eq!(wait.await, goes_on, "{mode:?}");
        assert_eq!(received.calls.load(Ordering::SeqCst), 5);
        assert!(
            metrics
                .render()
                .contains("apiserver_audit_error_total{plugin=\"webhook\"} 1")
        );
    }
}

#[test]
fn modes_and_the_throttle_follow_upstream() {
    assert_eq!(
        "async".parse::<WebhookMode>().unwrap_err(),
        "invalid audit webhook mode async, allowed modes are \"batch,blocking,blocking-strict\""
    );
    assert_eq!(
        "blocking-strict".parse::<WebhookMode>(),
        Ok(WebhookMode::BlockingStrict)
    );
    let mut bucket = TokenBucket::new(10.0, 2);
    let t0 = Instant::now();
    assert_eq!(bucket.take(t0), Duration::ZERO);
    assert_eq!(bucket.take(t0), Duration::ZERO);
    let wait = bucket.take(t0);
    assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
    // A second later the bucket is full again.
    assert_eq!(bucket.take(t0 + Duration::from_secs(1)), Duration::ZERO);
    assert_eq!(
        event_list(&[Bytes::from_static(b"{}"), Bytes::from_static(b"{\"a\":1}")]),
        Bytes::from_static(
            br#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[{},{"a":1}]}"#
        )
    );
}
