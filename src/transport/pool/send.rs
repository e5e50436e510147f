//! One request through the pool: which connection it takes (an HTTP/2 connection with a
//! free stream, an idle HTTP/1.1 one, or a new dial that it waits for with the others),
//! and the retries of a request the backend provably did not process.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use http::uri::Authority;
use http::{Request, Response};

use super::retry::{AttemptError, Retry, replay_copy};
use super::{DialEnd, DialFailure, Dialling, HostKey, Pick, PoolInner, Waited, Waiting, lock};
use crate::body::{Body, BoxError};

impl PoolInner {
    pub(super) async fn send(
        self: Arc<Self>,
        req: Request<Body>,
    ) -> Result<Response<Body>, BoxError> {
        let authority =
            req.uri().authority().cloned().ok_or_else(|| {
                BoxError::from(format!("backend URI {} has no address", req.uri()))
            })?;
        let replay = replay_copy(&req);
        match self.attempt(&authority, req, false).await {
            Ok(res) => Ok(res),
            Err(AttemptError { error, retry }) if retry != Retry::No && replay.is_some() => {
                tracing::debug!(%authority, %error, "backend never processed the request; sending it again");
                let req = replay.map(|r| r.map(|()| Body::empty()));
                match req {
                    // Boxed: the retry's state stays out of every request's future.
                    Some(req) => Box::pin(self.attempt(&authority, req, retry == Retry::Fresh))
                        .await
                        .map_err(|e| e.error),
                    None => Err(error),
                }
            }
            Err(e) => Err(e.error),
        }
    }

    /// Picks (or dials) a connection for a request to `authority`; `fresh` dials a new one
    /// (a retry after its connection went away, allowed past the connection limit).
    /// `waited` is when this request last began to wait for a dial: one that failed since
    /// then (with the current client certificate, no other dial under way, and no
    /// connection to queue on at the limit) fails the request rather than being tried
    /// again.
    fn pick(&self, authority: &Authority, fresh: bool, waited: Option<Waited>) -> Pick {
        let generation = self.client_cert.generation();
        let now = self.timer.now();
        let mut hosts = lock(&self.hosts);
        let host = hosts.entry(HostKey::of(authority)).or_default();
        // Closed, draining after a GOAWAY, or made with an older client certificate:
        // not for new requests (those in flight finish).
        host.http2.retain(|c| {
            !c.watch.closed.load(Ordering::Acquire)
                && !c.draining.load(Ordering::Acquire)
                && c.cert_generation == generation
        });
        if fresh {
            host.dialing += usize::from(!host.http1_only);
            return Pick::Dial(!host.http1_only);
        }
        if host.http1_only {
            while let Some(idle) = host.http1_idle.pop() {
                let stale = idle.cert_generation != generation
                    || now.saturating_duration_since(idle.since) > self.config.idle_timeout;
                // Returned when its last response ended; hyper may not have marked it
                // ready yet, which `send_h1` waits for.
                if !stale && !idle.send.is_closed() {
                    return Pick::Http1(idle.send);
                }
            }
            return Pick::Dial(false);
        }
        // The first connection with a free stream, oldest first, as Go's transport picks:
        // requests gather on as few connections as the backend's limit allows, rather than
        // each of several connections carrying a request or two at a time.
        let free = host
            .http2
            .iter()
            .find(|c| c.in_flight.load(Ordering::Acquire) < c.watch.max_streams());
        if let Some(conn) = free {
            conn.in_flight.fetch_add(1, Ordering::AcqRel);
            return Pick::Http2(conn.clone());
        }
        let max_connections = self.config.max_http2_connections.max(1);
        // A dial failed while this request waited: so does the request, unless another
        // dial is under way (it waits for that one), the client certificate changed since
        // (it dials with the new one), or the limit is reached and a connection can queue
        // it.
        let can_queue =
            !host.http2.is_empty() && host.http2.len() + host.dialing >= max_connections;
        if let (Some(waited), Some((at, failure))) = (waited, &host.failed_dial) {
            if *at > waited.since
                && failure.generation == generation
                && host.dialing == 0
                && !can_queue
            {
                return Pick::Failed(failure.error());
            }
        }
        // Every connection is full (or there is none). A dial under way will carry about
        // as many streams as this backend's connections allow (the last limit they showed;
        // h2's assumption of 100 before any), one of them its dialler's: requests up to
        // that number wait for it rather than each dialling its own, as Go's transport and
        // hyper-util's pool share one dial. Several connections opened by one burst at
        // start would otherwise each carry a request or two, and the backend would read
        // them one by one. A request whose last wait timed out dials.
        if let Some(limit) = host.http2.iter().map(|c| c.watch.max_streams()).min() {
            host.streams_hint = Some(limit);
        }
        if host.dialing > 0 && !waited.is_some_and(|w| w.timed_out) {
            let per_connection = host
                .streams_hint
                .unwrap_or(super::h2::INITIAL_MAX_SEND_STREAMS);
            let room = host
                .dialing
                .saturating_mul(per_connection.saturating_sub(1));
            if host.waiting < room {
                host.waiting += 1;
                return Pick::Wait(host.dials_ended, host.dialed.clone());
            }
        }
        if host.http2.len() + host.dialing < max_connections {
            host.dialing += 1;
            return Pick::Dial(true);
        }
        let least_loaded = host
            .http2
            .iter()
            .min_by_key(|c| c.in_flight.load(Ordering::Acquire))
            .cloned();
        match least_loaded {
            Some(conn) => {
                conn.in_flight.fetch_add(1, Ordering::AcqRel);
                Pick::Http2(conn)
            }
            None => {
                host.waiting += 1;
                Pick::Wait(host.dials_ended, host.dialed.clone())
            }
        }
    }

    async fn attempt(
        self: &Arc<Self>,
        authority: &Authority,
        req: Request<Body>,
        fresh: bool,
    ) -> Result<Response<Body>, AttemptError> {
        let mut waited = None;
        let pick = loop {
            match self.pick(authority, fresh, waited) {
                Pick::Wait(seen, dialed) => {
                    // Uncounted when this wait ends, however it ends.
                    let _waiting = Waiting {
                        pool: self,
                        authority,
                    };
                    let notified = dialed.notified();
                    let mut notified = std::pin::pin!(notified);
                    notified.as_mut().enable();
                    // A dial that ended since the pick has already signalled.
                    let ended = lock(&self.hosts)
                        .get(&HostKey::of(authority))
                        .is_none_or(|h| h.dials_ended != seen);
                    // A dial ends within the connect and handshake timeouts (twice the
                    // handshake's for HTTP/2: its SETTINGS frame is waited for too), or
                    // when the request dialling gives up; a second more for the margin.
                    let mut timed_out = false;
                    if !ended {
                        let wait = self
                            .config
                            .connect_timeout
                            .saturating_add(self.config.tls_handshake_timeout.saturating_mul(2))
                            .saturating_add(Duration::from_secs(1));
                        timed_out = Box::pin(self.timer.timeout(wait, notified)).await.is_err();
                    }
                    waited = Some(Waited {
                        since: seen,
                        timed_out,
                    });
                }
                Pick::Failed(error) => {
                    return Err(AttemptError {
                        error,
                        retry: Retry::No,
                    });
                }
                pick => break pick,
            }
        };
        match pick {
            Pick::Wait(..) | Pick::Failed(_) => {
                unreachable!("the loop above never ends with Wait or Failed")
            }
            Pick::Http2(conn) => self.send_h2(conn, req).await,
            Pick::Http1(send) => self.send_h1(authority, send, req, true).await,
            // Boxed: dialling (TCP, TLS, the HTTP/2 handshake) is rare, and its futures are
            // large; inline, every request's future would carry (and copy) their space.
            Pick::Dial(counted) => Box::pin(self.dial_and_send(authority, req, counted)).await,
        }
    }

    async fn dial_and_send(
        self: &Arc<Self>,
        authority: &Authority,
        req: Request<Body>,
        counted: bool,
    ) -> Result<Response<Body>, AttemptError> {
        let mut dialling = Dialling {
            pool: self,
            authority,
            counted,
            ended: false,
        };
        let generation = self.client_cert.generation();
        let (io, h2) = match self.connector.connect(authority).await {
            Ok(dialed) => dialed,
            Err(e) => {
                let io_kind = crate::transport::error_sources(&e)
                    .find_map(|e| e.downcast_ref::<std::io::Error>())
                    .map(std::io::Error::kind);
                dialling.end(DialEnd::Failed(DialFailure {
                    message: e.to_string().into(),
                    connect: true,
                    generation,
                    io_kind,
                }));
                return Err(AttemptError {
                    error: Box::new(e),
                    retry: Retry::No,
                });
            }
        };
        if !h2 {
            dialling.end(DialEnd::Http1);
            let send = self.handshake_h1(io).await?;
            return self.send_h1(authority, send, req, false).await;
        }
        match self.handshake_h2(io, generation).await {
            Ok(conn) => {
                // The dialler's stream opens at once, so it is the connection's first: a
                // backend that sends GOAWAY after a few streams (and refuses those above
                // them) cannot refuse the request this dial was for, which may already be
                // a retry. The waiters are let on once the backend's SETTINGS have told
                // its stream limit; a connection that ended meanwhile is left out by their
                // pick, and the dialler's stream reports how it ended.
                conn.in_flight.fetch_add(1, Ordering::AcqRel);
                let opened = self.open_h2(conn.clone(), req).await;
                self.settings_seen(&conn).await;
                dialling.end(DialEnd::Http2(conn));
                opened?.answer().await
            }
            Err(e) => {
                // The dialler and its waiters get the same words.
                let failure = DialFailure {
                    message: format!("HTTP/2 handshake with {authority} failed: {}", e.error)
                        .into(),
                    connect: false,
                    generation,
                    io_kind: None,
                };
                let error = failure.error();
                dialling.end(DialEnd::Failed(failure));
                Err(AttemptError {
                    error,
                    retry: Retry::No,
                })
            }
        }
    }
}
