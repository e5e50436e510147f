//! Go's `net/url` escaping (<https://github.com/golang/go/blob/master/src/net/url/url.go>),
//! as the aggregator's proxy and request parsing need it: the upstream path is the decoded
//! path escaped again as `URL.EscapedPath` does, the upstream query is `ParseQuery` then
//! `Values.Encode`, and query values and extra keys decode as `QueryUnescape` and
//! `PathUnescape` do.

use std::borrow::Cow;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

/// Bytes Go's `URL.EscapedPath` escapes: everything but unreserved characters and
/// `$ & + , / : ; = @`.
const PATH_ESCAPE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b',')
    .remove(b'/')
    .remove(b':')
    .remove(b';')
    .remove(b'=')
    .remove(b'@');

/// True for the bytes `URL.EscapedPath` leaves alone (so `%` is false: it must be decoded).
pub(crate) fn path_byte_kept(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'_'
                | b'.'
                | b'~'
                | b'$'
                | b'&'
                | b'+'
                | b','
                | b'/'
                | b':'
                | b';'
                | b'='
                | b'@'
        )
}

/// The escaped form of `path` (an escaped request path) as Go sends it: decoded, then
/// escaped again as `URL.EscapedPath` does, so `%2F` becomes `/` and `%7E` becomes `~`.
pub(crate) fn reescape_path(path: &str) -> String {
    let decoded = percent_decode_str(path).decode_utf8_lossy();
    utf8_percent_encode(&decoded, PATH_ESCAPE).to_string()
}

/// Go's `url.ParseQuery` then `Values.Encode`: pairs sorted by key (stable for equal
/// keys), keys and values escaped with `QueryEscape` (space as `+`, unreserved kept), as
/// kube-aggregator's proxy re-encodes the query it forwards
/// ([`handler_proxy.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/handler_proxy.go)).
///
/// ```
/// use kube_aggregator::proxy::encode_query;
///
/// assert_eq!(encode_query("watch=true&labelSelector=a%3Db&q=a%20b"), "labelSelector=a%3Db&q=a+b&watch=true");
/// ```
pub fn encode_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = String::with_capacity(query.len() + 8);
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        query_escape(k, &mut out);
        out.push('=');
        query_escape(v, &mut out);
    }
    out
}

/// Go's `url.QueryEscape`, appended to `out`.
fn query_escape(s: &str, out: &mut String) {
    for &b in s.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => push_percent_escaped(out, b),
        }
    }
}

/// Appends `%XX` (upper-case hex, as Go writes it) for `b`, without allocating.
pub(crate) fn push_percent_escaped(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(char::from(HEX[usize::from(b >> 4)]));
    out.push(char::from(HEX[usize::from(b & 0xf)]));
}

/// True when every `%` of `s` starts a two-hex-digit escape (what Go's unescaping
/// requires; anything else is its `invalid URL escape` error).
pub(crate) fn escapes_well_formed(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.iter().enumerate().all(|(i, b)| {
        *b != b'%'
            || bytes
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
    })
}

/// Go's `url.QueryUnescape`, to bytes (a Go string may hold any byte): `+` is a space and
/// `%XX` a byte. `None` for a malformed escape; borrowed when nothing was escaped.
pub(crate) fn query_unescape(raw: &str) -> Option<Cow<'_, [u8]>> {
    if !raw.contains(['%', '+']) {
        return Some(Cow::Borrowed(raw.as_bytes()));
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => {
                let hi = hex_value(*bytes.get(i + 1)?)?;
                let lo = hex_value(*bytes.get(i + 2)?)?;
                out.push((hi << 4) | lo);
                i += 3;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(Cow::Owned(out))
}

/// Go's `url.PathUnescape` (`+` stays a `+`), for text: `None` when an escape is
/// malformed or the decoded bytes are not UTF-8.
pub(crate) fn path_unescape(s: &str) -> Option<Cow<'_, str>> {
    if !s.contains('%') {
        return Some(Cow::Borrowed(s));
    }
    if !escapes_well_formed(s) {
        return None;
    }
    percent_decode_str(s).decode_utf8().ok()
}

/// The value of one hex digit, either case.
fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_escaped_again_as_go_does() {
        // net/url's escape tests for paths, and what kube-aggregator forwards.
        for (path, escaped) in [
            ("/apis/g/v1/pods", "/apis/g/v1/pods"),
            ("/a%2Fb", "/a/b"),
            ("/%7Euser", "/~user"),
            ("/a b", "/a%20b"),
            ("/a+b&c=d;e@f$g,h:i", "/a+b&c=d;e@f$g,h:i"),
            ("/é", "/%C3%A9"),
            ("/%3F%23", "/%3F%23"),
        ] {
            assert_eq!(reescape_path(path), escaped, "{path}");
        }
    }

    #[test]
    fn queries_encode_as_values_encode() {
        for (query, encoded) in [
            (
                "watch=true&labelSelector=a%3Db&fieldSelector=metadata.name=x",
                "fieldSelector=metadata.name%3Dx&labelSelector=a%3Db&watch=true",
            ),
            ("q=a%20b&q=c+d", "q=a+b&q=c+d"),
            ("k=~-._*", "k=~-._%2A"),
        ] {
            assert_eq!(encode_query(query), encoded, "{query}");
        }
    }

    #[test]
    fn unescaping_as_query_and_path_unescape() {
        assert_eq!(query_unescape("a+b%41").as_deref(), Some(&b"a bA"[..]));
        assert_eq!(query_unescape("%zz"), None);
        assert_eq!(query_unescape("%4"), None);
        assert_eq!(query_unescape("%ff").as_deref(), Some(&[0xff][..]));
        assert_eq!(path_unescape("a+b%2Fc").as_deref(), Some("a+b/c"));
        assert_eq!(path_unescape("50%"), None);
        assert_eq!(path_unescape("%ff"), None, "not UTF-8");
        assert!(escapes_well_formed("a%20b") && !escapes_well_formed("a%2"));
    }
}
