//! Who a request runs as, and how that travels: [`UserInfo`] and the well-known user and
//! group names (`user.rs`), the `Impersonate-*` headers (`impersonate.rs`), and
//! [`UserInfo`]'s wire form between the aggregator and extension servers, in one place:
//! the front-proxy (request-header) names, how a user is written into them, and which
//! headers carry identity or credentials and must never travel past authentication.
//!
//! Private; the public names are re-exported where users meet them
//! ([`authn`](crate::authn), [`authz`](crate::authz), [`impersonation`](crate::impersonation),
//! [`proxy`](crate::proxy)).
//!
//! Mirrors client-go
//! [`transport/round_trippers.go`](https://github.com/kubernetes/client-go/blob/master/transport/round_trippers.go)
//! (`SetAuthProxyHeaders`, `headerKeyEscape`), k8s.io/apiserver
//! [`pkg/authentication/request/headerrequest/requestheader.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/authentication/request/headerrequest/requestheader.go)
//! (extra keys unescaped, headers cleared after authentication) and the identities
//! kube-aggregator's own requests carry (its availability controller and discovery
//! manager as `system:kube-aggregator` in `system:masters`, its OpenAPI downloader as
//! `system:aggregator`).
//!
//! Floor 1 of the import order (docs/architecture.md): uses `gocompat`; used by `audit`,
//! `audit_context`, `authn`, `authz`, `availability`, `discovery`, `impersonation`,
//! `openapi`, `proxy`, `trace`, `transport`.

mod impersonate;
mod user;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

pub use impersonate::{
    IMPERSONATE_EXTRA_PREFIX, IMPERSONATE_GROUP, IMPERSONATE_UID, IMPERSONATE_USER,
};
pub(crate) use impersonate::{
    InvalidImpersonation, Requested, SERVICE_ACCOUNT_PREFIX, has_impersonation_headers,
    remove_impersonation_headers, requested,
};
pub use user::{
    SYSTEM_ANONYMOUS, SYSTEM_AUTHENTICATED, SYSTEM_MASTERS, SYSTEM_UNAUTHENTICATED, UserInfo,
};

use crate::gocompat::url;

/// What the TLS accept loop learned about the connection a request came on. The
/// [`server`](crate::server) module's accept loop inserts it; a host with its own loop
/// builds it from its TLS session.
///
/// The host inserts one into every request's extensions. `peer_certificates` is the chain
/// the client presented (leaf first), not yet verified: authenticators verify it against
/// their own CA, as kube-apiserver does.
#[derive(Debug, Clone, Default)]
pub struct ConnectionInfo {
    /// The client's address: the host part goes into `X-Forwarded-For` when proxied.
    pub remote_addr: Option<std::net::SocketAddr>,
    /// The presented certificate chain, leaf first, DER; empty when none. Shared, so
    /// cloning the info per request costs a reference count.
    pub peer_certificates: std::sync::Arc<[rustls_pki_types::CertificateDer<'static>]>,
}

/// The user's name (always sent, even empty).
pub(crate) const X_REMOTE_USER: HeaderName = HeaderName::from_static("x-remote-user");
/// The user's UID (sent when set).
pub(crate) const X_REMOTE_UID: HeaderName = HeaderName::from_static("x-remote-uid");
/// One line per group, in order (a group holding a comma stays whole).
pub(crate) const X_REMOTE_GROUP: HeaderName = HeaderName::from_static("x-remote-group");
/// `X-Remote-Extra-<escaped key>`, one line per value.
pub(crate) const X_REMOTE_EXTRA_PREFIX: &str = "x-remote-extra-";
/// `Impersonate-User`, `Impersonate-Group`, `Impersonate-Extra-<key>`, `Impersonate-Uid`.
pub(crate) const IMPERSONATE_PREFIX: &str = "impersonate-";

/// The user of the aggregator's availability probes and discovery fetches.
pub(crate) const KUBE_AGGREGATOR_USER: &str = "system:kube-aggregator";
/// The user of the aggregator's OpenAPI downloads.
pub(crate) const OPENAPI_USER: &str = "system:aggregator";

/// Headers that carry identity or credentials and must never travel past the
/// authentication filter (k8s.io/apiserver `pkg/endpoints/filters/authentication.go`
/// deletes them after authenticating): `Authorization`,
/// `Proxy-Authorization` and the front-proxy headers, `X-Remote-Extra-*` by prefix.
/// `Impersonate-*` is not among them: the
/// [`ImpersonationLayer`](crate::impersonation::ImpersonationLayer) checks and removes it,
/// and the proxy never forwards it.
pub(crate) fn is_identity_header(name: &HeaderName) -> bool {
    *name == header::AUTHORIZATION
        || *name == header::PROXY_AUTHORIZATION
        || *name == X_REMOTE_USER
        || *name == X_REMOTE_UID
        || *name == X_REMOTE_GROUP
        || name.as_str().starts_with(X_REMOTE_EXTRA_PREFIX)
}

/// Removes every header `doomed` says, in place; nothing is allocated when none is
/// there (the common case).
fn remove_where(headers: &mut HeaderMap, doomed: impl Fn(&HeaderName) -> bool) {
    if !headers.keys().any(&doomed) {
        return;
    }
    let names: Vec<HeaderName> = headers.keys().filter(|n| doomed(n)).cloned().collect();
    for name in names {
        headers.remove(&name);
    }
}

/// Removes every [`is_identity_header`] header in place.
pub(crate) fn strip(headers: &mut HeaderMap) {
    remove_where(headers, is_identity_header);
}

/// Removes every [`is_identity_header`] header and every `Impersonate-*` header in place:
/// what a request sent on to a backend must never carry: a backend trusts these from the
/// aggregator's certificate, so a client's own copies would be believed.
pub(crate) fn strip_with_impersonation(headers: &mut HeaderMap) {
    remove_where(headers, |n| {
        is_identity_header(n) || n.as_str().starts_with(IMPERSONATE_PREFIX)
    });
}

/// Writes `user` as front-proxy headers after deleting any present ones (and any
/// `Impersonate-*`), as client-go's `SetAuthProxyHeaders`
/// ([`transport/round_trippers.go`](https://github.com/kubernetes/client-go/blob/master/transport/round_trippers.go)):
/// `X-Remote-User` always (even empty), `X-Remote-Uid` when set, one
/// `X-Remote-Group` line per group in order, `X-Remote-Extra-<escaped key>` one line per
/// value.
///
/// # Errors
///
/// [`InvalidIdentityHeader`] when a value cannot be carried whole as header text (a
/// control character other than tab, such as CR or LF in a certificate's CN or a
/// TokenReview's extra). The request must then not be sent: a backend that finds no
/// `X-Remote-User`, or a group or extra missing, would run it as someone else or with
/// fewer restrictions. Go's transport refuses such a request the same way
/// (`net/http: invalid header field value for "X-Remote-User"`); the headers written so
/// far are removed again, so `headers` never carries part of an identity.
///
/// ```
/// use http::HeaderMap;
/// use kube_aggregator::authn::UserInfo;
/// use kube_aggregator::proxy::set_identity_headers;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("x-remote-user", "system:admin".parse().unwrap()); // spoofed: replaced
/// set_identity_headers(&mut headers, &UserInfo::new("alice", ["dev", "a,b"])).unwrap();
/// assert_eq!(headers["x-remote-user"], "alice");
/// assert_eq!(headers.get_all("x-remote-group").iter().count(), 2);
///
/// let err = set_identity_headers(&mut headers, &UserInfo::new("eve\nx", ["dev"])).unwrap_err();
/// assert_eq!(err.to_string(), r#"net/http: invalid header field value for "X-Remote-User""#);
/// assert!(!headers.contains_key("x-remote-user") && !headers.contains_key("x-remote-group"));
/// ```
pub fn set_identity_headers(
    headers: &mut HeaderMap,
    user: &UserInfo,
) -> Result<(), InvalidIdentityHeader> {
    let mut values = SharedValues::with_capacity(identity_len(user));
    write_identity_headers(headers, user, &mut values)
}

/// A [`UserInfo`] field that cannot be written as a front-proxy header value, so the
/// request carrying it must not be sent. Names the header (in Go's canonical spelling,
/// e.g. `X-Remote-Group`, `X-Remote-Extra-Scopes`), never the value, which may be
/// sensitive; its text is Go's transport's (`net/http: invalid header field value for
/// "<header>"`, `net/http` `transport.go`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidIdentityHeader {
    header: String,
}

impl InvalidIdentityHeader {
    fn new(name: &str) -> InvalidIdentityHeader {
        InvalidIdentityHeader {
            header: canonical_header_key(name),
        }
    }

    /// The header that could not be written, e.g. `X-Remote-User`.
    pub fn header(&self) -> &str {
        &self.header
    }
}

impl std::fmt::Display for InvalidIdentityHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "net/http: invalid header field value for {:?}",
            self.header
        )
    }
}

impl std::error::Error for InvalidIdentityHeader {}

/// `name` as Go's `textproto.CanonicalMIMEHeaderKey` spells it: the first letter and every
/// letter after `-` upper case, the others lower case.
fn canonical_header_key(name: &str) -> String {
    let mut upper = true;
    name.chars()
        .map(|c| {
            let out = if upper {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            };
            upper = c == '-';
            out
        })
        .collect()
}

/// The bytes [`write_identity_headers`] cuts from its [`SharedValues`] for `user`.
pub(crate) fn identity_len(user: &UserInfo) -> usize {
    let extra: usize = user.extra.values().flatten().map(String::len).sum();
    let groups: usize = user.groups.iter().map(String::len).sum();
    user.name.len() + user.uid.len() + groups + extra
}

/// [`set_identity_headers`] with the values cut from `values`.
pub(crate) fn write_identity_headers(
    headers: &mut HeaderMap,
    user: &UserInfo,
    values: &mut SharedValues,
) -> Result<(), InvalidIdentityHeader> {
    strip_with_impersonation(headers);
    let written = write_user(headers, user, values);
    if written.is_err() {
        // Nothing of a partly written identity stays behind.
        strip(headers);
    }
    written
}

/// The writing of [`write_identity_headers`], stopping at the first value that cannot
/// be carried.
fn write_user(
    headers: &mut HeaderMap,
    user: &UserInfo,
    values: &mut SharedValues,
) -> Result<(), InvalidIdentityHeader> {
    let value = |values: &mut SharedValues, name: &HeaderName, v: &str| {
        values
            .value(v.as_bytes())
            .ok_or_else(|| InvalidIdentityHeader::new(name.as_str()))
    };
    headers.insert(X_REMOTE_USER, value(values, &X_REMOTE_USER, &user.name)?);
    if !user.uid.is_empty() {
        headers.insert(X_REMOTE_UID, value(values, &X_REMOTE_UID, &user.uid)?);
    }
    for g in &user.groups {
        headers.append(X_REMOTE_GROUP, value(values, &X_REMOTE_GROUP, g)?);
    }
    for (key, extra) in &user.extra {
        // Every byte outside a token is escaped, so the name is always valid; refuse
        // rather than drop should that ever not hold.
        let name = extra_header_name(key).ok_or_else(|| {
            InvalidIdentityHeader::new(&format!("{X_REMOTE_EXTRA_PREFIX}{}", escape_extra_key(key)))
        })?;
        for v in extra {
            headers.append(name.clone(), value(values, &name, v)?);
        }
    }
    Ok(())
}

/// Header values made for one request, all cut from one buffer: one allocation for
/// all of them where a value each would take its own, and clones that only count
/// references (the backend pool keeps a copy of every request it may have to send
/// again; a value made on its own allocates a reference count on its first clone).
///
/// A value keeps its whole buffer alive, and an HTTP/2 connection's HPACK table keeps
/// the values it indexed: so a buffer is only shared up to [`SharedValues::SHARED_MAX`]
/// bytes, and values of a request with more get an allocation each, which bounds what
/// one indexed value can hold on to.
pub(crate) struct SharedValues {
    buf: bytes::BytesMut,
    shared: bool,
}

impl SharedValues {
    /// The most bytes of values that share one buffer (a request's identity and
    /// forwarding headers are usually under 300).
    pub(crate) const SHARED_MAX: usize = 512;

    /// Room for `len` bytes of values, shared when `len` is at most
    /// [`SharedValues::SHARED_MAX`]; more is allocated if more are written.
    pub(crate) fn with_capacity(len: usize) -> SharedValues {
        let shared = len <= Self::SHARED_MAX;
        SharedValues {
            buf: bytes::BytesMut::with_capacity(if shared { len } else { 0 }),
            shared,
        }
    }

    /// `bytes` as a header value, or `None` when they are not valid header text
    /// (a control character other than tab); `HeaderValue::from_bytes`'s rule.
    pub(crate) fn value(&mut self, bytes: &[u8]) -> Option<HeaderValue> {
        self.value_with(|buf| buf.extend_from_slice(bytes))
    }

    /// The bytes `write` appends to the buffer as a value, for values built piece by
    /// piece; `None` as for [`SharedValues::value`].
    pub(crate) fn value_with(
        &mut self,
        write: impl FnOnce(&mut bytes::BytesMut),
    ) -> Option<HeaderValue> {
        write(&mut self.buf);
        if self.shared {
            HeaderValue::from_maybe_shared(self.buf.split().freeze()).ok()
        } else {
            let value = HeaderValue::from_bytes(&self.buf).ok();
            self.buf.clear();
            value
        }
    }
}

/// The extra keys kube-apiserver's own authenticators set (`credential-id` for every
/// client certificate and service-account token, the others for bound service-account
/// tokens), with their header names: most requests carry one, so it is not escaped and
/// parsed again for each.
const KNOWN_EXTRA: [(&str, HeaderName); 5] = [
    (
        "authentication.kubernetes.io/credential-id",
        HeaderName::from_static("x-remote-extra-authentication.kubernetes.io%2fcredential-id"),
    ),
    (
        "authentication.kubernetes.io/pod-name",
        HeaderName::from_static("x-remote-extra-authentication.kubernetes.io%2fpod-name"),
    ),
    (
        "authentication.kubernetes.io/pod-uid",
        HeaderName::from_static("x-remote-extra-authentication.kubernetes.io%2fpod-uid"),
    ),
    (
        "authentication.kubernetes.io/node-name",
        HeaderName::from_static("x-remote-extra-authentication.kubernetes.io%2fnode-name"),
    ),
    (
        "authentication.kubernetes.io/node-uid",
        HeaderName::from_static("x-remote-extra-authentication.kubernetes.io%2fnode-uid"),
    ),
];

/// `X-Remote-Extra-<escaped key>`; `None` when that is no valid header name.
fn extra_header_name(key: &str) -> Option<HeaderName> {
    if let Some((_, name)) = KNOWN_EXTRA.iter().find(|(known, _)| *known == key) {
        return Some(name.clone());
    }
    HeaderName::from_bytes(format!("{X_REMOTE_EXTRA_PREFIX}{}", escape_extra_key(key)).as_bytes())
        .ok()
}

/// Writes one of the aggregator's own identities (a fixed user and groups, no UID, no
/// extra) into the headers of a request it sends itself.
pub(crate) fn set_own(headers: &mut HeaderMap, user: &'static str, groups: &[&'static str]) {
    headers.insert(X_REMOTE_USER, HeaderValue::from_static(user));
    for g in groups {
        headers.append(X_REMOTE_GROUP, HeaderValue::from_static(g));
    }
}

/// Escapes an extra key for a header name: RFC 7230 token characters other than `%` stay,
/// every other byte becomes `%XX` with upper-case hex (client-go `headerKeyEscape`).
///
/// ```
/// use kube_aggregator::proxy::escape_extra_key;
///
/// assert_eq!(escape_extra_key("example.com/two"), "example.com%2Ftwo");
/// ```
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
            url::push_percent_escaped(&mut out, b);
        }
    }
    out
}

/// The extra key of an `X-Remote-Extra-<key>` or `Impersonate-Extra-<key>` header (the
/// already lower-case suffix), unescaped like Go's `url.PathUnescape`; kept as it is when
/// an escape is malformed or the result is not UTF-8.
pub(crate) fn unescape_extra_key(key: &str) -> String {
    url::path_unescape(key).map_or_else(|| key.to_owned(), |k| k.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_extra_keys_get_the_names_escaping_gives() {
        for (key, name) in &KNOWN_EXTRA {
            let escaped = format!("{X_REMOTE_EXTRA_PREFIX}{}", escape_extra_key(key));
            assert_eq!(HeaderName::from_bytes(escaped.as_bytes()).unwrap(), name);
        }
        assert_eq!(
            extra_header_name("example.com/Two").unwrap(),
            "x-remote-extra-example.com%2ftwo"
        );
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
            assert_eq!(unescape_extra_key(&escaped.to_ascii_lowercase()), key);
        }
        assert_eq!(unescape_extra_key("bad%zz"), "bad%zz", "kept as it is");
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
        set_identity_headers(&mut h, &user).unwrap();
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
        set_identity_headers(&mut h, &UserInfo::default()).unwrap();
        assert_eq!(h["x-remote-user"], "");
        assert!(!h.contains_key("x-remote-uid"));
    }

    #[test]
    fn a_value_that_is_no_header_text_fails_naming_its_header_and_leaves_no_identity() {
        let cases: [(UserInfo, &str); 6] = [
            (UserInfo::new("eve\nx", ["dev"]), "X-Remote-User"),
            (UserInfo::new("eve\x7f", ["dev"]), "X-Remote-User"),
            (
                UserInfo::new("alice", ["a", "bad\r\nvalue", "c"]),
                "X-Remote-Group",
            ),
            (
                UserInfo {
                    uid: "u\r1".into(),
                    ..UserInfo::new("alice", ["a"])
                },
                "X-Remote-Uid",
            ),
            (
                UserInfo {
                    extra: [(
                        "scopes".to_owned(),
                        vec!["ok".to_owned(), "x\ny".to_owned()],
                    )]
                    .into(),
                    ..UserInfo::new("alice", ["a"])
                },
                "X-Remote-Extra-Scopes",
            ),
            (
                UserInfo {
                    extra: [("example.com/k".to_owned(), vec!["\0".to_owned()])].into(),
                    ..UserInfo::new("alice", ["a"])
                },
                "X-Remote-Extra-Example.com%2fk",
            ),
        ];
        for (user, header) in cases {
            let mut h = HeaderMap::new();
            h.insert("x-remote-user", HeaderValue::from_static("system:admin"));
            h.insert("impersonate-user", HeaderValue::from_static("root"));
            h.insert("accept", HeaderValue::from_static("application/json"));
            let err = set_identity_headers(&mut h, &user).unwrap_err();
            assert_eq!(err.header(), header, "{user:?}");
            assert_eq!(
                err.to_string(),
                format!("net/http: invalid header field value for \"{header}\""),
            );
            assert_eq!(h.len(), 1, "only the unrelated header is left: {h:?}");
            assert_eq!(h["accept"], "application/json");
        }
        // Tab and bytes above 0x7f are header text, as in Go.
        let mut h = HeaderMap::new();
        set_identity_headers(&mut h, &UserInfo::new("a\tb", ["gr\u{fc}n"])).unwrap();
        assert_eq!(h["x-remote-user"], "a\tb");
        assert_eq!(h["x-remote-group"].as_bytes(), "gr\u{fc}n".as_bytes());
        // A copy outlives the map it came from, values intact.
        let copy = h.clone();
        drop(h);
        assert_eq!(copy["x-remote-user"], "a\tb");
    }

    #[test]
    fn values_written_past_the_room_asked_for_are_whole() {
        let mut values = SharedValues::with_capacity(2);
        let first = values.value(b"first").unwrap();
        let kept = first.clone();
        let second = values.value(&[b'x'; 300]).unwrap();
        assert_eq!(first, "first");
        assert_eq!(kept, "first");
        assert_eq!(second.len(), 300);
        assert!(values.value(b"\x7f").is_none());
        assert_eq!(values.value(b"").unwrap(), "");
    }

    #[test]
    fn values_share_a_buffer_only_up_to_the_bound() {
        let mut small = SharedValues::with_capacity(5);
        let a = small.value(b"abc").unwrap();
        let b = small.value(b"de").unwrap();
        assert_eq!(a.as_bytes().as_ptr().wrapping_add(3), b.as_bytes().as_ptr());
        let mut large = SharedValues::with_capacity(SharedValues::SHARED_MAX + 1);
        assert!(
            !large.shared,
            "a request with more gets a value per allocation"
        );
        let a = large.value(b"abc").unwrap();
        let ip = large
            .value_with(|buf| buf.extend_from_slice(b"1.2.3.4"))
            .unwrap();
        assert!(large.value(b"bad\n").is_none());
        let b = large.value(b"de").unwrap();
        assert_eq!(
            [a, ip, b],
            ["abc", "1.2.3.4", "de"].map(HeaderValue::from_static)
        );
    }

    #[test]
    fn strips_credentials_and_identity_headers() {
        let mut h = http::HeaderMap::new();
        for (k, v) in [
            ("authorization", "Bearer t"),
            ("x-remote-user", "system:admin"),
            ("x-remote-group", "system:masters"),
            ("x-remote-extra-scopes", "x"),
            ("impersonate-user", "root"),
            ("accept", "application/json"),
        ] {
            h.append(k, v.parse().unwrap());
        }
        strip(&mut h);
        assert_eq!(h.len(), 2);
        assert!(h.contains_key("accept"));
        assert!(
            h.contains_key("impersonate-user"),
            "the ImpersonationLayer's to check"
        );
        strip_with_impersonation(&mut h);
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn the_aggregators_own_identity() {
        let mut h = HeaderMap::new();
        set_own(&mut h, KUBE_AGGREGATOR_USER, &[SYSTEM_MASTERS]);
        assert_eq!(h["x-remote-user"], "system:kube-aggregator");
        assert_eq!(h["x-remote-group"], "system:masters");
        assert!(!h.contains_key("x-remote-uid"));
    }
}
