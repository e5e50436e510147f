//! Dialling one backend: TCP, then TLS with the APIService's server name and ALPN.

use crate::span::{Kind, PathSpan};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use http::uri::Authority;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tower::Service;

use crate::transport::ConnectError;

pub(super) type Io = TokioIo<Gathered<tokio_rustls::client::TlsStream<TcpStream>>>;

pin_project_lite::pin_project! {
    /// A TLS stream that reports no vectored writes, so that hyper and h2 gather what they
    /// send into their own buffer and write it at once. Used on both sides: the
    /// connections dialled to backends and those the server accepts.
    ///
    /// With a stream that says it writes vectors, h2 keeps any DATA frame of 256 bytes
    /// or more out of its buffer, to write it beside the buffer as a second slice, and
    /// buffers nothing more until that frame is written: every such frame costs a write
    /// of its own (one TLS record and one `writev` each), so the frames of streams that
    /// are ready together are not sent together. Without vectors h2 copies frames of up
    /// to 1 KiB into its 16 KiB buffer and writes the buffer when its connection's work
    /// is done; hyper's HTTP/1.1 likewise copies a body into the header's buffer.
    /// rustls copies every byte into its records anyway, so the copy costs next to
    /// nothing, while the writes saved are system calls.
    ///
    /// Each read that brought bytes can be told to an [`OnRead`]
    /// ([`Gathered::count_reads`]): a backend's HTTP/2 connection counts them, so that
    /// its keep-alive PINGs go out only after a silence, and an accepted connection
    /// starts its header timeout at the first byte of a request.
    pub(crate) struct Gathered<T> {
        #[pin]
        inner: T,
        reads: Option<Arc<dyn OnRead>>,
    }
}

/// What a [`Gathered`] stream tells of each read that brought bytes.
pub(crate) trait OnRead: Send + Sync {
    /// Bytes arrived.
    fn on_read(&self);
}

/// A count of the reads.
impl OnRead for AtomicU64 {
    fn on_read(&self) {
        self.fetch_add(1, Ordering::Relaxed);
    }
}

impl<T> Gathered<T> {
    pub(crate) fn new(inner: T) -> Gathered<T> {
        Gathered { inner, reads: None }
    }

    /// From now on, every read that brings bytes is told to `reads`.
    pub(crate) fn count_reads(&mut self, reads: Arc<dyn OnRead>) {
        self.reads = Some(reads);
    }
}

impl<T: AsyncRead> AsyncRead for Gathered<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.project();
        let Some(reads) = this.reads else {
            return this.inner.poll_read(cx, buf);
        };
        let before = buf.filled().len();
        let polled = this.inner.poll_read(cx, buf);
        if buf.filled().len() > before {
            reads.on_read();
        }
        polled
    }
}

impl<T: AsyncWrite> AsyncWrite for Gathered<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.project().inner.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.project().inner.poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        false
    }
}

/// Dials a backend: TCP, then TLS with the APIService's server name and ALPN.
///
/// One per APIService client (and one more for its upgrade client, offering HTTP/1.1
/// only); cloning shares the TLS config. The TCP connect timeout is set on `tcp`; the
/// handshake has its own, `tls_handshake_timeout`.
#[derive(Clone)]
pub(crate) struct Connector {
    pub(crate) tcp: HttpConnector,
    pub(crate) tls: tokio_rustls::TlsConnector,
    pub(crate) server_name: ServerName<'static>,
    pub(crate) tls_handshake_timeout: Duration,
}

impl Connector {
    /// TCP then TLS to `authority`; whether ALPN chose h2.
    ///
    /// Every failure is a [`ConnectError`] with Go's wording, so the aggregator can tell
    /// an unreachable backend from one that answered: `dial tcp <addr>: <cause>`,
    /// `tls: <cause>`, `net/http: TLS handshake timeout`.
    pub(crate) async fn connect(&self, authority: &Authority) -> Result<(Io, bool), ConnectError> {
        let uri = Uri::builder()
            .scheme("http")
            .authority(authority.clone())
            .path_and_query("/")
            .build()
            .map_err(|e| {
                ConnectError::new(format!("invalid backend address {authority}: {e}"), None)
            })?;
        // Under the request's `proxy` span when a traced request dials.
        let span = PathSpan::current("connect", Kind::Client);
        span.text("server.address", authority.as_str());
        let tcp = self.tcp.clone().call(uri).await.map_err(|e| {
            let text = crate::status::error_chain(&e);
            let e = ConnectError::new(format!("dial tcp {authority}: {text}"), Some(Box::new(e)));
            span.error(&e);
            e
        });
        span.end();
        let tcp = tcp?.into_inner();
        let span = PathSpan::current("tls handshake", Kind::Client);
        let handshake = self.tls.connect(self.server_name.clone(), tcp);
        let tls = tokio::time::timeout(self.tls_handshake_timeout, handshake).await;
        match &tls {
            Ok(Ok(tls)) => {
                let protocol = tls.get_ref().1.alpn_protocol().unwrap_or_default();
                span.text("tls.alpn", &String::from_utf8_lossy(protocol));
            }
            Ok(Err(e)) => span.error(e),
            Err(_) => span.error(&"TLS handshake timeout"),
        }
        span.end();
        let tls = match tls {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                // A serving certificate that failed verification is told with its
                // values (what it names, who issued it, when it expires).
                if let Some(diagnosis) = crate::transport::serving_certificate_error(&e) {
                    return Err(ConnectError::new(
                        format!("tls: {diagnosis}"),
                        Some(Box::new(diagnosis)),
                    ));
                }
                return Err(ConnectError::new(format!("tls: {e}"), Some(Box::new(e))));
            }
            Err(_) => {
                return Err(ConnectError::new("net/http: TLS handshake timeout", None));
            }
        };
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        Ok((TokioIo::new(Gathered::new(tls)), h2))
    }
}

#[cfg(test)]
mod tests {
    //! [`Gathered`] over a real loopback socket, which itself writes vectors.

    use std::io::IoSlice;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    #[tokio::test]
    async fn reports_no_vectored_writes_and_passes_every_byte_both_ways() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (client, (mut server, _)) = (client.unwrap(), accepted.unwrap());
        assert!(
            client.is_write_vectored(),
            "the socket itself writes vectors"
        );
        let mut gathered = Gathered::new(client);
        assert!(
            !gathered.is_write_vectored(),
            "hyper and h2 must see a stream without vectored writes"
        );

        // A caller that writes vectors anyway still gets them written whole.
        let head = [b'h'; 9];
        let body = [b'b'; 533];
        let mut sent = 0;
        while sent < head.len() + body.len() {
            let slices = if sent < head.len() {
                vec![IoSlice::new(&head[sent..]), IoSlice::new(&body)]
            } else {
                vec![IoSlice::new(&body[sent - head.len()..])]
            };
            sent += gathered.write_vectored(&slices).await.unwrap();
        }
        gathered.write_all(b"!").await.unwrap();
        gathered.flush().await.unwrap();
        let mut got = vec![0; head.len() + body.len() + 1];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(&got[..9], &head);
        assert_eq!(&got[9..542], &body);
        assert_eq!(got[542], b'!');

        server.write_all(b"answer").await.unwrap();
        drop(server);
        let mut answer = String::new();
        gathered.read_to_string(&mut answer).await.unwrap();
        assert_eq!(answer, "answer");
        gathered.shutdown().await.unwrap();
    }
}
