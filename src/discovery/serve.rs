//! Writing aggregated discovery answers (apiserver
//! `pkg/endpoints/discovery/aggregated/etag.go` `ServeHTTPWithETag`).

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};

use super::negotiate::AggregatedVersion;
use crate::body::Body;
use crate::status::Status;

/// `body` as the aggregated document in `version`, or 304 when `request_headers` carry
/// `If-None-Match` equal to `etag`. Both carry `ETag`, `Vary: Accept` and
/// `Cache-Control: public` (replacing the chain's `no-cache, private`).
///
/// The comparison is of the whole header value with the quoted ETag, as upstream's
/// `ServeHTTPWithETag` compares; a list of tags or a weak `W/` tag does not match.
pub(crate) fn aggregated_response(
    body: Bytes,
    etag: &HeaderValue,
    version: AggregatedVersion,
    request_headers: &HeaderMap,
) -> Response<Body> {
    let not_modified = request_headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|v| v.as_bytes() == etag.as_bytes());
    let mut res = if not_modified {
        let mut r = Response::new(Body::empty());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        let mut r = Response::new(Body::full(body));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(version.content_type()),
        );
        r
    };
    let h = res.headers_mut();
    h.insert(header::ETAG, etag.clone());
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public"));
    res
}

/// The 406 `Status` for an `Accept` with nothing this crate encodes (upstream
/// `NewNotAcceptableError`, listing what is accepted here).
pub(crate) fn not_acceptable() -> Response<Body> {
    Status::failure(
        StatusCode::NOT_ACCEPTABLE,
        "NotAcceptable",
        "only the following media types are accepted: application/json",
    )
    .into_response()
}
