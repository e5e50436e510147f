//! Upgrade requests (SPDY for exec/attach/port-forward, WebSocket), with the rules that
//! fixed CVE-2018-1002105 and CVE-2020-8559 (apimachinery
//! [`pkg/util/proxy/upgradeaware.go`](https://github.com/kubernetes/apimachinery/blob/master/pkg/util/proxy/upgradeaware.go)):
//!
//! - only HTTP/1.1 connections are taken over; an HTTP/2 request gets 503;
//! - the backend's response head decides: 101 splices the two connections; any other
//!   status below 400 is never relayed (a redirect or 200 must not reach the client as if
//!   it were the upgrade) and becomes 503 `invalid upgrade response: status code <n>`;
//!   400 and above is relayed verbatim and the client connection is closed, so the socket
//!   can never become a tunnel on the caller's credentials.

use std::net::SocketAddr;

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode, Version};
use hyper_util::rt::TokioIo;
use tower::ServiceExt;

use super::request::upstream_request;
use crate::authn::UserInfo;
use crate::body::Body;
use crate::rt::Executor;
use crate::status::{error_chain, plain_text_error};
use crate::transport::BackendClient;

/// Proxies an upgrade request through `client` (an HTTP/1.1-only backend client) and,
/// on 101, splices the client and backend connections on `executor` until either closes.
///
/// `req` must still carry hyper's `OnUpgrade` (served by a hyper HTTP/1.1 connection
/// with upgrades enabled, as the [`server`](crate::server) module's is), and `client`'s
/// 101 responses must carry the backend's
/// ([`Transport::upgrade_client`](crate::transport::Transport::upgrade_client)). The
/// request is rewritten as [`upstream_request`] does, then `Connection: Upgrade` and the
/// client's `Upgrade` header are put back. Answers:
///
/// - 101 with the backend's headers and an empty body, the splice running on `executor`
///   (bytes copied both ways; either side closing ends it);
/// - 503 `request connection cannot be hijacked: HTTP/2.0` for a request not on HTTP/1.1;
/// - 503 `error trying to reach service: ...` when the backend cannot be reached;
/// - 503 `invalid upgrade response: status code <n>` for any other status below 400;
/// - the backend's answer with `Connection: close` for 400 and above.
pub async fn forward_upgrade(
    client: BackendClient,
    executor: &Executor,
    authority: &http::uri::Authority,
    user: &UserInfo,
    remote_addr: Option<SocketAddr>,
    mut req: Request<Body>,
) -> Response<Body> {
    if req.version() != Version::HTTP_11 {
        let text = format!("request connection cannot be hijacked: {:?}", req.version());
        return plain_text_error(StatusCode::SERVICE_UNAVAILABLE, &text);
    }
    let client_upgrade = hyper::upgrade::on(&mut req);
    let upgrade = req.headers().get(header::UPGRADE).cloned();
    let mut upstream = match upstream_request(req, authority, user, remote_addr) {
        Ok(r) => r,
        Err(e) => return super::unsendable(authority, &e),
    };
    // The rewrite removed hop-by-hop headers; an upgrade needs these two back.
    upstream
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Some(u) = upgrade {
        upstream.headers_mut().insert(header::UPGRADE, u);
    }
    let mut res = match client.oneshot(upstream).await {
        Ok(res) => res,
        Err(e) => {
            let text = format!("error trying to reach service: {}", error_chain(&*e));
            return plain_text_error(StatusCode::SERVICE_UNAVAILABLE, &text);
        }
    };
    let status = res.status();
    if status == StatusCode::SWITCHING_PROTOCOLS {
        let backend_upgrade = hyper::upgrade::on(&mut res);
        executor.spawn(async move {
            let (client_io, backend_io) = match (client_upgrade.await, backend_upgrade.await) {
                (Ok(c), Ok(b)) => (c, b),
                (c, b) => {
                    tracing::debug!(client = ?c.err(), backend = ?b.err(), "upgrade did not complete");
                    return;
                }
            };
            let mut client_io = TokioIo::new(client_io);
            let mut backend_io = TokioIo::new(backend_io);
            if let Err(e) = tokio::io::copy_bidirectional(&mut client_io, &mut backend_io).await {
                tracing::debug!(error = %e, "upgraded connection ended");
            }
        });
        let (parts, _) = res.into_parts();
        return Response::from_parts(parts, Body::empty());
    }
    if status.as_u16() < 400 {
        // CVE-2020-8559: a non-101 success or redirect is never relayed.
        let text = format!("invalid upgrade response: status code {}", status.as_u16());
        return plain_text_error(StatusCode::SERVICE_UNAVAILABLE, &text);
    }
    // CVE-2018-1002105: relay the error, then close the client connection.
    res.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    res
}
