//! The log backend: audit events as lines in a file (or on standard output), with the
//! file rotated by size as kube-apiserver's `--audit-log-*` flags rotate it
//! (k8s.io/apiserver `plugin/pkg/audit/log/backend.go`, `pkg/server/options/audit.go`,
//! whose writer is `gopkg.in/natefinch/lumberjack.v2`).

mod rotate;

use std::io::{self, Write as _};
use std::path::PathBuf;
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use super::{AuditMetrics, AuditSink, Event, Processed};
use crate::gocompat::quote;

use rotate::RotatingFile;

/// `--audit-log-format`: how an event is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// `json`: the event as one line of `audit.k8s.io/v1` JSON (the default).
    #[default]
    Json,
    /// `legacy`: upstream's one-line text (`<time> AUDIT: id="..." stage="..." ...`).
    Legacy,
}

impl std::str::FromStr for LogFormat {
    type Err = LogError;

    /// `json` or `legacy`; anything else is refused with upstream's message.
    fn from_str(s: &str) -> Result<LogFormat, LogError> {
        match s {
            "json" => Ok(LogFormat::Json),
            "legacy" => Ok(LogFormat::Legacy),
            _ => Err(LogError(format!(
                "invalid audit log format {s}, allowed formats are \"legacy,json\""
            ))),
        }
    }
}

/// The `--audit-log-*` settings. The defaults are kube-apiserver's: rotation at 100 MiB,
/// 100 backups kept for at most 366 days, JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `--audit-log-path`: the file (its directory is made if missing), or `-` for
    /// standard output.
    pub path: PathBuf,
    /// `--audit-log-maxsize`, in bytes (the flag's megabytes times 1 MiB): the file is
    /// renamed to a backup before a line would take it past this size. 0: never rotated.
    pub max_size: u64,
    /// `--audit-log-maxbackup`: backups kept, newest first; 0 keeps all.
    pub max_backups: usize,
    /// `--audit-log-maxage`, in days: backups older than this (by the time in their name)
    /// are removed; 0 keeps them.
    pub max_age_days: u64,
    /// `--audit-log-format`.
    pub format: LogFormat,
}

impl LogConfig {
    /// Upstream's defaults, writing to `path`.
    pub fn new(path: impl Into<PathBuf>) -> LogConfig {
        LogConfig {
            path: path.into(),
            max_size: 100 * MIB,
            max_backups: 100,
            max_age_days: 366,
            format: LogFormat::Json,
        }
    }
}

/// A mebibyte: lumberjack's megabyte, the unit of `--audit-log-maxsize`.
const MIB: u64 = 1024 * 1024;

/// Why the log backend could not start, naming the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LogError(String);

/// Events queued before a request waits for the writer (upstream's blocking mode: the
/// request waits while its event cannot be taken).
const QUEUE: usize = 10_000;

/// How long the writer lets lines gather before it writes them, unless a flush or this
/// many lines ask for it sooner: the requests' threads then wake it once per batch, not
/// once per event (a wake-up and the switch to the writer cost more than the line).
const GATHER: Duration = Duration::from_millis(5);
const BATCH: usize = 512;

/// An [`AuditSink`] that writes each event as a line of a file, or of standard output.
///
/// Events are handed to a writer thread through a queue of 10,000 lines, written in
/// batches at most every 5 ms (or 512 lines); when the queue is full the request waits (upstream's default `blocking`
/// mode for the log backend). A write that fails is logged (at most once a minute, with
/// the count since) and the line lost, as upstream's backend loses it; the writer goes on
/// with the next. Cloning shares the writer; it ends, after writing what was queued, when
/// the last clone is dropped.
#[derive(Debug, Clone)]
pub struct LogSink {
    queue: Arc<Handle>,
    format: LogFormat,
}

/// The lines between the requests and the writer thread.
#[derive(Debug, Default)]
struct Queue {
    state: Mutex<Queued>,
    /// The writer waits here: for a first line when idle, for more while gathering.
    work: Condvar,
    /// Requests wait here while the queue is full.
    room: Condvar,
}

#[derive(Debug, Default)]
struct Queued {
    lines: Lines,
    flushes: Vec<SyncSender<()>>,
    /// The writer waits with nothing to write: the next line wakes it.
    idle: bool,
    /// Requests waiting for room.
    blocked: usize,
    /// Every sink is gone: write what is left and stop.
    closed: bool,
}

/// Lines end to end in one buffer, with where each ends: queued without an allocation
/// per line, written without a copy.
#[derive(Debug, Default)]
struct Lines {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Lines {
    fn push(&mut self, line: &[u8]) {
        self.bytes.extend_from_slice(line);
        self.ends.push(self.bytes.len());
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Each line, in order.
    fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(start, end)| &self.bytes[start..end])
    }

    /// Empty, its buffers kept for the next batch.
    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Queued> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `line`, waiting while the queue is full; `false` once the writer stopped.
    /// Queues the line in `line`; `false` when the writer is gone.
    fn push(&self, line: &[u8]) -> bool {
        let mut q = self.lock();
        while q.lines.len() >= QUEUE && !q.closed {
            q.blocked += 1;
            q = self.room.wait(q).unwrap_or_else(|e| e.into_inner());
            q.blocked -= 1;
        }
        if q.closed {
            return false;
        }
        q.lines.push(line);
        // Only an idle writer, or a batch that is full, is worth a wake-up.
        if q.idle || q.lines.len() == BATCH {
            q.idle = false;
            self.work.notify_one();
        }
        true
    }
}

/// The sinks' share of the queue; the last one dropped stops the writer.
#[derive(Debug)]
struct Handle(Arc<Queue>);

impl Drop for Handle {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.work.notify_one();
        self.0.room.notify_all();
    }
}

impl LogSink {
    /// Opens (creating with mode 0600, and its directory with 0700) the file and starts
    /// the writer thread.
    ///
    /// # Errors
    ///
    /// The file or its directory cannot be made or opened, or the thread cannot start.
    pub fn open(config: LogConfig) -> Result<LogSink, LogError> {
        LogSink::open_counted(config, Arc::default())
    }

    /// As [`LogSink::open`], counting lost lines in `metrics`
    /// (`apiserver_audit_error_total{plugin="log"}`).
    ///
    /// # Errors
    ///
    /// As [`LogSink::open`].
    pub fn open_counted(
        config: LogConfig,
        metrics: Arc<AuditMetrics>,
    ) -> Result<LogSink, LogError> {
        let output = Output::open(&config)?;
        let queue = Arc::new(Queue::default());
        let writer = queue.clone();
        std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || write_lines(output, &writer, &metrics))
            .map_err(|e| LogError(format!("starting the audit log writer: {e}")))?;
        Ok(LogSink {
            queue: Arc::new(Handle(queue)),
            format: config.format,
        })
    }

    /// Waits until every event handed over before the call has been written.
    pub fn flush(&self) {
        let (done, wait) = std::sync::mpsc::sync_channel(1);
        let queue = &self.queue.0;
        let mut q = queue.lock();
        if q.closed {
            return;
        }
        q.flushes.push(done);
        q.idle = false;
        queue.work.notify_one();
        drop(q);
        let _ = wait.recv();
    }
}

impl AuditSink for LogSink {
    fn process_event(&self, event: &Event) -> Processed {
        self.queue_line(event).into()
    }
}

impl LogSink {
    fn queue_line(&self, event: &Event) -> bool {
        thread_local! {
            // Each thread writes its lines here first: no allocation per line, and the
            // queue's lock is held only for the copy.
            static LINE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        LINE.with_borrow_mut(|line| {
            line.clear();
            match self.format {
                LogFormat::Json => event.write_json_line(line),
                LogFormat::Legacy => line.extend_from_slice(legacy_line(event).as_bytes()),
            }
            // Blocking mode: a full queue makes the request wait for room.
            let queued = self.queue.0.push(line);
            // A rare huge event (a large request object) does not stay held.
            if line.capacity() > 64 * 1024 {
                *line = Vec::new();
            }
            queued
        })
    }
}

/// Upstream's `EventString`, the `legacy` format, with a newline.
pub fn legacy_line(event: &Event) -> String {
    let quoted_list =
        |items: &[String]| items.iter().map(|g| quote(g)).collect::<Vec<_>>().join(",");
    let (mut username, mut groups) = ("<none>".to_owned(), "<none>".to_owned());
    if !event.user.username.is_empty() {
        username.clone_from(&event.user.username);
        if !event.user.groups.is_empty() {
            groups = quoted_list(&event.user.groups);
        }
    }
    let (mut as_user, mut as_groups) = ("<self>".to_owned(), "<lookup>".to_owned());
    if let Some(imp) = &event.impersonated_user {
        as_user.clone_from(&imp.username);
        // Upstream tests for a nil list; an impersonated user always has one here.
        as_groups = quoted_list(&imp.groups);
    }
    let namespace = match &event.object_ref {
        Some(r) if !r.namespace.is_empty() => r.namespace.as_str(),
        _ => "<none>",
    };
    let response = match &event.response_status {
        Some(s) => s.code.to_string(),
        None => "<deferred>".to_owned(),
    };
    let ip = event.source_ips.first().map_or("<unknown>", String::as_str);
    format!(
        "{} AUDIT: id={} stage={} ip={} method={} user={} groups={} as={} asgroups={} user-agent={} namespace={} uri={} response=\"{}\"\n",
        rfc3339_nano(event.request_received_timestamp),
        quote(&event.audit_id),
        quote(event.stage.as_str()),
        quote(ip),
        quote(&event.verb),
        quote(&username),
        quote(&groups),
        quote(&as_user),
        quote(&as_groups),
        quote(&event.user_agent),
        quote(namespace),
        quote(&event.request_uri),
        response,
    )
}

/// Go's `time.RFC3339Nano` in UTC: the fraction without trailing zeros, none when zero.
fn rfc3339_nano(t: SystemTime) -> String {
    let text = humantime::format_rfc3339_nanos(t).to_string();
    // `2026-12-06T14:05:00.123450000Z`
    match text.split_once('.') {
        Some((whole, fraction)) => {
            let digits = fraction.trim_end_matches('Z').trim_end_matches('0');
            if digits.is_empty() {
                format!("{whole}Z")
            } else {
                format!("{whole}.{digits}Z")
            }
        }
        None => text,
    }
}

/// Where lines go.
enum Output {
    Stdout,
    File(RotatingFile),
}

impl Output {
    pub(super) fn open(config: &LogConfig) -> Result<Output, LogError> {
        if config.path.as_os_str() == "-" {
            return Ok(Output::Stdout);
        }
        let file = RotatingFile::open(config).map_err(|e| {
            LogError(format!(
                "opening the audit log {}: {e}",
                config.path.display()
            ))
        })?;
        Ok(Output::File(file))
    }

    pub(super) fn write(&mut self, lines: &Lines) -> io::Result<()> {
        match self {
            Output::Stdout => {
                let mut out = io::stdout().lock();
                out.write_all(&lines.bytes)?;
                out.flush()
            }
            Output::File(file) => file.write(lines),
        }
    }
}

/// The writer thread: writes what gathered in one go, at most every [`GATHER`] unless a
/// flush or a full batch asks sooner, until every sink is gone and the queue is empty.
fn write_lines(mut output: Output, queue: &Queue, metrics: &AuditMetrics) {
    let mut failures = FailureLog::default();
    // The batch written last, emptied: the next batch's buffers.
    let mut spare = Lines::default();
    let mut q = queue.lock();
    loop {
        if q.lines.is_empty() && q.flushes.is_empty() {
            if q.closed {
                return;
            }
            // Idle: the next line wakes the writer.
            q.idle = true;
            q = queue.work.wait(q).unwrap_or_else(|e| e.into_inner());
            q.idle = false;
            continue;
        }
        if q.lines.len() < BATCH && q.flushes.is_empty() && !q.closed {
            // Let the batch gather; a full batch or a flush cuts it short.
            q = queue
                .work
                .wait_timeout(q, GATHER)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let mut lines = std::mem::replace(&mut q.lines, std::mem::take(&mut spare));
        let flushes = std::mem::take(&mut q.flushes);
        if q.blocked > 0 {
            queue.room.notify_all();
        }
        drop(q);
        if !lines.is_empty() {
            if let Err(e) = output.write(&lines) {
                metrics.error("log", lines.len() as u64);
                failures.record(e, lines.len());
            }
        }
        for done in flushes {
            let _ = done.send(());
        }
        lines.clear();
        spare = lines;
        q = queue.lock();
    }
}

/// Write errors, logged at most once a minute.
#[derive(Default)]
struct FailureLog {
    last: Option<Instant>,
    lost: usize,
}

impl FailureLog {
    fn record(&mut self, error: io::Error, lines: usize) {
        self.lost += lines;
        if self
            .last
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(60))
        {
            tracing::error!(%error, lost = self.lost, "writing the audit log failed; events lost");
            self.last = Some(Instant::now());
            self.lost = 0;
        }
    }
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
