//! How a test's TLS server closes a connection whose handshake it refused (a client
//! certificate it does not trust), shared by the tests that check the cause named for
//! that refusal.

use std::time::Duration;

use tokio::io::AsyncReadExt as _;
use tokio::net::TcpStream;

/// Closes `tcp` after reading what the client already sent, until its end or for at most
/// 2 s. After its side of a TLS 1.3 handshake the client sends at once (the HTTP/2
/// preface); closing a socket with unread bytes sends a reset instead of a FIN, and a
/// reset can discard the TLS alert before the client reads it, leaving it only a broken
/// pipe to report.
pub(crate) async fn drain_then_close(mut tcp: TcpStream) {
    let mut buf = [0u8; 4096];
    let drain = async { while matches!(tcp.read(&mut buf).await, Ok(n) if n > 0) {} };
    let _ = tokio::time::timeout(Duration::from_secs(2), drain).await;
}
