//! The query parameters RequestInfo reads, decoded as Go's `url.ParseQuery` and
//! `URL.Query().Get` decode them.

use std::borrow::Cow;

/// A decoded query value; `utf8` is false when invalid bytes were replaced.
#[derive(Debug)]
pub(super) struct QueryValue<'q> {
    pub(super) value: Cow<'q, str>,
    pub(super) utf8: bool,
}

/// The first value of each query parameter RequestInfo reads, parsed like Go's
/// `url.ParseQuery`: pairs split on `&` only, a pair holding `;` or a malformed
/// escape is dropped whole, `+` is a space, and a key without `=` has value `""`.
#[derive(Debug, Default)]
pub(super) struct QueryParams<'q> {
    pub(super) watch: Option<QueryValue<'q>>,
    pub(super) field_selector: Option<QueryValue<'q>>,
    pub(super) label_selector: Option<QueryValue<'q>>,
    pub(super) limit: Option<QueryValue<'q>>,
    pub(super) timeout_seconds: Option<QueryValue<'q>>,
}

impl<'q> QueryParams<'q> {
    /// One pass over the raw query (`?` excluded), keeping the first value of each
    /// parameter of interest; later repeats are ignored, as `Values.Get` ignores them.
    pub(super) fn scan(query: &'q str) -> Self {
        let mut out = QueryParams::default();
        for pair in query.split('&') {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (raw_key, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
            let Some(key) = query_unescape(raw_key) else {
                continue;
            };
            let slot = match &*key.value {
                "watch" => &mut out.watch,
                "fieldSelector" => &mut out.field_selector,
                "labelSelector" => &mut out.label_selector,
                "limit" => &mut out.limit,
                "timeoutSeconds" => &mut out.timeout_seconds,
                _ => continue,
            };
            if slot.is_some() {
                continue;
            }
            if let Some(value) = query_unescape(raw_value) {
                *slot = Some(value);
            }
        }
        out
    }
}

/// The first value of query parameter `key`, as Go's `URL.Query().Get(key)` reads it (the
/// pairing rules of [`QueryParams`]), as bytes: a Go string may hold any byte, and error
/// messages quote them. `None` when the parameter is absent.
pub(crate) fn first_query_value<'q>(query: &'q str, key: &str) -> Option<Cow<'q, [u8]>> {
    for pair in query.split('&') {
        if pair.is_empty() || pair.contains(';') {
            continue;
        }
        let (raw_key, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
        match query_unescape(raw_key) {
            Some(k) if k.utf8 && k.value == key => {}
            _ => continue,
        }
        if let Some(value) = crate::gocompat::url::query_unescape(raw_value) {
            return Some(value);
        }
    }
    None
}

/// Go's `url.QueryUnescape` as text; `None` for a malformed escape.
fn query_unescape(raw: &str) -> Option<QueryValue<'_>> {
    Some(match crate::gocompat::url::query_unescape(raw)? {
        Cow::Borrowed(_) => QueryValue {
            value: Cow::Borrowed(raw),
            utf8: true,
        },
        Cow::Owned(bytes) => match String::from_utf8(bytes) {
            Ok(s) => QueryValue {
                value: Cow::Owned(s),
                utf8: true,
            },
            Err(e) => QueryValue {
                value: Cow::Owned(String::from_utf8_lossy(e.as_bytes()).into_owned()),
                utf8: false,
            },
        },
    })
}
