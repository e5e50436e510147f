//! Logic of the fuzz targets in `fuzz/fuzz_targets/`, compiled only under `cfg(fuzzing)`
//! (cargo-fuzz sets it), as linkerd2-proxy keeps its fuzz logic in the library
//! (`linkerd/addr/src/lib.rs` `fuzz_logic`).
//!
//! Living in the crate lets the targets reach `pub(crate)` parsers and keeps each target
//! a few lines long. Every function takes plain input, returns nothing and panics only
//! when an invariant the rest of the crate relies on does not hold: any panic here is a
//! finding.

use std::cmp::Ordering;

use http::uri::Authority;
use http::{HeaderName, Method, Request, Uri};
use percent_encoding::percent_decode_str;

use crate::apiservice::{ApiService, compare_kube_aware_versions, validate};
use crate::authn::UserInfo;
use crate::authz::request_info::RequestInfoConfig;
use crate::authz::{Attributes, RequestInfo, forbidden_message};
use crate::proxy::{encode_query, escape_extra_key, upstream_request, upstream_uri};
use crate::registry::Registry;
use crate::source::ApiServiceEvent;
use crate::transport::{BackendClient, BackendTarget, Transport, TransportError};

/// Methods a request may carry: the ones with a Kubernetes verb, the ones without, and
/// a lower-case extension method (Go compares method names case-sensitively, so `get`
/// must not become the `get` verb).
const METHODS: [&str; 12] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "get",
    "PROPFIND", "WATCH",
];

/// `method` picks one of a fixed set of methods; `uri` is parsed as a request target.
/// Checks that [`RequestInfo::from_parts`] never panics, agrees with the default
/// [`RequestInfoConfig`], and yields attributes the Forbidden message can be built from.
pub fn fuzz_request_info(method: u8, uri: &str) {
    let Ok(method) = Method::from_bytes(METHODS[usize::from(method) % METHODS.len()].as_bytes())
    else {
        return;
    };
    // A target hyper would refuse never reaches the stack.
    let Ok(uri) = Uri::try_from(uri) else {
        return;
    };
    let info = RequestInfo::from_parts(&method, &uri);
    assert_eq!(
        info,
        RequestInfoConfig::default().resolve(&method, &uri),
        "from_parts and the default configuration disagree on {method} {uri}"
    );
    let Ok(info) = info else {
        return;
    };
    if info.is_resource_request {
        assert!(
            info.api_prefix == "api" || info.api_prefix == "apis",
            "{info:?}"
        );
        if info.api_prefix == "api" {
            assert!(info.api_group.is_empty(), "{info:?}");
        }
        assert_eq!(
            info.parts.first().map_or("", String::as_str),
            info.resource,
            "{info:?}"
        );
        if info.verb == "proxy" {
            assert!(info.subresource.is_empty(), "{info:?}");
        }
    } else {
        assert_eq!(info.verb, method.as_str().to_ascii_lowercase(), "{info:?}");
    }
    let _ = info.is_long_running();
    let attrs = Attributes::new(UserInfo::new("alice", ["dev"]), &info);
    let _ = attrs.is_read_only();
    let _ = forbidden_message(&attrs, "no RBAC policy matched");
}

/// A transport that never builds a client, so the registry records the error and no
/// connection is attempted.
struct NoTransport;

impl Transport for NoTransport {
    fn client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        Err(TransportError(format!(
            "no transport while fuzzing ({})",
            target.server_name
        )))
    }
}

/// `data` is a manifest file (multi-document YAML or JSON). Checks that parsing,
/// validation and its messages, the version ordering and a registry resync never panic;
/// that every parsed APIService survives a JSON round trip unchanged; and that the
/// registry publishes exactly the APIServices validation accepts.
pub fn fuzz_manifests(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(services) = crate::source::parse_manifests(text) else {
        return;
    };
    let mut accepted = std::collections::BTreeSet::new();
    for svc in &services {
        match validate(svc) {
            Ok(()) => {
                accepted.insert(svc.metadata.name.clone());
            }
            Err(e) => {
                assert!(!e.errors.is_empty(), "a rejection names no field: {e:?}");
                let _ = e.to_string();
                for field in &e.errors {
                    let _ = field.body();
                }
            }
        }
        if let Ok(json) = serde_json::to_string(svc) {
            let back: Result<ApiService, _> = serde_json::from_str(&json);
            assert_eq!(back.as_ref().ok(), Some(svc), "JSON round trip of {json}");
        }
    }
    // The ordering must be a consistent total order, or group sorting is unstable.
    for a in services.iter().take(8) {
        for b in services.iter().take(8) {
            let (va, vb) = (&a.spec.version, &b.spec.version);
            assert_eq!(
                compare_kube_aware_versions(va, vb),
                compare_kube_aware_versions(vb, va).reverse(),
                "{va:?} vs {vb:?}"
            );
            if va == vb {
                assert_eq!(compare_kube_aware_versions(va, vb), Ordering::Equal);
            }
        }
    }
    let registry = Registry::new(NoTransport);
    let _ = registry.apply(ApiServiceEvent::Resynced(services));
    let table = registry.snapshot();
    // Later duplicates of a name replace earlier ones, so compare by name.
    let published: std::collections::BTreeSet<String> = table
        .routes()
        .map(|r| r.apiservice.name().to_owned())
        .collect();
    assert!(
        published.is_subset(&accepted),
        "published {published:?}, accepted {accepted:?}"
    );
    let _ = table.api_group_list_json();
}

/// `uri` is a request target, `query` a raw query string, `extra_key` a user-extra key.
/// Checks that the proxy's URL and header rewriting never panics, that a query encodes
/// to a fixed point, that the upstream URI keeps the backend authority and is stable
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
        assert_eq!(up.authority(), Some(&authority), "{up}");
        assert_eq!(up.scheme_str(), Some("https"), "{up}");
        if let Ok(again) = upstream_uri(&up, &authority) {
            assert_eq!(again, up, "rewriting {uri} twice");
        }
    }

    let mut user = UserInfo::new("alice", ["dev", "ops"]);
    user.extra
        .insert(extra_key.to_owned(), vec!["value".to_owned()]);
    let Ok(req) = Request::get(uri).body(crate::body::empty()) else {
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
