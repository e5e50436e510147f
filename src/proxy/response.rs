//! The response from the backend, as the upgrade-aware proxy returns it.

use http::{HeaderValue, Response, StatusCode, header};

use super::headers::remove_hop_by_hop;
use crate::body::Body;

/// The body of the 502 that replaces a backend redirect (apimachinery `upgradeaware.go`):
/// 70 bytes, no trailing newline, as upstream writes it.
pub const REDIRECT_REJECTED: &str =
    "the backend attempted to redirect this request, which is not permitted";

/// Rewrites a backend response for the client.
///
/// A status 300–399 carrying a non-empty `Location` becomes 502 with
/// [`REDIRECT_REJECTED`] as `text/plain`, no trailing newline (CVE-2022-3172: a backend
/// must not send clients, with their credentials, elsewhere); a 304 without `Location`
/// passes. Hop-by-hop and `Access-Control-*` CORS headers are removed; the body streams.
///
/// This is kube-apiserver's default `--aggregator-reject-forwarding-redirect=true`; the
/// rule exists because a client following the redirect would send its credentials to
/// wherever the backend pointed. Status, other headers and the body are the backend's.
///
/// ```
/// use http::{Response, StatusCode};
/// use kube_aggregator::Body;
/// use kube_aggregator::proxy::{REDIRECT_REJECTED, upstream_response};
///
/// let redirect = Response::builder().status(302).header("location", "https://evil.example/")
///     .body(Body::empty()).unwrap();
/// let res = upstream_response(redirect);
/// assert_eq!(res.status(), StatusCode::BAD_GATEWAY);
/// assert_eq!(REDIRECT_REJECTED, "the backend attempted to redirect this request, which is not permitted");
///
/// let ok = Response::builder().header("access-control-allow-origin", "*").body(Body::empty()).unwrap();
/// assert!(upstream_response(ok).headers().is_empty());
/// ```
pub fn upstream_response(mut res: Response<Body>) -> Response<Body> {
    let redirect = res.status().is_redirection()
        && res
            .headers()
            .get(header::LOCATION)
            .is_some_and(|l| !l.as_bytes().is_empty());
    if redirect {
        let mut out = Response::new(Body::full(REDIRECT_REJECTED));
        *out.status_mut() = StatusCode::BAD_GATEWAY;
        out.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        out.headers_mut().insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        return out;
    }
    let h = res.headers_mut();
    remove_hop_by_hop(h);
    // Few responses carry any: one look at the names present before four removals.
    if h.keys().any(|name| CORS.contains(name)) {
        for name in &CORS {
            h.remove(name);
        }
    }
    res
}

/// The CORS headers upstream removes from a backend's response.
const CORS: [header::HeaderName; 4] = [
    header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
    header::ACCESS_CONTROL_ALLOW_HEADERS,
    header::ACCESS_CONTROL_ALLOW_METHODS,
    header::ACCESS_CONTROL_ALLOW_ORIGIN,
];

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn backend(status: u16, location: Option<&str>) -> Response<Body> {
        let mut r = Response::new(Body::full("some data"));
        *r.status_mut() = StatusCode::from_u16(status).unwrap();
        if let Some(l) = location {
            r.headers_mut()
                .insert(header::LOCATION, HeaderValue::from_str(l).unwrap());
        }
        r
    }

    fn body(r: Response<Body>) -> String {
        let b = futures_util::FutureExt::now_or_never(r.into_body().collect())
            .unwrap()
            .unwrap()
            .to_bytes();
        String::from_utf8(b.to_vec()).unwrap()
    }

    #[test]
    fn redirect_rejection_vectors() {
        let r = upstream_response(backend(200, None));
        assert_eq!(r.status(), 200);
        assert_eq!(body(r), "some data");
        for status in [301, 304] {
            let r = upstream_response(backend(status, Some("/")));
            assert_eq!(r.status(), 502);
            assert_eq!(body(r), REDIRECT_REJECTED);
        }
        let r = upstream_response(backend(304, None));
        assert_eq!(r.status(), 304);
        assert_eq!(REDIRECT_REJECTED.len(), 70);
    }

    #[test]
    fn cors_headers_are_removed() {
        let mut r = backend(200, None);
        r.headers_mut()
            .insert("access-control-allow-origin", HeaderValue::from_static("*"));
        r.headers_mut()
            .insert("content-type", HeaderValue::from_static("application/json"));
        let r = upstream_response(r);
        assert!(!r.headers().contains_key("access-control-allow-origin"));
        assert!(r.headers().contains_key("content-type"));
    }
}
