//! Identity and hop-by-hop headers.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::authn::UserInfo;

/// Headers that apply to one connection only (Go `httputil.ReverseProxy`).
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

/// The front-proxy identity headers (names parsed once, not per request).
pub(crate) const X_REMOTE_USER: HeaderName = HeaderName::from_static("x-remote-user");
pub(crate) const X_REMOTE_UID: HeaderName = HeaderName::from_static("x-remote-uid");
pub(crate) const X_REMOTE_GROUP: HeaderName = HeaderName::from_static("x-remote-group");

/// Removes hop-by-hop headers, including every header named in `Connection`.
pub(crate) fn remove_hop_by_hop(headers: &mut HeaderMap) {
    if headers.contains_key(header::CONNECTION) {
        let listed: Vec<HeaderName> = headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
            .collect();
        for name in listed {
            headers.remove(name);
        }
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
}

/// Writes `user` as front-proxy headers after deleting any present ones
/// (client-go `SetAuthProxyHeaders`, docs/upstream-behaviour.md §3.4): `X-Remote-User` always (even
/// empty), `X-Remote-Uid` when set, one `X-Remote-Group` line per group in order,
/// `X-Remote-Extra-<escaped key>` one line per value. Values that are not valid header
/// text are skipped rather than sent altered.
pub fn set_identity_headers(headers: &mut HeaderMap, user: &UserInfo) {
    crate::authn::strip_identity_and_impersonation_headers(headers);
    let value = |s: &str| HeaderValue::from_str(s).ok();
    if let Some(v) = value(&user.name) {
        headers.insert(X_REMOTE_USER, v);
    }
    if !user.uid.is_empty() {
        if let Some(v) = value(&user.uid) {
            headers.insert(X_REMOTE_UID, v);
        }
    }
    for g in &user.groups {
        if let Some(v) = value(g) {
            headers.append(X_REMOTE_GROUP, v);
        }
    }
    for (key, values) in &user.extra {
        let Ok(name) =
            HeaderName::from_bytes(format!("x-remote-extra-{}", escape_extra_key(key)).as_bytes())
        else {
            continue;
        };
        for v in values {
            if let Some(v) = value(v) {
                headers.append(name.clone(), v);
            }
        }
    }
}

/// Escapes an extra key for a header name: RFC 7230 token characters other than `%` stay,
/// every other byte becomes `%XX` with upper-case hex (client-go `headerKeyEscape`).
pub fn escape_extra_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for &b in key.as_bytes() {
        let keep = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        if keep {
            out.push(b as char);
        } else {
            push_percent_escaped(&mut out, b);
        }
    }
    out
}

/// True for an upgrade request: a `Connection` header listing `upgrade` **and** a non-empty
/// `Upgrade` header (RFC 9110 §7.8). Upstream's httpstream `IsUpgradeRequest` looks at
/// `Connection` alone, so a plain GET with a stray `Connection: Upgrade` (some ingresses
/// add one) fails there as an upgrade the backend did not accept; here it is the plain
/// request it is, and the `Connection` header is dropped as hop-by-hop.
pub fn is_upgrade_request<B>(req: &http::Request<B>) -> bool {
    let upgrade = req
        .headers()
        .get_all(header::UPGRADE)
        .iter()
        .any(|v| !v.as_bytes().iter().all(u8::is_ascii_whitespace));
    upgrade
        && req
            .headers()
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| {
                v.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
            })
}

/// Appends `%XX` (upper-case hex) for `b`, without allocating.
pub(crate) fn push_percent_escaped(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(char::from(HEX[usize::from(b >> 4)]));
    out.push(char::from(HEX[usize::from(b & 0xf)]));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upgrade_needs_both_connection_and_upgrade() {
        let req = |headers: &[(&str, &str)]| {
            let mut b = http::Request::get("/");
            for (k, v) in headers {
                b = b.header(*k, *v);
            }
            b.body(()).unwrap()
        };
        assert!(is_upgrade_request(&req(&[
            ("connection", "Upgrade"),
            ("upgrade", "SPDY/3.1")
        ])));
        assert!(is_upgrade_request(&req(&[
            ("connection", "keep-alive, upgrade"),
            ("upgrade", "websocket")
        ])));
        assert!(
            !is_upgrade_request(&req(&[("connection", "Upgrade")])),
            "a stray Connection: Upgrade"
        );
        assert!(!is_upgrade_request(&req(&[
            ("connection", "Upgrade"),
            ("upgrade", " ")
        ])));
        assert!(
            !is_upgrade_request(&req(&[("upgrade", "websocket")])),
            "Upgrade without Connection"
        );
        assert!(!is_upgrade_request(&req(&[
            ("connection", "close"),
            ("upgrade", "h2c")
        ])));
    }

    #[test]
    fn extra_key_escaping_vectors() {
        for (key, escaped) in [
            ("alphabetical", "alphabetical"),
            ("alph4num3r1c", "alph4num3r1c"),
            ("percent%20encoded", "percent%2520encoded"),
            (
                "almost%zzpercent%xxencoded",
                "almost%25zzpercent%25xxencoded",
            ),
            (
                "example.com/percent%20encoded",
                "example.com%2Fpercent%2520encoded",
            ),
            (
                "example.com/ᛒᚥᛏᛖᚥᚢとロビン",
                "example.com%2F%E1%9B%92%E1%9A%A5%E1%9B%8F%E1%9B%96%E1%9A%A5%E1%9A%A2%E3%81%A8%E3%83%AD%E3%83%93%E3%83%B3",
            ),
            ("abc123!#$+.-_*\\^`~|'", "abc123!#$+.-_*%5C^`~|'"),
            ("@=:", "%40%3D%3A"),
            (
                "authentication.kubernetes.io/credential-id",
                "authentication.kubernetes.io%2Fcredential-id",
            ),
        ] {
            assert_eq!(escape_extra_key(key), escaped, "{key}");
            let back = percent_encoding::percent_decode_str(escaped)
                .decode_utf8()
                .unwrap();
            assert_eq!(back, key);
        }
    }

    #[test]
    fn identity_headers_replace_spoofed_ones() {
        let mut h = HeaderMap::new();
        h.insert("x-remote-user", HeaderValue::from_static("system:admin"));
        h.insert("X-Remote-Extra-Evil", HeaderValue::from_static("1"));
        let mut user = UserInfo::new("user", ["groupA", "groupB"]);
        user.uid = "7db46926-e803-4337-9a29-f9c1fab7d34a".into();
        user.extra
            .insert("one".into(), vec!["alpha".into(), "bravo".into()]);
        user.extra
            .insert("example.com/two".into(), vec!["charlie".into()]);
        set_identity_headers(&mut h, &user);
        assert_eq!(h["x-remote-user"], "user");
        assert_eq!(h["x-remote-uid"], "7db46926-e803-4337-9a29-f9c1fab7d34a");
        let groups: Vec<_> = h.get_all("x-remote-group").iter().collect();
        assert_eq!(groups, ["groupA", "groupB"]);
        let one: Vec<_> = h.get_all("x-remote-extra-one").iter().collect();
        assert_eq!(one, ["alpha", "bravo"]);
        assert_eq!(h["x-remote-extra-example.com%2ftwo"], "charlie");
        assert!(!h.contains_key("x-remote-extra-evil"));
    }

    #[test]
    fn empty_user_name_is_still_sent_and_no_uid_header_without_uid() {
        let mut h = HeaderMap::new();
        set_identity_headers(&mut h, &UserInfo::default());
        assert_eq!(h["x-remote-user"], "");
        assert!(!h.contains_key("x-remote-uid"));
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
}
