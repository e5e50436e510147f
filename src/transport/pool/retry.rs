//! Which failed attempts may be sent again, and the copy of a request that makes that
//! possible.

use http::{Method, Request};

use crate::body::{Body, BoxError};

/// Why one attempt failed, and whether (and where) it may be sent again.
pub(super) struct AttemptError {
    pub(super) error: BoxError,
    pub(super) retry: Retry,
}

/// Whether a failed attempt proves the backend never processed the request, and so where
/// a replayable request goes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Retry {
    /// It may have been processed: never sent again.
    No,
    /// Refused for a stream slot (`REFUSED_STREAM`): any connection with room.
    Elsewhere,
    /// Its connection went away under it (GOAWAY, closed): a new connection.
    Fresh,
}

/// The request again, for a second attempt: only for requests that may be replayed.
pub(super) fn replay_copy(req: &Request<Body>) -> Option<Request<()>> {
    use http_body::Body as _;
    let idempotent = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !(idempotent && req.body().is_end_stream()) {
        return None;
    }
    let mut copy = Request::new(());
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    Some(copy)
}
