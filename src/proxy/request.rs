//! The upstream request (kube-aggregator `handler_proxy.go`, apiserver `proxy.go`): the
//! URI Go would send, and the headers it would rewrite.

use std::net::SocketAddr;

use super::headers::remove_hop_by_hop;
use crate::authn::UserInfo;
use crate::body::Body;
use crate::gocompat::url;
use crate::identity::{InvalidIdentityHeader, SharedValues, identity_len, write_identity_headers};
use http::header::{self, HeaderName, HeaderValue};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Uri, Version};

/// The upstream URI: `https://<authority>` + the decoded request path re-escaped Go-style
/// (so `%2F` becomes `/`) + the query re-encoded with sorted keys.
///
/// Upstream forwards `req.URL.Path` (decoded; no `RawPath` is kept) and
/// `req.URL.Query().Encode()`, so this is what an extension server sees behind
/// kube-apiserver: `/apis/g/v/foo%2Fbar` arrives as `/apis/g/v/foo/bar`, `?q=a%20b` as
/// `?q=a+b`, and an empty query (`/a?`) disappears. The path is never prefixed or
/// stripped.
///
/// # Errors
///
/// Only when the result is not a valid URI (an `authority` that does not fit).
pub fn upstream_uri(uri: &Uri, authority: &Authority) -> Result<Uri, http::Error> {
    // The common case: nothing to decode or escape and no query to re-encode, so the
    // path is already what Go would send and its buffer is shared, not copied.
    if uri.query().is_none()
        && !uri.path().is_empty()
        && uri.path().bytes().all(url::path_byte_kept)
    {
        if let Some(pq) = uri.path_and_query() {
            return Uri::builder()
                .scheme(Scheme::HTTPS)
                .authority(authority.clone())
                .path_and_query(pq.clone())
                .build();
        }
    }
    Uri::builder()
        .scheme(Scheme::HTTPS)
        .authority(authority.clone())
        .path_and_query(PathAndQuery::try_from(escaped_path_and_query(uri))?)
        .build()
}

/// The upstream path and query, always computed the long way: the decoded path
/// re-escaped as Go's `EscapedPath` (`/` when empty), then `?` and the re-encoded query
/// when it is not empty. [`upstream_uri`] skips this when it would change nothing.
pub(crate) fn escaped_path_and_query(uri: &Uri) -> String {
    let mut pq = url::reescape_path(uri.path());
    if pq.is_empty() {
        pq.push('/');
    }
    if let Some(q) = uri.query() {
        let encoded = url::encode_query(q);
        if !encoded.is_empty() {
            pq.push('?');
            pq.push_str(&encoded);
        }
    }
    pq
}

// The forwarding headers Go's reverse proxy and apimachinery's transport set.
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_URI: HeaderName = HeaderName::from_static("x-forwarded-uri");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// Rewrites a client request into the request sent to the backend at `authority`.
///
/// Removes hop-by-hop headers, `Host`, credentials, impersonation, client-supplied
/// identity headers and a client's tenant header
/// ([`TENANT_HEADER`](crate::tenancy::TENANT_HEADER)); writes `user` as front-proxy headers; appends the client IP to
/// `X-Forwarded-For`; sets `X-Forwarded-Proto: https`, `X-Forwarded-Uri` (the cleaned
/// escaped path) and `X-Forwarded-Host` (the backend's host:port, as upstream).
///
/// # Errors
///
/// [`UpstreamRequestError::Uri`] when the rewritten URI is not valid;
/// [`UpstreamRequestError::Identity`] when `user` cannot be written whole as front-proxy
/// headers (see [`set_identity_headers`](crate::proxy::set_identity_headers)): such a
/// request must not be sent at all.
///
/// `Audit-Id`, `User-Agent` and every other header pass through. The version is set to
/// HTTP/1.1: the backend client chooses HTTP/2 per connection by ALPN.
pub fn upstream_request(
    req: Request<Body>,
    authority: &Authority,
    user: &UserInfo,
    remote_addr: Option<SocketAddr>,
) -> Result<Request<Body>, UpstreamRequestError> {
    let (mut parts, body) = req.into_parts();
    // Every value written below is cut from one buffer (see `SharedValues`).
    let path = parts.uri.path();
    let mut values = SharedValues::with_capacity(
        identity_len(user) + path.len() + authority.as_str().len() + 48,
    );
    let forwarded_uri = forwarded_uri(path, &mut values);
    parts.uri = upstream_uri(&parts.uri, authority)?;
    // The pooled client picks HTTP/2 or HTTP/1.1 per connection by ALPN.
    parts.version = Version::HTTP_11;
    let h = &mut parts.headers;
    remove_hop_by_hop(h);
    h.remove(header::HOST);
    // Room for the identity and X-Forwarded-* headers, so the map grows at most once.
    let extra_values: usize = user.extra.values().map(Vec::len).sum();
    h.reserve(6 + user.groups.len() + extra_values);
    write_identity_headers(h, user, &mut values)?;
    // The tenant header is the aggregator's to write (a tenant's client adds it behind
    // this): a client's own never reaches a backend, whether tenants are mounted or not.
    h.remove(crate::tenancy::TENANT_HEADER);
    if let Some(addr) = remote_addr {
        let value = match h.entry(X_FORWARDED_FOR) {
            header::Entry::Occupied(prior) => {
                let prior: Vec<&str> = prior.iter().filter_map(|v| v.to_str().ok()).collect();
                HeaderValue::from_str(&format!("{}, {}", prior.join(", "), addr.ip())).ok()
            }
            header::Entry::Vacant(_) => values.value_with(|buf| write_ip(buf, addr.ip())),
        };
        if let Some(v) = value {
            h.insert(X_FORWARDED_FOR, v);
        }
    }
    h.insert(X_FORWARDED_PROTO, HeaderValue::from_static("https"));
    if let Some(v) = forwarded_uri {
        h.insert(X_FORWARDED_URI, v);
    }
    if let Some(v) = values.value(authority.as_str().as_bytes()) {
        h.insert(X_FORWARDED_HOST, v);
    }
    Ok(Request::from_parts(parts, body))
}

/// Why [`upstream_request`] could not rewrite a request; either way nothing may be sent.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamRequestError {
    /// The rewritten URI is not valid (an authority that does not fit).
    #[error(transparent)]
    Uri(#[from] http::Error),
    /// The caller's identity cannot be written whole as front-proxy headers.
    #[error(transparent)]
    Identity(#[from] InvalidIdentityHeader),
}

/// Writes an IP address as header text to `buf`; IPv4 (the common case) without the
/// formatting machinery, which costs more than the rest of the header rewrite.
fn write_ip(buf: &mut bytes::BytesMut, ip: std::net::IpAddr) {
    match ip {
        std::net::IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().iter().enumerate() {
                if i > 0 {
                    buf.extend_from_slice(b".");
                }
                buf.extend_from_slice(itoa::Buffer::new().format(*octet).as_bytes());
            }
        }
        std::net::IpAddr::V6(v6) => buf.extend_from_slice(v6.to_string().as_bytes()),
    }
}

/// The value of `X-Forwarded-Uri`: [`clean_path`] of `path`, cut from `values`.
fn forwarded_uri(path: &str, values: &mut SharedValues) -> Option<HeaderValue> {
    values.value(clean_path(path).as_bytes())
}

/// `path.Join`-style cleaning of an escaped path, keeping a trailing `/`: empty and `.`
/// segments dropped, `..` removing the one before (never above the root). The value of
/// `X-Forwarded-Uri`.
fn clean_path(path: &str) -> std::borrow::Cow<'_, str> {
    if is_clean(path.as_bytes()) {
        return path.into();
    }
    clean_segments(path).into()
}

/// [`clean_path`] the long way, segment by segment.
fn clean_segments(path: &str) -> String {
    let mut stack: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                stack.pop();
            }
            s => stack.push(s),
        }
    }
    let mut out = String::with_capacity(path.len());
    for s in &stack {
        out.push('/');
        out.push_str(s);
    }
    if out.is_empty() || (path.ends_with('/') && !out.ends_with('/')) {
        out.push('/');
    }
    out
}

/// True when [`clean_path`] would return `path` unchanged: it starts with `/` and has no
/// empty, `.` or `..` segment other than a trailing empty one. One pass over the bytes,
/// for the common case.
fn is_clean(path: &[u8]) -> bool {
    if path.first() != Some(&b'/') {
        return false;
    }
    let end = |i: usize| path.get(i).is_none_or(|&b| b == b'/');
    path.iter().enumerate().all(|(i, &b)| {
        b != b'/'
            || match path.get(i + 1) {
                Some(b'/') => false,
                Some(b'.') => !(end(i + 2) || (path.get(i + 2) == Some(&b'.') && end(i + 3))),
                _ => true,
            }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(s: &str) -> String {
        upstream_uri(&s.parse().unwrap(), &"10.0.0.5:4443".parse().unwrap())
            .unwrap()
            .to_string()
    }

    #[test]
    fn upstream_url_construction_vectors() {
        assert_eq!(
            uri("/apis/metrics.k8s.io/v1beta1/nodes"),
            "https://10.0.0.5:4443/apis/metrics.k8s.io/v1beta1/nodes"
        );
        assert_eq!(
            uri("/apis/g/v/pods?watch=true&labelSelector=a%3Db&fieldSelector=metadata.name=x"),
            "https://10.0.0.5:4443/apis/g/v/pods?fieldSelector=metadata.name%3Dx&labelSelector=a%3Db&watch=true"
        );
        assert_eq!(
            uri("/apis/g/v/things?q=a%20b"),
            "https://10.0.0.5:4443/apis/g/v/things?q=a+b"
        );
        assert_eq!(
            uri("/apis/g/v/foo%2Fbar"),
            "https://10.0.0.5:4443/apis/g/v/foo/bar"
        );
        assert_eq!(
            uri("/apis/g/v/a%20b"),
            "https://10.0.0.5:4443/apis/g/v/a%20b"
        );
    }

    #[test]
    fn paths_needing_no_escaping_are_sent_as_they_came() {
        for path in [
            "/apis/metrics.k8s.io/v1beta1/namespaces/kube-system/pods/coredns-1",
            "/apis/g/v/a:b;c=d@e$f&g+h,i~j_k.l",
            "/",
            "/api/v1/nodes/",
        ] {
            let original: Uri = path.parse().unwrap();
            assert_eq!(uri(path), format!("https://10.0.0.5:4443{path}"));
            assert_eq!(escaped_path_and_query(&original), path);
        }
        // Anything to decode, escape or re-encode takes the long way.
        assert_eq!(uri("/a%41"), "https://10.0.0.5:4443/aA");
        assert_eq!(uri("/a?"), "https://10.0.0.5:4443/a");
        assert_eq!(uri("/a*b"), "https://10.0.0.5:4443/a%2Ab");
    }

    #[test]
    fn request_headers_are_rewritten() {
        let mut req = Request::get("/request/path?b=2&a=1")
            .body(Body::empty())
            .unwrap();
        let h = req.headers_mut();
        h.insert("authorization", HeaderValue::from_static("Bearer secret"));
        h.insert("x-remote-user", HeaderValue::from_static("system:admin"));
        h.insert("impersonate-user", HeaderValue::from_static("root"));
        h.insert("x-kubernetes-cluster", HeaderValue::from_static("team-b"));
        h.insert("x-forwarded-for", HeaderValue::from_static("192.0.2.1"));
        h.insert("host", HeaderValue::from_static("gateway:6443"));
        h.insert("user-agent", HeaderValue::from_static("kubectl/v1.32"));
        let user = UserInfo::new("username", ["one", "two"]);
        let out = upstream_request(
            req,
            &"10.0.0.5:4443".parse().unwrap(),
            &user,
            Some("127.0.0.1:5555".parse().unwrap()),
        )
        .unwrap();
        assert_eq!(out.uri(), "https://10.0.0.5:4443/request/path?a=1&b=2");
        let h = out.headers();
        assert!(
            !h.contains_key("authorization")
                && !h.contains_key("impersonate-user")
                && !h.contains_key("x-kubernetes-cluster")
                && !h.contains_key("host")
        );
        assert_eq!(h["x-remote-user"], "username");
        assert_eq!(
            h.get_all("x-remote-group").iter().collect::<Vec<_>>(),
            ["one", "two"]
        );
        assert_eq!(h["x-forwarded-for"], "192.0.2.1, 127.0.0.1");
        assert_eq!(h["x-forwarded-proto"], "https");
        assert_eq!(h["x-forwarded-uri"], "/request/path");
        assert_eq!(h["x-forwarded-host"], "10.0.0.5:4443");
        assert_eq!(h["user-agent"], "kubectl/v1.32");
    }

    #[test]
    fn forwarded_for_addresses_are_written_as_go_prints_them() {
        for ip in [
            "127.0.0.1",
            "10.200.3.45",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "2001:db8::7",
        ] {
            let ip: std::net::IpAddr = ip.parse().unwrap();
            let mut buf = bytes::BytesMut::new();
            write_ip(&mut buf, ip);
            assert_eq!(&buf[..], ip.to_string().as_bytes());
        }
    }

    #[test]
    fn forwarded_uri_is_cleaned() {
        assert_eq!(clean_path("/a//b/./c/../d/"), "/a/b/d/");
        assert_eq!(clean_path("/"), "/");
        assert_eq!(clean_path("/../x"), "/x");
        assert_eq!(clean_path(""), "/");
        assert_eq!(clean_path("*"), "/*");
        assert_eq!(clean_path("/a/."), "/a");
        assert_eq!(clean_path("/a/.."), "/");
        assert_eq!(clean_path("/a/./"), "/a/");
    }

    #[test]
    fn the_clean_path_shortcut_agrees_with_the_long_way() {
        let segments = ["", ".", "..", "...", ".a", "a.", "a", "..b"];
        let mut paths = vec![String::new()];
        for _ in 0..3 {
            let mut longer = Vec::new();
            for p in &paths {
                for s in segments {
                    longer.push(format!("{p}/{s}"));
                }
            }
            paths.extend(longer);
        }
        for p in paths.iter().chain([&"a/b".to_owned(), &"/a/b/".to_owned()]) {
            let long = clean_segments(p);
            assert_eq!(clean_path(p), long.as_str(), "{p:?}");
            if is_clean(p.as_bytes()) {
                assert_eq!(&long, p, "the shortcut kept {p:?}");
            }
        }
        assert!(is_clean(b"/apis/metrics.k8s.io/v1beta1/nodes"));
        assert!(!is_clean(b"/apis//x") && !is_clean(b"/a/../b") && !is_clean(b"/a/."));
    }
}
