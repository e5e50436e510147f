//! The future of [`forward`](super::forward): the backend call in flight, and what is
//! needed to turn its outcome into the client's response.
//!
//! `forward` rewrites the request before it returns this future, so the future holds the
//! call alone (the rewritten request inside it). An `async fn` would hold the request as
//! it came, as it went out and the call, each for its whole life: 896 bytes against
//! these 272, and the aggregator's boxed future of a proxied request 1,408 bytes against
//! 776 (`-Zprint-type-sizes`, x86_64). That is memory every request in flight holds, a
//! watch for as long as it runs.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Response, StatusCode};
use pin_project_lite::pin_project;

use super::{BodyFailure, unrequested_switch, upstream_response};
use crate::body::{Body, BoxError};
use crate::filter::polled_after_completion;
use crate::rt::Timeout;
use crate::span::PathSpan;
use crate::status::plain_text_error;

pin_project! {
    /// Where a forwarded request is: its call in flight, or an answer made without one.
    #[project = StateProjection]
    pub(super) enum State<F> {
        /// The rewritten request was handed to the backend client.
        /// Discovery's deadline around it when the request has one.
        Calling { #[pin] call: Timeout<F> },
        /// The request could not be rewritten; nothing was sent. Taken on the first poll.
        Answered { response: Option<Response<Body>> },
    }
}

pin_project! {
    /// Future of [`forward`](super::forward).
    pub(super) struct Forwarding<F> {
        #[pin]
        pub(super) state: State<F>,
        // Ended with the call's outcome; `None` after.
        pub(super) span: Option<PathSpan>,
        pub(super) authority: http::uri::Authority,
        pub(super) client_body: Option<BodyFailure>,
    }
}

impl<F> Future for Forwarding<F>
where
    F: Future<Output = Result<Response<Body>, BoxError>>,
{
    type Output = Response<Body>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response<Body>> {
        let this = self.project();
        let result = match this.state.project() {
            StateProjection::Calling { call } => {
                std::task::ready!(call.poll(cx)).unwrap_or_else(|elapsed| Err(elapsed.into()))
            }
            StateProjection::Answered { response } => {
                return Poll::Ready(response.take().unwrap_or_else(polled_after_completion));
            }
        };
        if let Some(span) = this.span.take() {
            match &result {
                Ok(res) => span.number(
                    "http.response.status_code",
                    i64::from(res.status().as_u16()),
                ),
                Err(e) => span.error(&crate::status::error_chain(&**e)),
            }
            span.end();
        }
        Poll::Ready(answer(result, this.authority, this.client_body.as_ref()))
    }
}

/// The client's response to the backend call's outcome `result`.
fn answer(
    result: Result<Response<Body>, BoxError>,
    authority: &http::uri::Authority,
    client_body: Option<&BodyFailure>,
) -> Response<Body> {
    match result {
        Ok(res) if res.status() == StatusCode::SWITCHING_PROTOCOLS => {
            unrequested_switch(authority, &res)
        }
        Ok(res) => upstream_response(res),
        // The client's own body broke the call (a malformed chunk, a reset upload): the
        // client's fault, answered 400 as Go's server answers a body it cannot read.
        Err(_) if client_body.is_some_and(|f| f.get().is_some()) => {
            let e = client_body.and_then(|f| f.get()).map_or("", String::as_str);
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
                res.extensions_mut()
                    .insert(super::Unreachable(std::sync::Arc::from(e)));
            }
            res
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::{Request, Response, StatusCode};
    use tokio::time::Instant;

    use crate::authn::UserInfo;
    use crate::body::{Body, BoxError};
    use crate::proxy::{DISCOVERY_TIMEOUT, forward};
    use crate::rt::Timer;
    use crate::transport::BackendClient;

    /// A backend that answers 200 after `delay`.
    fn answering_after(delay: Duration) -> BackendClient {
        BackendClient::new(tower::service_fn(move |_: Request<Body>| async move {
            tokio::time::sleep(delay).await;
            Ok::<_, BoxError>(Response::new(Body::empty()))
        }))
    }

    /// `path` forwarded to a backend answering after `delay`: the status, the body and
    /// how long it took.
    async fn forwarded(path: &str, delay: Duration) -> (StatusCode, String, Duration) {
        let user = UserInfo::new("alice", ["dev"]);
        let req = Request::get(path).body(Body::empty()).unwrap();
        let call = forward(
            answering_after(delay),
            &Timer::tokio(),
            &"10.0.0.5:4443".parse().unwrap(),
            &user,
            None,
            req,
        );
        // The future borrows nothing it was given: the caller's values may go first.
        drop(user);
        let started = Instant::now();
        let res = call.await;
        let took = started.elapsed();
        let status = res.status();
        let body = http_body_util::BodyExt::collect(res.into_body()).await;
        let text = String::from_utf8(body.unwrap().to_bytes().to_vec()).unwrap();
        (status, text, took)
    }

    /// Upstream's `NewRequestForProxy` gives discovery requests (`/apis/<g>/<v>`) a 5 s
    /// deadline and no other request one: over it, 503 with Go's `context deadline
    /// exceeded`; an answer before it, or any answer to a resource request, passes.
    #[tokio::test(start_paused = true)]
    async fn only_a_discovery_request_has_the_five_second_deadline() {
        let discovery = "/apis/metrics.k8s.io/v1beta1";
        let (status, text, took) = forwarded(discovery, Duration::from_secs(60)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            text,
            "error trying to reach service: context deadline exceeded\n"
        );
        assert_eq!(took, DISCOVERY_TIMEOUT);

        let in_time = DISCOVERY_TIMEOUT - Duration::from_millis(1);
        let (status, _, took) = forwarded(discovery, in_time).await;
        assert_eq!((status, took), (StatusCode::OK, in_time));

        let nodes = "/apis/metrics.k8s.io/v1beta1/nodes";
        let (status, _, took) = forwarded(nodes, Duration::from_secs(60)).await;
        assert_eq!((status, took), (StatusCode::OK, Duration::from_secs(60)));
    }
}
