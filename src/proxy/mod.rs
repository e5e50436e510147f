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

pub use crate::gocompat::url::encode_query;
pub use crate::identity::{escape_extra_key, set_identity_headers};
pub use headers::is_upgrade_request;
#[cfg(fuzzing)]
pub(crate) use request::escaped_path_and_query;
pub use request::{upstream_request, upstream_uri};
pub use response::{REDIRECT_REJECTED, upstream_response};
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
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
    let (req, client_body) = watch_request_body(req);
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
        // The client's own body broke the call (a malformed chunk, a reset upload): the
        // client's fault, answered 400 as Go's server answers a body it cannot read.
        Err(_) if client_body.as_ref().is_some_and(|f| f.get().is_some()) => {
            let e = client_body
                .as_ref()
                .and_then(|f| f.get())
                .map_or("", String::as_str);
            tracing::debug!(%authority, error = %e, "the request body could not be read");
            crate::status::Status::failure(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                format!("the request body could not be read: {e}"),
            )
            .into_response()
        }
        Err(e) => {
            let text = crate::status::error_chain(&*e);
            tracing::info!(%authority, error = %text, "backend unreachable");
            let mut res = plain_text_error(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("error trying to reach service: {text}"),
            );
            if crate::transport::ConnectError::find(&*e).is_some() {
                res.extensions_mut().insert(Unreachable(text));
            }
            res
        }
    }
}

/// Response extension of a 503 whose backend was never reached (a
/// [`ConnectError`](crate::transport::ConnectError)): the error text, for the aggregator
/// to mark the APIService unavailable.
#[derive(Debug, Clone)]
pub(crate) struct Unreachable(pub(crate) String);

/// Where a failure of the client's request body is recorded.
type BodyFailure = std::sync::Arc<std::sync::OnceLock<String>>;

/// Wraps a request body that is not empty so that an error reading it is recorded: the
/// upstream call then fails with a transport error that no longer says whose fault it was
/// (over HTTP/2 the stream is just reset).
fn watch_request_body(req: Request<Body>) -> (Request<Body>, Option<BodyFailure>) {
    use http_body::Body as _;
    if req.body().is_end_stream() {
        return (req, None);
    }
    let failure = BodyFailure::default();
    let record = failure.clone();
    let req = req.map(|body| {
        Body::new(http_body_util::BodyExt::map_err(
            body,
            move |e: crate::body::BoxError| {
                let _ = record.set(crate::status::error_chain(&*e));
                e
            },
        ))
    });
    (req, Some(failure))
}

/// True for `/apis/<group>/<version>` (exactly three segments): the non-resource
/// discovery request upstream gives a 5 s deadline.
fn is_discovery_path(path: &str) -> bool {
    let trimmed = path.trim_matches('/');
    trimmed.starts_with("apis/") && trimmed.split('/').count() == 3
}
