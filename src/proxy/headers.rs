//! Hop-by-hop headers and the upgrade test (the identity headers are `crate::identity`'s).

use http::header::{self, HeaderMap, HeaderName};

use crate::transport::connection_listed;

/// Headers that apply to one connection only (Go `httputil.ReverseProxy`'s list, RFC 9110
/// §7.6.1). `Proxy-Authorization` is among them, so a proxy credential never reaches a
/// backend.
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("proxy-connection"),
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Removes hop-by-hop headers, including every header named in `Connection`
/// (comma-separated, names case-insensitive; names that are not valid header names are
/// skipped). Applied to the request before it goes out and to the response before it
/// comes back.
pub(crate) fn remove_hop_by_hop(headers: &mut HeaderMap) {
    // Most messages carry none: one look at the few names present costs less than a
    // hashed removal per hop-by-hop name (this runs on every request and response).
    if !headers.keys().any(is_hop_by_hop) {
        return;
    }
    for name in connection_listed(headers) {
        headers.remove(name);
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
}

/// Whether `name` is one of [`HOP_BY_HOP`]. Compared one constant at a time, so the
/// standard names are a tag compare each; `HOP_BY_HOP.contains` would build the array (and
/// drop it again) for every name looked at.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    name == header::CONNECTION
        || name == header::PROXY_AUTHENTICATE
        || name == header::PROXY_AUTHORIZATION
        || name == header::TE
        || name == header::TRAILER
        || name == header::TRANSFER_ENCODING
        || name == header::UPGRADE
        || matches!(name.as_str(), "proxy-connection" | "keep-alive")
}

/// The protocol a message's headers switch to, as Go's `httputil` `upgradeType` reads
/// it: the `Upgrade` header when a `Connection` header lists `upgrade`, otherwise empty.
pub(crate) fn upgrade_type(headers: &HeaderMap) -> String {
    let listed = connection_lists_upgrade(headers);
    match headers.get(header::UPGRADE) {
        Some(v) if listed => String::from_utf8_lossy(v.as_bytes()).into_owned(),
        _ => String::new(),
    }
}

/// True for an upgrade request: a `Connection` header listing `upgrade` **and** a non-empty
/// `Upgrade` header (RFC 9110 §7.8). Upstream's httpstream `IsUpgradeRequest` looks at
/// `Connection` alone, so a plain GET with a stray `Connection: Upgrade` (some ingresses
/// add one) fails there as an upgrade the backend did not accept; here it is the plain
/// request it is, and the `Connection` header is dropped as hop-by-hop.
///
/// ```
/// use http::Request;
/// use kube_aggregator::proxy::is_upgrade_request;
///
/// let exec = Request::get("/api/v1/namespaces/ns/pods/p/exec")
///     .header("connection", "Upgrade").header("upgrade", "SPDY/3.1").body(()).unwrap();
/// assert!(is_upgrade_request(&exec));
/// let stray = Request::get("/apis/g/v/x").header("connection", "upgrade").body(()).unwrap();
/// assert!(!is_upgrade_request(&stray));
/// ```
pub fn is_upgrade_request<B>(req: &http::Request<B>) -> bool {
    let upgrade = req
        .headers()
        .get_all(header::UPGRADE)
        .iter()
        .any(|v| !v.as_bytes().iter().all(u8::is_ascii_whitespace));
    upgrade && connection_lists_upgrade(req.headers())
}

/// Whether a `Connection` header lists the `upgrade` token (any case, any position).
fn connection_lists_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn the_hop_by_hop_test_names_exactly_the_listed_headers() {
        for name in &HOP_BY_HOP {
            assert!(is_hop_by_hop(name), "{name}");
        }
        for other in [
            "keep-alive-x",
            "proxy-connections",
            "x-remote-user",
            "host",
            "accept",
        ] {
            assert!(!is_hop_by_hop(&HeaderName::from_static(other)), "{other}");
        }
        // Each one alone is found and removed.
        for name in &HOP_BY_HOP {
            let mut headers = HeaderMap::new();
            headers.insert(name.clone(), HeaderValue::from_static("x"));
            headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
            remove_hop_by_hop(&mut headers);
            assert!(!headers.contains_key(name), "{name}");
            assert!(headers.contains_key(header::ACCEPT));
        }
    }

    #[test]
    fn an_upgrade_needs_both_connection_and_upgrade() {
        let req = |headers: &[(&str, &str)]| {
            let mut b = http::Request::get("/");
            for (k, v) in headers {
                b = b.header(*k, *v);
            }
            b.body(()).unwrap()
        };
        // (Connection, Upgrade, an upgrade?): both are needed, Upgrade not blank.
        let cases = [
            (Some("Upgrade"), Some("SPDY/3.1"), true),
            (Some("keep-alive, upgrade"), Some("websocket"), true),
            (Some("Upgrade"), None, false),
            (Some("Upgrade"), Some(" "), false),
            (None, Some("websocket"), false),
            (Some("close"), Some("h2c"), false),
        ];
        for (connection, upgrade, want) in cases {
            let headers: Vec<_> = [("connection", connection), ("upgrade", upgrade)]
                .into_iter()
                .filter_map(|(name, value)| Some((name, value?)))
                .collect();
            assert_eq!(
                is_upgrade_request(&req(&headers)),
                want,
                "Connection {connection:?}, Upgrade {upgrade:?}"
            );
        }
    }

    #[test]
    fn hop_by_hop_and_connection_listed_headers_go() {
        let mut h = HeaderMap::new();
        h.insert(
            "connection",
            HeaderValue::from_static("keep-alive, x-secret"),
        );
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("upgrade", HeaderValue::from_static("websocket"));
        h.insert("accept", HeaderValue::from_static("*/*"));
        remove_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn each_hop_by_hop_header_goes_alone_and_others_stay() {
        for name in &HOP_BY_HOP {
            let mut h = HeaderMap::new();
            h.insert(name.clone(), HeaderValue::from_static("x"));
            h.insert("accept", HeaderValue::from_static("*/*"));
            h.insert("x-remote-user", HeaderValue::from_static("alice"));
            remove_hop_by_hop(&mut h);
            assert!(!h.contains_key(name), "{name} stayed");
            assert_eq!(h.len(), 2, "after {name}: {h:?}");
        }
        let mut h = HeaderMap::new();
        h.insert("accept", HeaderValue::from_static("*/*"));
        h.insert("user-agent", HeaderValue::from_static("kubectl"));
        let before = h.clone();
        remove_hop_by_hop(&mut h);
        assert_eq!(h, before);
    }
}
