//! The reverse proxy to extension servers: the request and response rewriting of
//! kube-aggregator
//! [`pkg/apiserver/handler_proxy.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/handler_proxy.go) and
//! apimachinery's upgrade-aware proxy
//! ([`pkg/util/proxy/upgradeaware.go`](https://github.com/kubernetes/apimachinery/blob/master/pkg/util/proxy/upgradeaware.go),
//! [`pkg/util/proxy/transport.go`](https://github.com/kubernetes/apimachinery/blob/master/pkg/util/proxy/transport.go)), the
//! identity headers of client-go
//! ([`transport/round_trippers.go`](https://github.com/kubernetes/client-go/blob/master/transport/round_trippers.go)), and
//! [`forward`], which sends a request through an APIService's [`BackendClient`].
//!
//! Request side: upstream URL `https://<resolved>` + the decoded incoming path re-escaped +
//! the query re-encoded Go-style; hop-by-hop headers, credentials, impersonation and
//! client-supplied identity headers removed; the caller's identity added as
//! `X-Remote-User`, `X-Remote-Uid`, one `X-Remote-Group` per group,
//! `X-Remote-Extra-<escaped key>`; `X-Forwarded-For/Proto/Uri/Host` set.
//! Response side: a 3xx with a `Location` becomes 502 (the CVE-2022-3172 fix); hop-by-hop
//! and CORS headers removed; the body streams.
//!
//! The functions are usable alone, by a host that proxies by other means and wants the
//! exact upstream rewrite; the [`AggregatorLayer`](crate::AggregatorLayer) calls
//! [`forward`] (or [`forward_upgrade`]) for every remote APIService's request.
//!
//! ```
//! use http::Request;
//! use kube_aggregator::Body;
//! use kube_aggregator::authn::UserInfo;
//! use kube_aggregator::proxy::upstream_request;
//!
//! let req = Request::get("/apis/metrics.k8s.io/v1beta1/nodes?watch=1&labelSelector=a%3Db")
//!     .header("authorization", "Bearer secret")
//!     .header("x-remote-user", "system:admin")
//!     .body(Body::empty())
//!     .unwrap();
//! let user = UserInfo::new("alice", ["dev", "system:authenticated"]);
//! let out = upstream_request(req, &"10.0.0.5:4443".parse().unwrap(), &user,
//!     Some("192.0.2.7:51000".parse().unwrap())).unwrap();
//!
//! // The query is re-encoded with sorted keys, as Go's `url.Values.Encode`.
//! assert_eq!(out.uri(), "https://10.0.0.5:4443/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=a%3Db&watch=1");
//! let h = out.headers();
//! assert!(!h.contains_key("authorization"));       // credentials never travel
//! assert_eq!(h["x-remote-user"], "alice");          // the caller, not what it claimed
//! assert_eq!(h.get_all("x-remote-group").iter().count(), 2);
//! assert_eq!(h["x-forwarded-for"], "192.0.2.7");
//! assert_eq!(h["x-forwarded-host"], "10.0.0.5:4443");
//! ```
//!
//! Floor 6 of the import order (docs/architecture.md): uses `authn`, `body`, `filter`,
//! `gocompat`, `identity`, `rt`, `span`, `status`, `tenancy`, `transport`; used by
//! `aggregator`, `fuzz_logic`.

mod forwarding;
mod headers;
mod request;
mod response;
#[cfg(feature = "tokio")]
mod upgrade;

pub use crate::gocompat::url::encode_query;
pub use crate::identity::{InvalidIdentityHeader, escape_extra_key, set_identity_headers};
pub use headers::is_upgrade_request;
#[cfg(fuzzing)]
pub(crate) use request::escaped_path_and_query;
pub use request::{UpstreamRequestError, upstream_request, upstream_uri};
pub use response::{REDIRECT_REJECTED, upstream_response};
#[cfg(feature = "tokio")]
pub use upgrade::forward_upgrade;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use tower::ServiceExt;

use crate::authn::UserInfo;
use crate::body::Body;
use crate::rt::Timer;
use crate::span::{Kind, PathSpan};
use crate::status::plain_text_error;
use crate::transport::BackendClient;

/// The deadline of discovery requests (`/apis/<group>/<version>`, exactly three path
/// segments), as apiserver's `NewRequestForProxy` sets it
/// ([`pkg/util/proxy/proxy.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/util/proxy/proxy.go)). Going over it
/// answers 503 with `context deadline exceeded` in the body.
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends `req` to the backend at `authority` as `user`, and returns the rewritten
/// response. Never fails: an unreachable backend is 503
/// `error trying to reach service: <error>`; a discovery request over 5 s is 503 with
/// `context deadline exceeded`; a `user` that cannot be written whole as front-proxy
/// headers (a CR or LF in a name, group or extra) is 503 naming the header, and nothing
/// is sent.
///
/// `authority` is the resolved `host:port`; `remote_addr` the client's address, appended
/// to `X-Forwarded-For`. The request is rewritten with [`upstream_request`] and the
/// response with [`upstream_response`]; bodies stream both ways, so a watch flows as the
/// backend writes it. Only discovery requests get a deadline here: everything else is
/// bounded by the [`timeout`](crate::timeout) layer, or not at all when long-running.
///
/// A request body that fails while it is being sent (a malformed chunk, a client reset)
/// is answered 400 `BadRequest`, not 503: the fault is the client's. A `101 Switching
/// Protocols` from the backend is answered 503 (the request asked for no upgrade).
/// Upgrade requests go through [`forward_upgrade`] instead.
///
/// The request is rewritten when `forward` is called (a discovery request's deadline
/// starts then); the future it returns borrows nothing and holds only the call in
/// flight.
///
/// ```
/// use http::{Request, Response, StatusCode};
/// use kube_aggregator::Body;
/// use kube_aggregator::authn::UserInfo;
/// use kube_aggregator::proxy::forward;
/// use kube_aggregator::rt::Timer;
/// use kube_aggregator::transport::BackendClient;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// // A backend that answers with what it was told about the caller.
/// let backend = BackendClient::new(tower::service_fn(|req: Request<Body>| async move {
///     let who = req.headers()["x-remote-user"].to_str().unwrap().to_owned();
///     Ok(Response::new(Body::full(format!("{} {}", req.uri(), who))))
/// }));
/// let req = Request::get("/apis/metrics.k8s.io/v1beta1/nodes").body(Body::empty()).unwrap();
/// let res = forward(backend, &Timer::tokio(), &"10.0.0.5:4443".parse().unwrap(),
///     &UserInfo::new("alice", ["dev"]), None, req).await;
/// assert_eq!(res.status(), StatusCode::OK);
///
/// // A backend that cannot be reached: Go's plain-text 503.
/// let down = BackendClient::new(tower::service_fn(|_: Request<Body>| async {
///     Err::<Response<Body>, _>("dial tcp 10.0.0.5:4443: connect: connection refused".into())
/// }));
/// let req = Request::get("/apis/metrics.k8s.io/v1beta1/nodes").body(Body::empty()).unwrap();
/// let res = forward(down, &Timer::tokio(), &"10.0.0.5:4443".parse().unwrap(),
///     &UserInfo::new("alice", ["dev"]), None, req).await;
/// assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
/// # }
/// ```
pub fn forward(
    client: BackendClient,
    timer: &Timer,
    authority: &http::uri::Authority,
    user: &UserInfo,
    remote_addr: Option<SocketAddr>,
    req: Request<Body>,
) -> impl Future<Output = Response<Body>> + Send + 'static {
    let discovery = is_discovery_path(req.uri().path());
    // Until the response head (its first byte); a dial's spans go under it.
    let span = PathSpan::start(req.extensions(), "proxy", Kind::Client);
    span.text("server.address", authority.as_str());
    let (req, client_body) = watch_request_body(req);
    let state = match upstream_request(req, authority, user, remote_addr) {
        Ok(mut upstream) => {
            span.inject(upstream.headers_mut());
            let deadline = discovery.then_some(DISCOVERY_TIMEOUT);
            forwarding::State::Calling {
                call: timer.timeout_if(deadline, span.within(client.oneshot(upstream))),
            }
        }
        Err(e) => {
            span.error(&e);
            forwarding::State::Answered {
                response: Some(unsendable(authority, &e)),
            }
        }
    };
    forwarding::Forwarding {
        state,
        span: Some(span),
        authority: authority.clone(),
        client_body,
    }
}

/// The answer to a request [`upstream_request`] refused to rewrite: 503 with Go's text
/// (`error trying to reach service: net/http: invalid header field value for
/// "X-Remote-User"`), as the aggregator answers when its transport refuses the request.
/// Nothing was sent.
pub(crate) fn unsendable(
    authority: &http::uri::Authority,
    e: &UpstreamRequestError,
) -> Response<Body> {
    if let UpstreamRequestError::Identity(e) = e {
        tracing::warn!(%authority, header = e.header(), "the caller's identity cannot be written as front-proxy headers; request not sent");
    }
    plain_text_error(
        StatusCode::SERVICE_UNAVAILABLE,
        &format!("error trying to reach service: {e}"),
    )
}

/// The answer to a backend's `101 Switching Protocols` to a request that asked for no
/// upgrade (RFC 9110 §15.2.2 forbids it): 503 with the error Go's `httputil.ReverseProxy`
/// hands the aggregator's responder (`handleUpgradeResponse` in `net/http/httputil`
/// `reverseproxy.go`): `backend tried to switch protocol "<p>" when "" was requested`,
/// or, when the 101 names no protocol, `internal error: 101 switching protocols response
/// with non-writable body`. The backend's connection is dropped with the response.
fn unrequested_switch(authority: &http::uri::Authority, res: &Response<Body>) -> Response<Body> {
    let offered = headers::upgrade_type(res.headers());
    let text = if offered.is_empty() {
        "internal error: 101 switching protocols response with non-writable body".to_owned()
    } else if !offered.bytes().all(|b| (b' '..=b'~').contains(&b)) {
        format!(
            "backend tried to switch to invalid protocol {}",
            crate::gocompat::quote(&offered)
        )
    } else {
        format!(
            "backend tried to switch protocol {} when \"\" was requested",
            crate::gocompat::quote(&offered)
        )
    };
    tracing::info!(%authority, error = %text, "the backend switched protocols unasked");
    plain_text_error(StatusCode::SERVICE_UNAVAILABLE, &text)
}

/// Response extension of a 503 whose backend was never reached (a
/// [`ConnectError`](crate::transport::ConnectError)): the error text, for the aggregator
/// to mark the APIService unavailable, with its cause. Taken out before the response
/// leaves the stack.
#[derive(Debug, Clone)]
pub(crate) struct Unreachable(pub(crate) std::sync::Arc<dyn std::error::Error + Send + Sync>);

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
    trimmed.starts_with("apis/") && trimmed.bytes().filter(|&b| b == b'/').count() == 2
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The three texts of Go's `handleUpgradeResponse` for a switch nobody asked for.
    #[tokio::test]
    async fn an_unrequested_switch_is_named_as_go_names_it() {
        let authority = "10.0.0.5:4443".parse().unwrap();
        let text = async |headers: &[(&str, &[u8])]| {
            let mut res = Response::new(Body::empty());
            *res.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
            for (name, value) in headers {
                res.headers_mut().append(
                    http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    http::HeaderValue::from_bytes(value).unwrap(),
                );
            }
            let answer = unrequested_switch(&authority, &res);
            assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
            let body = http_body_util::BodyExt::collect(answer.into_body()).await;
            String::from_utf8(body.unwrap().to_bytes().to_vec()).unwrap()
        };
        assert_eq!(
            text(&[
                ("connection", b"keep-alive, Upgrade"),
                ("upgrade", b"SPDY/3.1")
            ])
            .await,
            "backend tried to switch protocol \"SPDY/3.1\" when \"\" was requested\n"
        );
        // An `Upgrade` that `Connection` does not list names no protocol.
        for headers in [&[][..], &[("upgrade", &b"websocket"[..])][..]] {
            assert_eq!(
                text(headers).await,
                "internal error: 101 switching protocols response with non-writable body\n"
            );
        }
        assert_eq!(
            text(&[("connection", b"upgrade"), ("upgrade", b"web\tsocket")]).await,
            "backend tried to switch to invalid protocol \"web\\tsocket\"\n"
        );
    }
}
