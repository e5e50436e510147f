//! Watches, as apiserver's watch handler and the watch cache serve them
//! (`pkg/endpoints/handlers/watch.go`, `pkg/storage/cacher/cache_watcher.go`):
//!
//! - no `resourceVersion` or `0`: an `ADDED` event for every current object, then changes;
//!   `N`: every change after `N`; older than the history: a 200 stream whose only event is
//!   `ERROR` with a 410 `Expired` Status (`too old resource version: N (oldest)`);
//! - selectors filter events, and an object that stops (starts) matching is sent as
//!   `DELETED` (`ADDED`), as the cache watcher translates them;
//! - `allowWatchBookmarks=true`: a `BOOKMARK` carrying only `metadata.resourceVersion`
//!   every bookmark interval (upstream: about a minute) and, with `sendInitialEvents=true`,
//!   one right after the initial events annotated `k8s.io/initial-events-end: "true"`;
//! - `timeoutSeconds` ends the stream; without it, a random 30 to 60 minutes
//!   (`--min-request-timeout` 1800 s, times one to two);
//! - each event is `{"type":...,"object":...}` and a newline; with a `Table` Accept each
//!   object is a one-row Table, column definitions only in the first event.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use kube_aggregator::Body;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::kinds::{GROUP_VERSION, Kind};
use super::output::{self, Form};
use super::rest::{Call, ListOptions, selected};
use super::store::{Event, EventType, ReadError, Watching};
use crate::support::api_status::{expired_status, too_large_resource_version};
use crate::support::extension_server::channel_body;

/// The annotation of the bookmark that ends the initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Starts a watch; the response streams until the timeout, the client leaving, or the
/// server falling too far behind (the client then re-lists, as after a watch cache
/// overflow).
pub fn watch(call: &Call<'_>, opts: ListOptions, bookmark_every: Duration) -> Response<Body> {
    let from = opts.resource_version.filter(|rv| *rv != 0);
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let mut res = Response::new(channel_body(rx));
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let started = match call.store.watch(call.kind.plural, from) {
        Ok(started) => started,
        Err(ReadError::TooNew(asked, current)) => {
            return too_large_resource_version(asked, current);
        }
        Err(ReadError::TooOld(asked, floor)) => {
            let status = expired_status(format!("too old resource version: {asked} ({floor})"));
            let line = event_line("ERROR", serde_json::to_value(&status).unwrap_or_default());
            let _ = tx.try_send(line);
            return res;
        }
    };
    let watcher = Watcher {
        kind: call.kind,
        namespace: call.namespace.to_owned(),
        form: call.form,
        include_object: query_include_object(call),
        opts,
        headers_sent: false,
    };
    tokio::spawn(watcher.run(started, tx, bookmark_every));
    *res.status_mut() = StatusCode::OK;
    res
}

fn query_include_object(call: &Call<'_>) -> String {
    crate::support::extension_server::query_param(call.query, "includeObject").unwrap_or_default()
}

fn event_line(kind: &str, object: Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

struct Watcher {
    kind: &'static Kind,
    namespace: String,
    form: Form,
    include_object: String,
    opts: ListOptions,
    headers_sent: bool,
}

impl Watcher {
    fn encode(&mut self, kind: &str, object: &Value) -> Bytes {
        let object = match self.form {
            Form::Table(v) => {
                let meta =
                    json!({"resourceVersion": object["metadata"]["resourceVersion"].clone()});
                let t = output::table(
                    self.kind,
                    v,
                    std::slice::from_ref(object),
                    meta,
                    !self.headers_sent,
                    &self.include_object,
                );
                self.headers_sent = true;
                t
            }
            form => output::single(self.kind, form, object, &self.include_object),
        };
        event_line(kind, object)
    }

    fn bookmark(&mut self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
        if initial_end {
            meta["annotations"] = json!({INITIAL_EVENTS_END: "true"});
        }
        let object = json!({"kind": self.kind.kind, "apiVersion": GROUP_VERSION, "metadata": meta});
        event_line("BOOKMARK", object)
    }

    fn in_scope(&self, e: &Event) -> bool {
        e.key.resource == self.kind.plural
            && (self.namespace.is_empty() || e.key.namespace == self.namespace)
    }

    /// The event this watcher sends for `e`, if any, after the selector translation.
    fn translate<'e>(&self, e: &'e Event) -> Option<(EventType, &'e Value)> {
        if !self.in_scope(e) {
            return None;
        }
        let now = selected(self.kind, &self.opts, &e.object);
        let before = e
            .prev
            .as_ref()
            .is_some_and(|p| selected(self.kind, &self.opts, p));
        match e.kind {
            EventType::Added => now.then_some((EventType::Added, &e.object)),
            EventType::Deleted => before.then_some((EventType::Deleted, &e.object)),
            EventType::Modified => match (before, now) {
                (true, true) => Some((EventType::Modified, &e.object)),
                (false, true) => Some((EventType::Added, &e.object)),
                (true, false) => Some((EventType::Deleted, &e.object)),
                (false, false) => None,
            },
        }
    }

    async fn run(
        mut self,
        (initial, at, mut feed): Watching,
        tx: mpsc::Sender<Bytes>,
        bookmark_every: Duration,
    ) {
        let timeout = self
            .opts
            .timeout_seconds
            .map_or_else(random_timeout, Duration::from_secs);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut last_rv = at;
        for e in &initial {
            if let Some((kind, object)) = self.translate(e) {
                let line = self.encode(kind.as_str(), object);
                if tx.send(line).await.is_err() {
                    return;
                }
            }
        }
        if self.opts.bookmarks && self.opts.send_initial_events == Some(true) {
            let line = self.bookmark(last_rv, true);
            if tx.send(line).await.is_err() {
                return;
            }
        }
        let mut ticker =
            tokio::time::interval_at(tokio::time::Instant::now() + bookmark_every, bookmark_every);
        loop {
            tokio::select! {
                () = &mut deadline => return,
                () = tx.closed() => return,
                _ = ticker.tick(), if self.opts.bookmarks => {
                    let line = self.bookmark(last_rv, false);
                    if tx.send(line).await.is_err() {
                        return;
                    }
                }
                received = feed.recv() => match received {
                    Ok(e) => {
                        last_rv = e.rv;
                        if let Some((kind, object)) = self.translate(&e) {
                            let line = self.encode(kind.as_str(), object);
                            if tx.send(line).await.is_err() {
                                return;
                            }
                        }
                    }
                    // Lagged or closed: end the stream; the client re-lists and re-watches.
                    Err(_) => return,
                },
            }
        }
    }
}

/// 30 to 60 minutes, as kube-apiserver's `timeout = minRequestTimeout * (1 + rand)`.
fn random_timeout() -> Duration {
    use ring::rand::{SecureRandom, SystemRandom};
    let mut b = [0u8; 2];
    let _ = SystemRandom::new().fill(&mut b);
    Duration::from_secs(1800 + u64::from(u16::from_le_bytes(b)) % 1800)
}
