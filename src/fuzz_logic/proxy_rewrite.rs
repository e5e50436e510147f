//! The proxy's rewrite of the upstream URL, query and extra keys.

use super::*;

/// `uri` is a request target, `query` a raw query string, `extra_key` a user-extra key.
/// Checks that the proxy's URL and header rewriting never panics, that a query encodes
/// to a fixed point, that the upstream URI's shortcut (a path needing no escaping) agrees
/// with the long way, that the upstream URI keeps the backend authority and is stable
/// under a second rewrite, and that an escaped extra key is a valid header name that
/// percent-decodes back to the key.
pub fn fuzz_proxy_rewrite(uri: &str, query: &str, extra_key: &str) {
    let encoded = encode_query(query);
    assert_eq!(encode_query(&encoded), encoded, "query {query:?}");

    let escaped = escape_extra_key(extra_key);
    let name = format!("x-remote-extra-{escaped}");
    assert!(
        HeaderName::from_bytes(name.as_bytes()).is_ok(),
        "{name:?} is not a header name"
    );
    let decoded = percent_decode_str(&escaped).decode_utf8();
    assert_eq!(decoded.as_deref().ok(), Some(extra_key), "{escaped:?}");

    let Ok(uri) = Uri::try_from(uri) else {
        return;
    };
    let authority = Authority::from_static("10.0.0.5:4443");
    if let Ok(up) = upstream_uri(&uri, &authority) {
        // The shortcut for paths that need no escaping agrees with the long way.
        assert_eq!(
            up.path_and_query().map(|pq| pq.as_str()),
            Some(crate::proxy::escaped_path_and_query(&uri).as_str()),
            "{uri}"
        );
        assert_eq!(up.authority(), Some(&authority), "{up}");
        assert_eq!(up.scheme_str(), Some("https"), "{up}");
        if let Ok(again) = upstream_uri(&up, &authority) {
            assert_eq!(again, up, "rewriting {uri} twice");
        }
    }

    let mut user = UserInfo::new("alice", ["dev", "ops"]);
    user.extra
        .insert(extra_key.to_owned(), vec!["value".to_owned()]);
    let Ok(req) = Request::get(uri).body(Body::empty()) else {
        return;
    };
    if let Ok(out) = upstream_request(req, &authority, &user, None) {
        assert_eq!(
            out.headers().get(name.as_str()).map(|v| v.as_bytes()),
            Some(&b"value"[..])
        );
        assert_eq!(out.headers()["x-remote-user"], "alice");
    }
}
