//! The reverse proxy to extension servers: the request and response rewriting of
//! kube-aggregator `handler_proxy.go` and apimachinery's upgrade-aware proxy
//! (docs/upstream-behaviour.md §3.2–§3.6), and [`forward`], which sends a request through an APIService's
//! [`BackendClient`].
//!
//! Request side: upstream URL `https://<resolved>` + the decoded incoming path re-escaped +
//! the query re-encoded Go-style; hop-by-hop headers, credentials, impersonation and
//! client-supplied identity headers removed; the caller's identity added as
//! `X-Remote-User`, `X-Remote-Uid`, one `X-Remote-Group` per group,
//! `X-Remote-Extra-<escaped key>`; `X-Forwarded-For/Proto/Uri/Host` set.
//! Response side: a 3xx with a `Location` becomes 502 (the CVE-2022-3172 fix); hop-by-hop
//! and CORS headers removed; the body streams.

mod headers;
mod request;
mod response;
#[cfg(feature = "tokio")]
mod upgrade;

pub use headers::{escape_extra_key, is_upgrade_request, set_identity_headers};
#[cfg(fuzzing)]
pub(crate) use request::escaped_path_and_query;
pub use request::{encode_query, upstream_request, upstream_uri};
pub use response::{REDIRECT_REJECTED, upstream_response};
#[cfg(feature = "tokio")]
pub use upgrade::forward_upgrade;

use std::net::SocketAddr;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use tower::ServiceExt;

use crate::authn::UserInfo;
use crate::body::Body;
use crate::rt::Timer;
use crate::status::plain_text_error;
use crate::transport::BackendClient;

/// The deadline of discovery requests (`/apis/<group>/<version>`), docs/upstream-behaviour.md §3.6.
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends `req` to the backend at `authority` as `user`, and returns the rewritten
/// response. Never fails: an unreachable backend is 503
/// `error trying to reach service: <error>`; a discovery request over 5 s is 503 with
/// `context deadline exceeded`.
pub async fn forward(
    client: BackendClient,
    timer: &Timer,
    authority: &http::uri::Authority,
    user: &UserInfo,
    remote_addr: Option<SocketAddr>,
    req: Request<Body>,
) -> Response<Body> {
    let discovery = is_discovery_path(req.uri().path());
    let upstream = match upstream_request(req, authority, user, remote_addr) {
        Ok(r) => r,
        Err(e) => {
            return plain_text_error(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("error trying to reach service: {e}"),
            );
        }
    };
    let call = client.oneshot(upstream);
    let result = if discovery {
        match timer.timeout(DISCOVERY_TIMEOUT, call).await {
            Ok(r) => r,
            Err(elapsed) => Err(elapsed.into()),
        }
    } else {
        call.await
    };
    match result {
        Ok(res) => upstream_response(res),
        Err(e) => {
            let text = crate::status::error_chain(&*e);
            tracing::info!(%authority, error = %text, "backend unreachable");
            plain_text_error(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("error trying to reach service: {text}"),
            )
        }
    }
}

/// True for `/apis/<group>/<version>` (exactly three segments): the non-resource
/// discovery request upstream gives a 5 s deadline.
fn is_discovery_path(path: &str) -> bool {
    let trimmed = path.trim_matches('/');
    trimmed.starts_with("apis/") && trimmed.split('/').count() == 3
}
