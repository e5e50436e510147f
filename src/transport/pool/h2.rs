//! HTTP/2 connections, driven with the `h2` crate directly: the handshake, sending on a
//! stream slot, the response body that gives the slot back, the request body's pipe,
//! which failures prove a request unprocessed, and the connection task that publishes the
//! stream limit and checks the connection with PINGs.
//!
//! hyper's HTTP/2 client puts a channel, a oneshot and a spawned task between a request
//! and its stream; here the request's own task opens the stream and awaits the response,
//! and a task is spawned only to send a request body that has not all arrived yet. What
//! hyper's (1.12) client does besides is kept: its flow-control windows and frame sizes,
//! the connection-specific headers HTTP/2 forbids taken out (those `Connection` names
//! too), `Content-Length` from an exact body size, its request-body pipe (capacity claimed
//! only for a chunk in hand, a reset seen while waiting, the stream reset with `CANCEL`
//! when the caller gives up before the response), the received data's window given back
//! as it is read, a stream reset with `NO_ERROR` or `CANCEL` ending a body cleanly, and
//! keep-alive PINGs after a silence. Not kept: extended CONNECT, which upgrades do not
//! need (they go over HTTP/1.1).

mod pipe;
mod response;
mod task;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;
use h2::Reason;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response};
use http_body::Body as _;

use super::body::StreamSlot;
use super::connect::{Gathered, Io};
use super::retry::{AttemptError, Retry};
use super::{H2Conn, PoolInner};
use crate::body::Body;
use pipe::{CancelOnDrop, PipeBody};
use response::H2Body;
use task::{ConnTask, KeepAlive};

/// The TLS stream an HTTP/2 connection runs on.
type H2Io = Gathered<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

// hyper's HTTP/2 client defaults, kept so that backends see the same connection: windows
// well above the protocol's 64 KiB, 16 KiB frames, 100 streams until the backend's
// SETTINGS say otherwise.
const CONNECTION_WINDOW: u32 = 5 * 1024 * 1024;
const STREAM_WINDOW: u32 = 2 * 1024 * 1024;
const MAX_FRAME_SIZE: u32 = 16 * 1024;
const MAX_SEND_BUFFER: usize = 1024 * 1024;
const MAX_HEADER_LIST_SIZE: u32 = 16 * 1024;
pub(super) const INITIAL_MAX_SEND_STREAMS: usize = 100;
/// h2's stream limit until the backend's first SETTINGS frame has been read: a value no
/// SETTINGS frame sets on a 64-bit target (they carry 32 bits, and without
/// `MAX_CONCURRENT_STREAMS` h2 takes `usize::MAX`; on a 32-bit target a backend
/// advertising exactly `u32::MAX - 1` streams is taken for one whose SETTINGS have not
/// come), so that the connection task can tell when that frame has come. Only the
/// dialler's stream is opened before then (the connection is not yet offered to other
/// requests); should the frame not come within the TLS handshake timeout, the pool counts
/// [`INITIAL_MAX_SEND_STREAMS`] per connection, as h2 would have.
const SETTINGS_UNSEEN: usize = usize::MAX - 1;
const MAX_LOCAL_ERROR_RESETS: usize = 1024;

/// What the connection task shares with the pool.
pub(super) struct ConnWatch {
    /// The backend's `SETTINGS_MAX_CONCURRENT_STREAMS`, as the connection task last saw it
    /// ([`SETTINGS_UNSEEN`] until the backend's first SETTINGS frame); read through
    /// [`ConnWatch::max_streams`].
    max_streams: AtomicUsize,
    /// The connection task has ended: no stream can be opened here any more.
    pub(super) closed: AtomicBool,
    /// Signalled (once, with a stored permit) when the backend's first SETTINGS frame has
    /// been read or the connection task has ended.
    settled: tokio::sync::Notify,
}

impl ConnWatch {
    /// Publishes h2's stream limit after a poll of the connection; signals `settled` the
    /// first time it shows the backend's SETTINGS.
    fn publish(&self, limit: usize) {
        if limit == SETTINGS_UNSEEN {
            return;
        }
        if self.max_streams.swap(limit, Ordering::AcqRel) == SETTINGS_UNSEEN {
            self.settled.notify_one();
        }
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.settled.notify_one();
    }

    /// The stream limit `pick` counts against.
    pub(super) fn max_streams(&self) -> usize {
        match self.max_streams.load(Ordering::Acquire) {
            SETTINGS_UNSEEN => INITIAL_MAX_SEND_STREAMS,
            limit => limit,
        }
    }
}

impl PoolInner {
    /// The HTTP/2 handshake on a TLS stream whose ALPN chose `h2`. The connection task is
    /// spawned on the executor: it drives the connection, publishes the backend's stream
    /// limit, and sends a PING when nothing has been received for
    /// [`PoolConfig::keep_alive_interval`](super::PoolConfig::keep_alive_interval),
    /// closing the connection (its requests fail at once) when one goes unanswered for
    /// [`PoolConfig::keep_alive_timeout`](super::PoolConfig::keep_alive_timeout). The
    /// returned record starts with no stream counted and remembers the certificate
    /// `generation` it was dialled with. A failed handshake is never retried.
    pub(super) async fn handshake_h2(
        &self,
        io: Io,
        generation: u64,
    ) -> Result<Arc<H2Conn>, AttemptError> {
        let reads = Arc::new(AtomicU64::new(0));
        let mut io = io.into_inner();
        io.count_reads(reads.clone());
        let (send, mut conn) = h2::client::Builder::new()
            .initial_max_send_streams(SETTINGS_UNSEEN)
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .max_frame_size(MAX_FRAME_SIZE)
            .max_header_list_size(MAX_HEADER_LIST_SIZE)
            .max_send_buffer_size(MAX_SEND_BUFFER)
            .max_local_error_reset_streams(Some(MAX_LOCAL_ERROR_RESETS))
            .enable_push(false)
            .handshake::<H2Io, Bytes>(io)
            .await
            .map_err(|e| AttemptError {
                error: Box::new(e),
                retry: Retry::No,
            })?;
        let watch = Arc::new(ConnWatch {
            max_streams: AtomicUsize::new(SETTINGS_UNSEEN),
            closed: AtomicBool::new(false),
            settled: tokio::sync::Notify::new(),
        });
        let keep_alive = KeepAlive {
            ping: conn.ping_pong(),
            interval: self.config.keep_alive_interval,
            timeout: self.config.keep_alive_timeout,
            awaiting_pong: false,
            sleep: self.timer.sleep(self.config.keep_alive_interval),
            reads,
            reads_seen: 0,
            last_read: self.timer.now(),
            timer: self.timer.clone(),
        };
        self.executor.spawn(ConnTask {
            conn,
            watch: watch.clone(),
            keep_alive,
        });
        Ok(Arc::new(H2Conn {
            send,
            in_flight: AtomicUsize::new(0),
            watch,
            cert_generation: generation,
            draining: AtomicBool::new(false),
        }))
    }

    /// Waits until `conn`'s backend has sent its first SETTINGS frame (RFC 9113 §3.4: the
    /// first frame of its preface) or the connection has ended, at most the TLS handshake
    /// timeout: so that the requests waiting for this dial count against the backend's
    /// stream limit rather than h2's assumption of 100.
    pub(super) async fn settings_seen(&self, conn: &H2Conn) {
        let settled = conn.watch.settled.notified();
        let _ = self
            .timer
            .timeout(self.config.tls_handshake_timeout, settled)
            .await;
    }

    /// Sends `req` on `conn`, whose stream slot the caller has already counted. The slot
    /// is given back when the response body ends or is dropped (the [`StreamSlot`] rides
    /// in the [`H2Body`]), or at once when sending fails. A failure that shows the
    /// connection going away marks it draining, so no later pick chooses it.
    pub(super) async fn send_h2(
        &self,
        conn: Arc<H2Conn>,
        req: Request<Body>,
    ) -> Result<Response<Body>, AttemptError> {
        self.open_h2(conn, req).await?.answer().await
    }

    /// The first half of [`send_h2`](Self::send_h2): opens `req`'s stream on `conn` (so
    /// that it has its stream id) and starts its body; the response is
    /// [`OpenStream::answer`]'s.
    pub(super) async fn open_h2(
        &self,
        conn: Arc<H2Conn>,
        req: Request<Body>,
    ) -> Result<OpenStream, AttemptError> {
        let slot = StreamSlot(conn);
        let (mut parts, body) = req.into_parts();
        let end_of_stream = body.is_end_stream();
        prepare_headers(&mut parts.headers, &parts.method, &body);
        let mut send = slot.0.send.clone();
        let opened = match std::future::poll_fn(|cx| send.poll_ready(cx)).await {
            Ok(()) => send.send_request(Request::from_parts(parts, ()), end_of_stream),
            Err(e) => Err(e),
        };
        let (response, body_tx) = match opened {
            Ok(opened) => opened,
            Err(e) => {
                // No stream was opened, so nothing was sent. A connection error (a GOAWAY,
                // the connection gone) sends the request to a new connection; a request
                // h2 refuses to encode would be refused there too.
                let retry = if e.is_go_away() || e.is_io() || e.reason().is_some() {
                    slot.0.draining.store(true, Ordering::Release);
                    Retry::Fresh
                } else {
                    Retry::No
                };
                return Err(AttemptError {
                    error: Box::new(e),
                    retry,
                });
            }
        };
        drop(send);
        // Resets the body's stream if this future is dropped before the response came.
        let mut cancel = CancelOnDrop(None);
        if !end_of_stream {
            // A body that is all there (most request bodies: a JSON object read whole)
            // goes out now; only one still arriving gets a task of its own.
            let (cancel_tx, cancel_rx) = tokio::sync::oneshot::channel();
            let mut pipe = PipeBody {
                body,
                tx: body_tx,
                buffered: None,
                cancel: Some(cancel_rx),
            };
            if crate::rt::poll_now(&mut pipe).is_pending() {
                self.executor.spawn(pipe);
                cancel.0 = Some(cancel_tx);
            }
        }
        Ok(OpenStream {
            slot,
            response,
            cancel,
        })
    }
}

/// A request whose stream is open ([`PoolInner::open_h2`]), awaiting its response.
pub(super) struct OpenStream {
    slot: StreamSlot,
    response: h2::client::ResponseFuture,
    /// Resets the body's stream if dropped before the response came.
    cancel: CancelOnDrop,
}

impl OpenStream {
    /// The response, its body giving the stream slot back when it ends; or the error,
    /// marking the connection draining when it shows the connection going away.
    pub(super) async fn answer(self) -> Result<Response<Body>, AttemptError> {
        let OpenStream {
            slot,
            response,
            mut cancel,
        } = self;
        let answered = response.await;
        cancel.disarm();
        match answered {
            Ok(res) => {
                let remaining = content_length(res.headers());
                Ok(res.map(|recv| {
                    Body::new(H2Body {
                        recv,
                        data_done: false,
                        remaining,
                        _slot: slot,
                    })
                }))
            }
            Err(e) => {
                let retry = h2_retry(&e);
                if retry == Retry::Fresh {
                    slot.0.draining.store(true, Ordering::Release);
                }
                Err(AttemptError {
                    error: Box::new(e),
                    retry,
                })
            }
        }
    }
}

/// Headers HTTP/2 forbids (RFC 9113 §8.2.2); h2 refuses to send a request carrying one.
/// `TE` is allowed with the value `trailers` only.
const CONNECTION_SPECIFIC: [HeaderName; 5] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
];

/// Whether `name` is one of [`CONNECTION_SPECIFIC`], compared one constant at a time:
/// `CONNECTION_SPECIFIC.contains` would build the array (and drop it) for every name
/// looked at.
fn is_connection_specific(name: &HeaderName) -> bool {
    name == header::CONNECTION
        || name == header::TRANSFER_ENCODING
        || name == header::UPGRADE
        || matches!(name.as_str(), "keep-alive" | "proxy-connection")
}

/// Readies a request's headers for HTTP/2, as hyper's client does: connection-specific
/// headers out, and the headers `Connection` names (the proxy's rewrite has already
/// removed them; other callers may not have), and `Content-Length` from a body of exact size when the method defines a
/// payload or the body is not empty.
fn prepare_headers(headers: &mut HeaderMap, method: &Method, body: &Body) {
    // One pass over the few names present; most requests carry none of these.
    if headers
        .keys()
        .any(|name| name == header::TE || is_connection_specific(name))
    {
        let listed = crate::transport::connection_listed(headers);
        for name in listed.iter().chain(&CONNECTION_SPECIFIC) {
            headers.remove(name);
        }
        let trailers_only = headers
            .get_all(header::TE)
            .iter()
            .all(|v| v.as_bytes().eq_ignore_ascii_case(b"trailers"));
        if !trailers_only {
            headers.remove(header::TE);
        }
    }
    if let Some(len) = body.size_hint().exact() {
        let defines_payload = !matches!(
            *method,
            Method::GET | Method::HEAD | Method::DELETE | Method::CONNECT
        );
        if (len != 0 || defines_payload) && !headers.contains_key(header::CONTENT_LENGTH) {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        }
    }
}

/// The response's `Content-Length`, when it has exactly one that is a number.
fn content_length(headers: &HeaderMap) -> Option<u64> {
    let mut values = headers.get_all(header::CONTENT_LENGTH).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    std::str::from_utf8(value.as_bytes()).ok()?.parse().ok()
}

/// Whether an HTTP/2 request whose stream was opened failed in a way that proves the
/// backend did not process it: a `REFUSED_STREAM` reset (the stream limit; any connection
/// will do), or a GOAWAY from the backend (h2 fails exactly the streams above its last
/// stream id when one arrives: a new connection).
fn h2_retry(e: &h2::Error) -> Retry {
    if !e.is_remote() {
        return Retry::No;
    }
    if e.is_go_away() {
        Retry::Fresh
    } else if e.is_reset() && e.reason() == Some(Reason::REFUSED_STREAM) {
        Retry::Elsewhere
    } else {
        Retry::No
    }
}

#[cfg(test)]
mod tests {
    use super::pipe::h2_reason;
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(n, v)| (HeaderName::from_static(n), HeaderValue::from_static(v)))
            .collect()
    }

    #[test]
    fn the_connection_specific_test_names_exactly_the_listed_headers() {
        for name in &CONNECTION_SPECIFIC {
            assert!(is_connection_specific(name), "{name}");
        }
        for other in [
            "te",
            "keep-alive-x",
            "proxy-connections",
            "x-remote-user",
            "host",
        ] {
            assert!(
                !is_connection_specific(&HeaderName::from_static(other)),
                "{other}"
            );
        }
    }

    #[test]
    fn connection_specific_headers_are_taken_out_and_te_trailers_kept() {
        let mut h = headers(&[
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "named by Connection"),
            ("keep-alive", "timeout=5"),
            ("proxy-connection", "keep-alive"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
            ("te", "trailers"),
            ("accept", "application/json"),
        ]);
        prepare_headers(&mut h, &Method::GET, &Body::empty());
        let mut names: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["accept", "te"]);

        let mut h = headers(&[("te", "gzip"), ("accept", "*/*")]);
        prepare_headers(&mut h, &Method::GET, &Body::empty());
        assert!(!h.contains_key(header::TE));
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn a_failed_body_resets_with_the_h2_reason_in_its_error() {
        let cancel = h2::Error::from(Reason::CANCEL);
        assert_eq!(h2_reason(&cancel), Reason::CANCEL);
        #[derive(Debug, thiserror::Error)]
        #[error("client body")]
        struct Wrapped(#[source] h2::Error);
        let wrapped = Wrapped(h2::Error::from(Reason::REFUSED_STREAM));
        assert_eq!(h2_reason(&wrapped), Reason::REFUSED_STREAM);
        assert_eq!(
            h2_reason(&std::io::Error::from(std::io::ErrorKind::UnexpectedEof)),
            Reason::INTERNAL_ERROR
        );
    }

    #[test]
    fn content_length_comes_from_an_exact_body_size_as_hyper_sets_it() {
        let mut h = HeaderMap::new();
        prepare_headers(&mut h, &Method::POST, &Body::full("12345"));
        assert_eq!(h[header::CONTENT_LENGTH], "5");
        // A POST defines a payload: an empty one is declared too.
        let mut h = HeaderMap::new();
        prepare_headers(&mut h, &Method::POST, &Body::empty());
        assert_eq!(h[header::CONTENT_LENGTH], "0");
        // A GET without a body gets none; the client's own value is never replaced.
        let mut h = HeaderMap::new();
        prepare_headers(&mut h, &Method::GET, &Body::empty());
        assert!(h.is_empty());
        let mut h = headers(&[("content-length", "5")]);
        prepare_headers(&mut h, &Method::PUT, &Body::full("12345"));
        assert_eq!(h.get_all(header::CONTENT_LENGTH).iter().count(), 1);
    }

    #[test]
    fn a_response_content_length_is_read_only_when_single_and_numeric() {
        assert_eq!(
            content_length(&headers(&[("content-length", "645")])),
            Some(645)
        );
        assert_eq!(content_length(&HeaderMap::new()), None);
        assert_eq!(content_length(&headers(&[("content-length", "x")])), None);
        let mut two = headers(&[("content-length", "1")]);
        two.append(header::CONTENT_LENGTH, HeaderValue::from_static("1"));
        assert_eq!(content_length(&two), None);
    }
}
