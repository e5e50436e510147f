//! HTTP/1.1 connections: the handshake, sending on a kept-alive connection, the idle list,
//! and which failures show a reused connection closed under the request.

use std::sync::Arc;

use http::uri::Authority;
use http::{Request, Response, Uri};
use hyper::client::conn::http1;

use super::body::{PooledBody, Release};
use super::connect::Io;
use super::retry::{AttemptError, Retry};
use super::{Idle, PoolInner, lock};
use crate::body::Body;

impl PoolInner {
    /// The HTTP/1.1 handshake on a TLS stream whose ALPN chose `http/1.1` (or nothing);
    /// the connection task is spawned on the executor and ends when the connection does.
    pub(super) async fn handshake_h1(
        &self,
        io: Io,
    ) -> Result<http1::SendRequest<Body>, AttemptError> {
        let (send, conn) = http1::Builder::new()
            .handshake(io)
            .await
            .map_err(|e| AttemptError {
                error: Box::new(e),
                retry: Retry::No,
            })?;
        self.executor.spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "backend HTTP/1.1 connection ended with an error");
            }
        });
        Ok(send)
    }

    /// Sends `req` on `send` in origin form. `reused` says the connection came from the
    /// idle list: only then does a connection that ends before any response byte prove
    /// the request unprocessed (the backend closed a kept-alive connection as it arrived),
    /// and only then is it [`Retry::Fresh`]. The connection goes back to the idle list when
    /// the response body has been read to its end, never while a body is still unread.
    pub(super) async fn send_h1(
        self: &Arc<Self>,
        authority: &Authority,
        mut send: http1::SendRequest<Body>,
        req: Request<Body>,
        reused: bool,
    ) -> Result<Response<Body>, AttemptError> {
        let generation = self.client_cert.generation();
        let req = origin_form(req, authority);
        if let Err(e) = send.ready().await {
            // Closed while idle: nothing was sent.
            return Err(AttemptError {
                error: Box::new(e),
                retry: Retry::Fresh,
            });
        }
        match send.send_request(req).await {
            Ok(res) => {
                use http_body::Body as _;
                if res.body().is_end_stream() {
                    // Nothing left to read (a 204, `Content-Length: 0`): free at once.
                    self.return_http1(authority, send, generation);
                    return Ok(res.map(Body::new));
                }
                let release = Release {
                    pool: self.clone(),
                    authority: authority.clone(),
                    send,
                    cert_generation: generation,
                };
                Ok(res.map(|body| {
                    Body::new(PooledBody {
                        inner: body,
                        release: Some(release),
                    })
                }))
            }
            Err(e) => {
                // A kept-alive connection the backend closed as our request arrived: it
                // ended before any response byte (hyper's incomplete message, or the TLS
                // stream's end without close_notify, a reset, a broken pipe). Go's
                // transport retries these on reused connections too.
                let closed = e.is_canceled() || e.is_incomplete_message() || closed_io(&e);
                Err(AttemptError {
                    error: Box::new(e),
                    retry: if reused && closed {
                        Retry::Fresh
                    } else {
                        Retry::No
                    },
                })
            }
        }
    }

    /// Puts an HTTP/1.1 connection back on `authority`'s idle list, unless it is closed,
    /// was made with a certificate that has since been replaced, or the list already holds
    /// [`PoolConfig::max_idle_http1`](super::PoolConfig::max_idle_http1) connections (then
    /// it is dropped, which closes it). Its idle time starts now.
    pub(super) fn return_http1(
        &self,
        authority: &Authority,
        send: http1::SendRequest<Body>,
        generation: u64,
    ) {
        if send.is_closed() || generation != self.client_cert.generation() {
            return;
        }
        let mut hosts = lock(&self.hosts);
        let host = hosts.entry(super::HostKey::of(authority)).or_default();
        if host.http1_idle.len() < self.config.max_idle_http1 {
            host.http1_idle.push(Idle {
                send,
                since: self.timer.now(),
                cert_generation: generation,
            });
        }
    }
}

/// An HTTP/1.1 request line names only the path and query; the backend's address goes
/// into `Host` (as Go's transport writes it, and hyper-util's client did).
pub(crate) fn origin_form(mut req: Request<Body>, authority: &Authority) -> Request<Body> {
    if let Some(pq) = req.uri().path_and_query().cloned() {
        let mut parts = http::uri::Parts::default();
        parts.path_and_query = Some(pq);
        if let Ok(uri) = Uri::from_parts(parts) {
            *req.uri_mut() = uri;
        }
    }
    if !req.headers().contains_key(http::header::HOST) {
        if let Ok(host) = http::HeaderValue::from_str(authority.as_str()) {
            req.headers_mut().insert(http::header::HOST, host);
        }
    }
    req
}

/// Whether an error comes from the connection ending under the request: an I/O error of
/// kind `UnexpectedEof`, `ConnectionReset`, `ConnectionAborted` or `BrokenPipe` anywhere in
/// its source chain (a TLS stream that ends without `close_notify` is an `UnexpectedEof`).
fn closed_io(e: &hyper::Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
            );
        }
        cur = err.source();
    }
    false
}
