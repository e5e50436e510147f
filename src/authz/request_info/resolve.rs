//! The parse itself (k8s.io/apiserver `pkg/endpoints/request/requestinfo.go`,
//! `NewRequestInfo`): the path's segments into the API prefix, group, version, namespace,
//! resource, name and subresource, and the verb from the method and the query.

use std::borrow::Cow;

use http::{Method, Uri};
use percent_encoding::percent_decode_str;

use super::query::{QueryParams, QueryValue};
use super::{RequestInfo, RequestInfoError, path_segments, selector};

pub(super) fn resolve_with(
    is_api_prefix: impl Fn(&str) -> bool,
    is_groupless: impl Fn(&str) -> bool,
    method: &Method,
    uri: &Uri,
) -> Result<RequestInfo, RequestInfoError> {
    let path = decode_path(uri.path())?;
    // The segments on the stack: a resource path has at most 9 (a namespaced
    // subresource's); a longer one (a proxy's subpath) spills to the heap.
    let mut inline = [""; 16];
    let spilled: Vec<&str>;
    let segments: &[&str] = {
        let mut iter = path_segments(&path);
        let mut n = 0;
        loop {
            match iter.next() {
                None => break &inline[..n],
                Some(s) if n < inline.len() => {
                    inline[n] = s;
                    n += 1;
                }
                Some(s) => {
                    spilled = inline.iter().copied().chain([s]).chain(iter).collect();
                    break &spilled;
                }
            }
        }
    };
    let non_resource = || RequestInfo {
        path: path.to_string(),
        verb: method.as_str().to_ascii_lowercase(),
        ..RequestInfo::default()
    };

    if segments.len() < 3 {
        return Ok(non_resource());
    }
    let Some((&api_prefix, rest)) = segments.split_first() else {
        return Ok(non_resource());
    };
    if !is_api_prefix(api_prefix) {
        return Ok(non_resource());
    }
    let mut rest = rest;
    let mut api_group = "";
    if !is_groupless(api_prefix) {
        // The prefix is consumed already, so this asks for group, version and resource.
        if rest.len() < 3 {
            return Ok(non_resource());
        }
        if let Some((&group, tail)) = rest.split_first() {
            api_group = group;
            rest = tail;
        }
    }
    let Some((&api_version, tail)) = rest.split_first() else {
        return Ok(non_resource());
    };
    rest = tail;

    let mut verb = match rest.split_first() {
        Some((&special @ ("proxy" | "watch"), tail)) => {
            if tail.is_empty() {
                return Err(RequestInfoError::UnknownKindAndNamespace {
                    url: uri.to_string(),
                });
            }
            rest = tail;
            special
        }
        _ => verb_for_method(method),
    };

    let mut namespace = "";
    if let ["namespaces", ns, tail @ ..] = rest {
        namespace = ns;
        // `namespaces/<ns>/status` and `/finalize` are subresources of the namespace
        // object itself; anything else is a resource inside the namespace.
        if tail
            .first()
            .is_some_and(|next| !matches!(*next, "status" | "finalize"))
        {
            rest = tail;
        }
    }

    let parts = rest;
    let resource = parts.first().copied().unwrap_or("");
    if resource.is_empty() {
        return Err(RequestInfoError::EmptyResource {
            path: path.to_string(),
        });
    }
    let mut name: Cow<'_, str> = Cow::Borrowed(parts.get(1).copied().unwrap_or(""));
    let subresource = if verb == "proxy" {
        ""
    } else {
        parts.get(2).copied().unwrap_or("")
    };

    let mut field_selector = String::new();
    let mut label_selector = String::new();
    // Only a bare collection GET or DELETE reads the query. A verb taken from the path
    // (`/watch/`, `/proxy/`) never gets here, which is how upstream's rule "record
    // selectors only when the verb did not come from the path" holds: the deprecated
    // watch-by-path endpoints do not apply selectors consistently.
    if name.is_empty() && (verb == "get" || verb == "delete") {
        let query = QueryParams::scan(uri.query().unwrap_or(""));
        if verb == "get" {
            let (watch, selected) = list_or_watch(&query);
            verb = if watch { "watch" } else { "list" };
            if let Some(selected) = selected {
                name = Cow::Owned(selected);
            }
        } else {
            verb = "deletecollection";
        }
        if let Some(v) = query.field_selector {
            field_selector = v.value.into_owned();
        }
        if let Some(v) = query.label_selector {
            label_selector = v.value.into_owned();
        }
    }

    Ok(RequestInfo {
        is_resource_request: true,
        path: path.to_string(),
        verb: verb.to_owned(),
        api_prefix: api_prefix.to_owned(),
        api_group: api_group.to_owned(),
        api_version: api_version.to_owned(),
        namespace: namespace.to_owned(),
        resource: resource.to_owned(),
        subresource: subresource.to_owned(),
        name: name.into_owned(),
        parts: parts.iter().map(|p| (*p).to_owned()).collect(),
        field_selector,
        label_selector,
    })
}

/// The verb implied by the method alone; the comparison is case-sensitive, as in Go.
pub(super) fn verb_for_method(method: &Method) -> &'static str {
    match method.as_str() {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
}

/// Decides list versus watch for a bare collection GET, and the name a
/// `metadata.name` field selector pins, the way upstream decodes `ListOptions`
/// (`metainternalversionscheme.ParameterCodec.DecodeParameters`).
///
/// Decoding fails when `limit` or `timeoutSeconds` is not a base-10 i64, or the field
/// or label selector does not parse; upstream then drops every decoded option and reads
/// `watch` straight from the query with a slightly different comparison.
pub(super) fn list_or_watch(query: &QueryParams<'_>) -> (bool, Option<String>) {
    let int_ok =
        |v: &Option<QueryValue<'_>>| v.as_ref().is_none_or(|v| v.value.parse::<i64>().is_ok());
    let exact_name = match &query.field_selector {
        None => Ok(None),
        Some(v) if !v.utf8 => Err(selector::Invalid),
        Some(v) => selector::field_exact_match(&v.value, "metadata.name"),
    };
    let decoded = int_ok(&query.limit)
        && int_ok(&query.timeout_seconds)
        && query
            .label_selector
            .as_ref()
            .is_none_or(|v| selector::label_selector_is_valid(&v.value))
        && exact_name.is_ok();

    let watch = match &query.watch {
        None => false,
        Some(v) if decoded => !(v.value == "0" || equal_fold_false(&v.value)),
        // The fallback lower-cases instead of case-folding, so `falſe` differs.
        Some(v) => !(v.value == "0" || v.value.eq_ignore_ascii_case("false")),
    };
    let name = match exact_name {
        Ok(Some(n)) if decoded && is_valid_path_segment_name(&n) => Some(n.into_owned()),
        _ => None,
    };
    (watch, name)
}

/// Go's `strings.EqualFold(v, "false")`: simple Unicode case folding, under which the
/// long s `ſ` (U+017F) equals `s`. No other non-ASCII letter folds onto f, a, l or e.
pub(super) fn equal_fold_false(v: &str) -> bool {
    let mut chars = v.chars();
    let matches = |c: Option<char>, lower: char| {
        c.is_some_and(|c| c.to_ascii_lowercase() == lower || (lower == 's' && c == 'ſ'))
    };
    matches(chars.next(), 'f')
        && matches(chars.next(), 'a')
        && matches(chars.next(), 'l')
        && matches(chars.next(), 's')
        && matches(chars.next(), 'e')
        && chars.next().is_none()
}

/// apimachinery `path.IsValidPathSegmentName`: not `.` or `..`, no `/` or `%`.
pub(super) fn is_valid_path_segment_name(name: &str) -> bool {
    name != "." && name != ".." && !name.contains(['/', '%'])
}

/// Go's `URL.Path` decoding: every `%` must start a two-hex-digit escape; `+` stays.
pub(super) fn decode_path(raw: &str) -> Result<Cow<'_, str>, RequestInfoError> {
    if !raw.contains('%') {
        return Ok(Cow::Borrowed(raw));
    }
    if !crate::gocompat::url::escapes_well_formed(raw) {
        return Err(RequestInfoError::InvalidPathEscape {
            path: raw.to_owned(),
        });
    }
    percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| RequestInfoError::NonUtf8Path {
            path: raw.to_owned(),
        })
}
