//! Logic of the fuzz targets in `fuzz/fuzz_targets/`, compiled only under `cfg(fuzzing)`
//! (cargo-fuzz sets it), as linkerd2-proxy keeps its fuzz logic in the library
//! (`linkerd/addr/src/lib.rs` `fuzz_logic`).
//!
//! Living in the crate lets the targets reach `pub(crate)` parsers and keeps each target
//! a few lines long. Every function takes plain input, returns nothing and panics only
//! when an invariant the rest of the crate relies on does not hold: any panic here is a
//! finding.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::uri::Authority;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri};
use percent_encoding::percent_decode_str;
use tower::util::BoxCloneSyncService;

use crate::apiservice::{ApiService, compare_kube_aware_versions, validate};
use crate::authn::{
    CacheTtl, RequestHeaderConfig, TokenFileAuthenticator, TokenReviewAuthenticator, UserInfo,
    bearer_token,
};
use crate::authz::request_info::RequestInfoConfig;
use crate::authz::{
    Attributes, Authorizer, Decision, RequestInfo, SubjectAccessReview,
    SubjectAccessReviewAuthorizer, forbidden_message,
};
use crate::body::{Body, BoxError};
use crate::proxy::{encode_query, escape_extra_key, upstream_request, upstream_uri};
use crate::registry::Registry;
use crate::source::ApiServiceEvent;
use crate::testing::{ManualClock, NoExecutor, NoTransport, StoppedClock};
use crate::webhook::WebhookClient;

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
        // Authorization and the Forbidden message name the resource; a resource request
        // without one would be authorized as if it were about nothing.
        assert!(
            !info.resource.is_empty(),
            "resource request without a resource for {method} {uri}: {info:?}"
        );
    } else {
        assert_eq!(info.verb, method.as_str().to_ascii_lowercase(), "{info:?}");
    }
    let _ = info.is_long_running();
    let attrs = Attributes::new(UserInfo::new("alice", ["dev"]), &info);
    let _ = attrs.is_read_only();
    let _ = forbidden_message(&attrs, "no RBAC policy matched");
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

/// The four header lists of a [`RequestHeaderConfig`], as configured (any case, maybe
/// padded or invalid).
#[derive(Debug, Clone, Default)]
pub struct HeaderLists {
    /// `--requestheader-username-headers`.
    pub username: Vec<String>,
    /// `--requestheader-uid-headers`.
    pub uid: Vec<String>,
    /// `--requestheader-group-headers`.
    pub group: Vec<String>,
    /// `--requestheader-extra-headers-prefix`.
    pub extra_prefixes: Vec<String>,
}

/// `lists` configures the request-header authenticator; `headers` are request headers
/// as raw name and value bytes (pairs that are not a valid header are dropped, repeated
/// names append). Checks that [`RequestHeaderConfig::user_from_headers`] and
/// [`RequestHeaderConfig::clear`] never panic and agree on whether the configuration is
/// valid; that a user always has a non-empty name, non-empty groups and a UID some
/// header carried; that `clear` removes exactly the headers named by the (trimmed,
/// case-insensitive) names and prefixes, keeping every other header with all its values;
/// and that no user can be read from the cleared headers.
pub fn fuzz_request_header(lists: &HeaderLists, headers: &[(Vec<u8>, Vec<u8>)]) {
    let config = RequestHeaderConfig {
        username_headers: lists.username.clone(),
        uid_headers: lists.uid.clone(),
        group_headers: lists.group.clone(),
        extra_header_prefixes: lists.extra_prefixes.clone(),
    };
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
            map.append(n, v);
        }
    }
    let original = map.clone();

    let user = config.user_from_headers(&map);
    let mut cleared = map.clone();
    let clear = config.clear(&mut cleared);
    assert_eq!(user.is_ok(), clear.is_ok(), "{user:?} vs {clear:?}");
    let user = match user {
        Ok(user) => user,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            assert_eq!(
                cleared, original,
                "a rejected configuration changed the headers"
            );
            return;
        }
    };

    // What `clear` must match: names and prefixes trimmed, empty entries skipped, case
    // ignored (header names in a map are already lower case).
    let normalize = |raw: &[String]| -> Vec<String> {
        raw.iter()
            .map(|n| n.trim().to_ascii_lowercase())
            .filter(|n| !n.is_empty())
            .collect()
    };
    let user_names = normalize(&lists.username);
    let uid_names = normalize(&lists.uid);
    let mut exact = user_names.clone();
    exact.extend(uid_names.iter().cloned());
    exact.extend(normalize(&lists.group));
    let prefixes = normalize(&lists.extra_prefixes);
    let doomed = |n: &HeaderName| {
        exact.iter().any(|e| e == n.as_str()) || prefixes.iter().any(|p| n.as_str().starts_with(p))
    };
    for name in cleared.keys() {
        assert!(!doomed(name), "{name} survived clear; config {lists:?}");
    }
    for name in original.keys() {
        if doomed(name) {
            continue;
        }
        let before: Vec<&HeaderValue> = original.get_all(name).iter().collect();
        let after: Vec<&HeaderValue> = cleared.get_all(name).iter().collect();
        assert_eq!(before, after, "clear touched the unrelated header {name}");
    }
    assert_eq!(
        config.user_from_headers(&cleared).ok().flatten(),
        None,
        "a user is still readable after clear"
    );

    let Some(user) = user else {
        return;
    };
    assert!(!user.name.is_empty(), "{user:?}");
    assert!(
        user_names.iter().any(|n| original.contains_key(n.as_str())),
        "a user without any username header: {user:?}"
    );
    assert!(user.groups.iter().all(|g| !g.is_empty()), "{user:?}");
    if !user.uid.is_empty() {
        assert!(
            uid_names.iter().any(|n| original
                .get_all(n.as_str())
                .iter()
                .any(|v| v.as_bytes() == user.uid.as_bytes())),
            "a UID no UID header carried: {user:?}"
        );
    }
}

/// `data` is the text of a `--token-auth-file`. Checks that
/// [`TokenFileAuthenticator::from_csv`] never panics; that it fails exactly when the CSV
/// is malformed or a record has fewer than 3 columns, with an error naming a line; and
/// that after a successful load every token `lookup` finds is the non-empty token of a
/// record, mapped to the last such record's user, uid and groups, while the empty token
/// and tokens of no record find nothing.
pub fn fuzz_token_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let loaded = TokenFileAuthenticator::from_csv(text);

    let mut records = Vec::new();
    let mut malformed = None;
    for record in crate::authn::parse_csv(text) {
        match record {
            Ok((line, fields)) if fields.len() >= 3 => records.push((line, fields)),
            Ok((line, _)) => {
                malformed = Some(line);
                break;
            }
            Err(e) => {
                malformed = e.line.or(Some(0));
                break;
            }
        }
    }
    let tokens = match (loaded, malformed) {
        (Err(e), Some(_)) => {
            assert!(e.line.is_some_and(|l| l >= 1), "{e:?}");
            assert!(e.to_string().contains(" line "), "{e}");
            return;
        }
        (Err(e), None) => panic!("well-formed file rejected: {e}"),
        (Ok(t), Some(line)) => panic!("malformed line {line} accepted ({} tokens)", t.len()),
        (Ok(t), None) => t,
    };

    assert!(tokens.lookup("").is_none(), "the empty token authenticates");
    // The last record of each non-empty token wins.
    let mut expected: HashMap<&str, &[String]> = HashMap::new();
    for (_, fields) in &records {
        if let Some(token) = fields.first().filter(|t| !t.is_empty()) {
            expected.insert(token, fields);
        }
    }
    assert_eq!(tokens.len(), expected.len());
    for (token, fields) in &expected {
        let user = tokens.lookup(token);
        let Some(user) = user else {
            panic!("token of a record not found");
        };
        assert_eq!(Some(&user.name), fields.get(1));
        assert_eq!(Some(&user.uid), fields.get(2));
        let groups: Vec<String> = fields
            .get(3)
            .map(|g| g.split(',').map(str::to_owned).collect())
            .unwrap_or_default();
        assert_eq!(user.groups, groups);
    }
    // Any other string of the file is not a token unless some record says so.
    for (_, fields) in &records {
        for probe in fields.iter().skip(1) {
            if tokens.lookup(probe).is_some() {
                assert!(
                    expected.contains_key(probe.as_str()),
                    "a lookup found a string that is no record's token"
                );
            }
        }
    }
}

/// `authorization` is an `Authorization` header value. Checks that [`bearer_token`]
/// never panics and finds a token exactly when the trimmed value is `bearer` (any case),
/// one space and a non-empty run of non-space characters, optionally followed by a space
/// and anything; the token is that run, so it is non-empty, has no space and is a
/// substring of the value.
pub fn fuzz_bearer(authorization: &str) {
    let token = bearer_token(authorization);
    let trimmed = authorization.trim();
    let expected = trimmed
        .get(..7)
        .filter(|p| p.eq_ignore_ascii_case("bearer "))
        .and_then(|_| trimmed.get(7..))
        .and_then(|rest| rest.split(' ').next())
        .filter(|t| !t.is_empty());
    assert_eq!(token, expected, "{authorization:?}");
    if let Some(token) = token {
        assert!(!token.is_empty());
        assert!(!token.contains(' '), "{token:?}");
        assert!(authorization.contains(token), "{token:?}");
    }
}

/// Status codes a webhook may answer with: success, client errors, and the transient
/// ones the client retries.
const WEBHOOK_STATUSES: [u16; 8] = [200, 200, 201, 204, 400, 429, 500, 503];

/// A webhook client whose server answers every call with `status` and `body`.
fn canned_webhook(status: StatusCode, body: Bytes) -> WebhookClient {
    let svc = tower::service_fn(move |_req: Request<Body>| {
        let body = body.clone();
        async move {
            let mut res = http::Response::new(Body::full(body));
            *res.status_mut() = status;
            Ok::<_, BoxError>(res)
        }
    });
    WebhookClient::new(
        BoxCloneSyncService::new(svc),
        Uri::from_static("https://webhook.example/review"),
        ManualClock::new().timer(),
    )
}

/// Runs `fut` (`what` names it in the panic), which must not wait on anything: the
/// canned servers, the in-memory backends and the clocks are all ready at once, so a
/// future still pending after many polls hangs, which is a finding.
fn run_ready<F: Future>(fut: F, what: &str) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..1024 {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
    }
    panic!("{what} did not complete although everything it waits on is ready");
}

/// `status` picks the webhook's HTTP status; `body` is its answer. Decodes `body` as a
/// SubjectAccessReview and as a TokenReview response, directly and through
/// [`SubjectAccessReviewAuthorizer`] and [`TokenReviewAuthenticator`] over a canned
/// webhook. Checks that nothing panics; that a decoded SubjectAccessReview survives a
/// JSON round trip; that `allowed && !denied` decides Allow, `denied` never Allow
/// (`allowed && denied` an error), neither NoOpinion, the reason passing through; that
/// the authorizer decides exactly what the decoded status says and errors for a
/// non-2xx answer or an undecodable body; and that the TokenReview authenticator
/// returns a user only for a 2xx answer whose `status.authenticated` is `true`, and
/// with wanted audiences only when the answer lists one of them.
pub fn fuzz_webhook_responses(status: u8, body: &[u8]) {
    let code = WEBHOOK_STATUSES[usize::from(status) % WEBHOOK_STATUSES.len()];
    let Ok(code) = StatusCode::from_u16(code) else {
        return;
    };
    let body = Bytes::copy_from_slice(body);

    let review: Option<SubjectAccessReview> = serde_json::from_slice(&body).ok();
    if let Some(review) = &review {
        let s = &review.status;
        let decision = s.decision();
        match (s.allowed, s.denied) {
            (true, true) => assert!(decision.is_err(), "{s:?} -> {decision:?}"),
            (_, true) => {
                assert_eq!(decision.as_ref().map(|d| d.decision), Ok(Decision::Deny))
            }
            (true, false) => {
                assert_eq!(decision.as_ref().map(|d| d.decision), Ok(Decision::Allow))
            }
            (false, false) => assert_eq!(
                decision.as_ref().map(|d| d.decision),
                Ok(Decision::NoOpinion)
            ),
        }
        if let Ok(d) = &decision {
            assert_eq!(d.reason, s.reason);
        }
        if let Ok(json) = serde_json::to_vec(review) {
            let back: Result<SubjectAccessReview, _> = serde_json::from_slice(&json);
            assert_eq!(back.as_ref().ok(), Some(review), "JSON round trip");
        }
    }

    let info = RequestInfo {
        is_resource_request: true,
        verb: "get".into(),
        api_prefix: "apis".into(),
        api_group: "metrics.k8s.io".into(),
        api_version: "v1beta1".into(),
        resource: "nodes".into(),
        parts: vec!["nodes".into()],
        ..RequestInfo::default()
    };
    let attrs = Attributes::new(UserInfo::new("alice", ["dev"]), &info);
    let authorizer = SubjectAccessReviewAuthorizer::new(
        canned_webhook(code, body.clone()),
        ManualClock::new().timer(),
    );
    let decided = run_ready(
        authorizer.authorize(&attrs),
        "a SubjectAccessReview webhook call",
    );
    match (&review, code.is_success()) {
        (Some(review), true) => {
            let direct = review.status.decision();
            assert_eq!(
                decided
                    .as_ref()
                    .map(|a| (a.decision, a.reason.as_str()))
                    .ok(),
                direct
                    .as_ref()
                    .map(|a| (a.decision, a.reason.as_str()))
                    .ok(),
                "authorizer and decoded status disagree"
            );
            assert_eq!(
                decided.is_err(),
                direct.is_err(),
                "{decided:?} vs {direct:?}"
            );
            // A second ask must give the same answer, cached or not.
            let again = run_ready(
                authorizer.authorize(&attrs),
                "a SubjectAccessReview webhook call",
            );
            assert_eq!(
                again.as_ref().map(|a| a.decision).ok(),
                decided.as_ref().map(|a| a.decision).ok()
            );
        }
        _ => assert!(decided.is_err(), "{code} {decided:?}"),
    }

    // Go's decoder replaces invalid UTF-8 inside strings instead of failing, and serde
    // skips fields it ignores without checking them, so read the answer the lenient way.
    let token_review: Option<serde_json::Value> =
        serde_json::from_str(&String::from_utf8_lossy(&body)).ok();
    for wanted in [Vec::new(), vec!["api".to_owned()]] {
        let Ok(authn) = TokenReviewAuthenticator::new(
            canned_webhook(code, body.clone()),
            ManualClock::new().timer(),
            CacheTtl::default(),
        ) else {
            return;
        };
        let outcome = run_ready(authn.review("t0ken", &wanted), "a TokenReview webhook call");
        let Ok(Some(user)) = outcome else {
            continue;
        };
        assert!(code.is_success(), "{code} authenticated {user:?}");
        let status = token_review.as_ref().map(|v| &v["status"]);
        assert_eq!(
            status.map(|s| &s["authenticated"]),
            Some(&serde_json::Value::Bool(true)),
            "authenticated {user:?} without status.authenticated"
        );
        if !wanted.is_empty() {
            let listed: BTreeSet<&str> = status
                .and_then(|s| s["audiences"].as_array())
                .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
                .unwrap_or_default();
            assert!(listed.contains("api"), "audiences {listed:?} for {user:?}");
        }
    }
}

/// The `--token-auth-file` of the whole-stack target: an admin (group `admins`), a
/// viewer, a user allowed only the core group, and a user the policy has no opinion on.
const STACK_TOKENS: &str = "admin-token,admin,1,\"admins\"\n\
viewer-token,viewer,2\n\
core-token,core,4\n\
nobody-token,nobody,3,\"x,y\"\n";

/// `Authorization` values the target may add: none, each known token, an unknown
/// token, a basic credential, and malformed bearer forms.
const STACK_CREDENTIALS: [&str; 9] = [
    "",
    "Bearer admin-token",
    "Bearer viewer-token",
    "Bearer core-token",
    "Bearer nobody-token",
    "Bearer wrong-token",
    "Basic YWRtaW46YWRtaW4=",
    "bearer  admin-token",
    "Bearer admin-token extra",
];

/// Header names a client might use to smuggle identity or confuse the proxy; a
/// header's selector picks one of these, or its raw name when past the end.
const STACK_HEADER_NAMES: [&str; 22] = [
    "authorization",
    "proxy-authorization",
    "x-remote-user",
    "x-remote-group",
    "x-remote-uid",
    "x-remote-extra-scopes",
    "X-Remote-Extra-Foo%2Fbar",
    "impersonate-user",
    "impersonate-group",
    "impersonate-uid",
    "impersonate-extra-scopes",
    "connection",
    "upgrade",
    "host",
    "x-forwarded-for",
    "te",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "content-type",
    "accept",
    "sec-websocket-protocol",
];

/// Request-target prefixes of the whole-stack target, so that inputs reach every route.
const STACK_TARGET_PREFIXES: [&str; 13] = [
    "",
    "/apis/metrics.k8s.io/v1beta1/",
    "/apis/metrics.k8s.io/v1beta1/namespaces/",
    // Empty or escaped segments where group or version belong: authorization and
    // routing must read these alike.
    "/apis//metrics.k8s.io/v1beta1/",
    "/apis/metrics.k8s.io//v1beta1/",
    "/apis/%2Fmetrics.k8s.io/v1beta1/",
    "/apis/metrics.k8s.io%2Fv1beta1/",
    "//apis/metrics.k8s.io/v1beta1/",
    "/apis/down.example.com/v1/",
    "/apis/missing.example.com/v1/",
    "/apis/local.example.com/v1/",
    "/apis",
    "/api/v1/",
];

/// One header of a whole-stack input.
#[derive(Debug, Clone)]
pub struct StackHeader<'a> {
    /// Picks a name from a fixed list of sensitive headers; past its end `name` is used.
    pub name_choice: u8,
    /// The raw header name used when `name_choice` is past the list.
    pub name: &'a str,
    /// The raw header value.
    pub value: &'a [u8],
}

impl StackHeader<'_> {
    /// The header name this input stands for.
    fn header_name(&self) -> &str {
        STACK_HEADER_NAMES
            .get(usize::from(self.name_choice))
            .copied()
            .unwrap_or(self.name)
    }
}

/// One request of the whole-stack target.
#[derive(Debug, Clone)]
pub struct StackInput<'a> {
    /// Picks the method (the fixed list of [`fuzz_request_info`]).
    pub method: u8,
    /// Picks a prefix of the request target: one per APIService of the table, discovery,
    /// the core API, or none.
    pub target_prefix: u8,
    /// The rest of the request target; prefix and rest are parsed as a URI (origin or
    /// absolute form).
    pub target: &'a str,
    /// Picks an `Authorization` value added after the other headers (0: none).
    pub credential: u8,
    /// Further headers, in order.
    pub headers: Vec<StackHeader<'a>>,
    /// The request body.
    pub body: &'a [u8],
}

/// What the in-memory extension server received.
struct SeenRequest {
    uri: Uri,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
}

type DecisionLog = std::sync::Arc<std::sync::Mutex<Vec<(Attributes, Decision)>>>;

/// The fixed policy of the whole-stack target, recording every decision: `admins` may do
/// anything; `viewer` may get/list/watch in `metrics.k8s.io`; `core` may do anything in
/// the core group (and nothing in `metrics.k8s.io`); any authenticated user may GET
/// non-resource URLs under `/apis` (discovery); `nobody` gets no opinion; the rest is
/// denied.
struct RecordingPolicy(DecisionLog);

impl Authorizer for RecordingPolicy {
    fn authorize(&self, attrs: &Attributes) -> crate::authz::AuthorizeFuture {
        let u = &attrs.user;
        let admin = u.groups.iter().any(|g| g == "admins");
        let viewer = u.name == "viewer"
            && attrs.is_resource_request
            && attrs.api_group == "metrics.k8s.io"
            && matches!(attrs.verb.as_str(), "get" | "list" | "watch");
        let core = u.name == "core" && attrs.is_resource_request && attrs.api_group.is_empty();
        let discovery = !attrs.is_resource_request
            && attrs.verb == "get"
            && (attrs.path == "/apis" || attrs.path.starts_with("/apis/"))
            && u.groups
                .iter()
                .any(|g| g == crate::authn::SYSTEM_AUTHENTICATED);
        // Impersonation: admins may impersonate anyone but the system:masters group; the
        // viewer may impersonate the user `core` and nothing else.
        let impersonate = attrs.verb == "impersonate" && attrs.is_resource_request;
        let may_impersonate = impersonate
            && ((admin && !(attrs.resource == "groups" && attrs.name == "system:masters"))
                || (u.name == "viewer" && attrs.resource == "users" && attrs.name == "core"));
        let decision = if impersonate {
            if may_impersonate {
                Decision::Allow
            } else {
                Decision::NoOpinion
            }
        } else if admin || viewer || core || discovery {
            Decision::Allow
        } else if u.name == "nobody" {
            Decision::NoOpinion
        } else {
            Decision::Deny
        };
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((attrs.clone(), decision));
        let mut answer = crate::authz::Authorization::new(decision);
        answer.reason = "fuzz policy".to_owned();
        Box::pin(std::future::ready(Ok(answer)))
    }
}

/// An APIService `<version>.<group>` served by `<service>.<namespace>.svc`, or local.
fn stack_apiservice(group: &str, service: Option<(&str, &str)>) -> ApiService {
    let mut svc = ApiService::default();
    svc.metadata.name = format!("v1.{group}");
    svc.spec.group = group.to_owned();
    svc.spec.version = "v1".to_owned();
    svc.spec.group_priority_minimum = 1000;
    svc.spec.version_priority = 15;
    if let Some((namespace, name)) = service {
        svc.spec.insecure_skip_tls_verify = true;
        svc.spec.service = Some(crate::apiservice::ServiceReference {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            port: None,
        });
    }
    svc
}

/// An in-memory extension server that records each request (body read to the end) and
/// answers 200.
fn recording_backend(
    seen: std::sync::Arc<std::sync::Mutex<Vec<SeenRequest>>>,
) -> impl tower::Service<
    Request<Body>,
    Response = http::Response<Body>,
    Error = BoxError,
    Future = impl Future<Output = Result<http::Response<Body>, BoxError>> + Send,
> + Clone
+ Send
+ Sync
+ 'static {
    tower::service_fn(move |req: Request<Body>| {
        let seen = seen.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body = http_body_util::BodyExt::collect(body).await?.to_bytes();
            seen.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(SeenRequest {
                    uri: parts.uri,
                    method: parts.method,
                    headers: parts.headers,
                    body,
                });
            let mut res = http::Response::new(Body::full(r#"{"kind":"NodeMetricsList"}"#));
            res.headers_mut()
                .insert("x-fuzz-backend", HeaderValue::from_static("metrics"));
            Ok::<_, BoxError>(res)
        }
    })
}

/// The host's own handler: an empty `/apis` group list, a Status 404 for the rest.
async fn stack_host(req: Request<Body>) -> Result<http::Response<Body>, std::convert::Infallible> {
    if req.uri().path() == "/apis" {
        let mut res = http::Response::new(Body::full(
            r#"{"kind":"APIGroupList","apiVersion":"v1","groups":[]}"#,
        ));
        res.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return Ok(res);
    }
    let mut res = crate::status::Status::failure(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
    )
    .into_response();
    res.headers_mut()
        .insert("x-fuzz-host", HeaderValue::from_static("1"));
    Ok(res)
}

/// Sends one arbitrary request through the stack of `Aggregator::builder`:
/// kube-apiserver's chain with authentication by a token file then anonymous, a recording
/// policy for impersonation, authorization and the self reviews, and the aggregator (four APIServices:
/// `metrics.k8s.io` on an in-memory backend, `down.example.com` whose backend exists but
/// whose `Available` is False, `missing.example.com` with no backend, `local.example.com`
/// served by the host) over [`crate::transport::InMemoryTransport`].
///
/// Checks that nothing panics and a response comes for every request without waiting on
/// anything; that the backend of an unavailable APIService is never called; that the
/// backend is called at most once, only for `metrics.k8s.io`, only after the policy
/// allowed, and sees the allowed user's identity exactly (`X-Remote-User`, one
/// `X-Remote-Group` per group in order, `X-Remote-Uid`, no `X-Remote-Extra-*`), no
/// `Authorization`, `Proxy-Authorization` or `Impersonate-*`, and the request's body
/// unchanged; that a request the policy did not allow gets 403 without reaching the
/// backend; and that every error answered by the stack itself is either a `Status` with a
/// message whose `code` is the HTTP status, or Go's `http.Error` plain text where upstream
/// answers with it (the proxy handler's 503/404, `InternalError`).
pub fn fuzz_stack(input: &StackInput<'_>) {
    use std::sync::{Arc, Mutex, PoisonError};

    use tower::{Layer, ServiceExt};

    use crate::authn::{Anonymous, BearerToken, ConnectionInfo, Union};
    use crate::availability::StaticServiceResolver;
    use crate::transport::InMemoryTransport;
    use crate::{Aggregator, apiservice::ConditionStatus};

    let prefix =
        STACK_TARGET_PREFIXES[usize::from(input.target_prefix) % STACK_TARGET_PREFIXES.len()];
    let Ok(uri) = Uri::try_from(format!("{prefix}{}", input.target)) else {
        return;
    };
    let method = Method::from_bytes(METHODS[usize::from(input.method) % METHODS.len()].as_bytes())
        .unwrap_or(Method::GET);

    // The extension servers and the table.
    let metrics_seen = Arc::new(Mutex::new(Vec::new()));
    let down_seen = Arc::new(Mutex::new(Vec::new()));
    let transport = InMemoryTransport::new();
    transport.insert(
        "metrics-server.kube-system.svc",
        recording_backend(metrics_seen.clone()),
    );
    transport.insert("down.default.svc", recording_backend(down_seen.clone()));
    let services = vec![
        {
            let mut s = stack_apiservice("metrics.k8s.io", Some(("kube-system", "metrics-server")));
            s.metadata.name = "v1beta1.metrics.k8s.io".to_owned();
            s.spec.version = "v1beta1".to_owned();
            s
        },
        stack_apiservice("down.example.com", Some(("default", "down"))),
        stack_apiservice("missing.example.com", Some(("default", "missing"))),
        stack_apiservice("local.example.com", None),
    ];
    let mut resolver = StaticServiceResolver::new();
    for (ns, name, addr) in [
        ("kube-system", "metrics-server", "10.0.0.5:4443"),
        ("default", "down", "10.0.0.9:443"),
        ("default", "missing", "10.0.0.10:443"),
    ] {
        if let Err(e) = resolver.insert(ns, name, 443, addr) {
            panic!("resolver: {e}");
        }
    }

    // Authentication and authorization.
    let tokens = match TokenFileAuthenticator::from_csv(STACK_TOKENS) {
        Ok(t) => t,
        Err(e) => panic!("the target's token file: {e}"),
    };
    let authn = Union::new()
        .push(BearerToken::new(tokens))
        .with_anonymous(Anonymous::new());
    let decisions: DecisionLog = Arc::new(Mutex::new(Vec::new()));
    let policy = RecordingPolicy(decisions.clone());
    // kube-apiserver's chain, as `Aggregator::builder` assembles it. The stopped clock
    // never ends a deadline, so the timeout layer is on the path without deciding
    // anything; its time never passes the worker's start-up grace either, so the worker
    // is kept (not run: the conditions are set by hand below, and its probes would call
    // the backends) and the stack routes as with a running one.
    let (aggregator, _worker) = Aggregator::builder(transport)
        .resolver(resolver)
        .authenticator(authn)
        .authorizer(policy)
        .runtime(NoExecutor::executor(), StoppedClock::new().timer())
        .max_requests_inflight(400, 200, 100)
        .build()
        .unwrap_or_else(|e| panic!("the target's stack: {e}"));
    if let Err(e) = aggregator
        .registry()
        .apply(ApiServiceEvent::Resynced(services))
    {
        panic!("the target's APIServices were rejected: {e}");
    }
    for name in ["v1beta1.metrics.k8s.io", "v1.missing.example.com"] {
        aggregator.registry().set_available_condition(
            name,
            crate::apiservice::ConditionStatus::True,
            "Passed",
            "all checks passed",
        );
    }
    aggregator.registry().set_available_condition(
        "v1.down.example.com",
        ConditionStatus::False,
        "FailedDiscoveryCheck",
        "failing or missing response from https://10.0.0.9:443/apis/down.example.com/v1",
    );
    let stack = aggregator.layer(tower::service_fn(stack_host));

    // The request.
    let mut req = Request::new(if input.body.is_empty() {
        Body::empty()
    } else {
        Body::full(Bytes::copy_from_slice(input.body))
    });
    *req.method_mut() = method.clone();
    *req.uri_mut() = uri;
    for h in &input.headers {
        let name = h.header_name();
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(h.value),
        ) else {
            continue;
        };
        req.headers_mut().append(name, value);
    }
    let credential = STACK_CREDENTIALS[usize::from(input.credential) % STACK_CREDENTIALS.len()];
    if !credential.is_empty() {
        req.headers_mut().append(
            http::header::AUTHORIZATION,
            HeaderValue::from_static(credential),
        );
    }
    let sent_authorization = req.headers().contains_key(http::header::AUTHORIZATION);
    // What the client asked to impersonate, read as the impersonation filter reads it.
    let asked = crate::impersonation::requested(req.headers());
    req.extensions_mut().insert(ConnectionInfo {
        remote_addr: Some(std::net::SocketAddr::from(([192, 0, 2, 7], 40000))),
        ..ConnectionInfo::default()
    });

    let response = match run_ready(stack.oneshot(req), "the stack") {
        Ok(r) => r,
        Err(never) => match never {},
    };
    let (parts, body) = response.into_parts();
    let body = match run_ready(http_body_util::BodyExt::collect(body), "the response body") {
        Ok(b) => b.to_bytes(),
        Err(e) => panic!("the response body failed: {e}"),
    };
    let status = parts.status;

    let decisions = decisions.lock().unwrap_or_else(PoisonError::into_inner);
    let down_seen = down_seen.lock().unwrap_or_else(PoisonError::into_inner);
    assert!(
        down_seen.is_empty(),
        "the backend of an unavailable APIService was called"
    );
    let seen = metrics_seen.lock().unwrap_or_else(PoisonError::into_inner);
    assert!(
        seen.len() <= 1,
        "one request reached the backend {} times",
        seen.len()
    );
    // The impersonation checks come first, then at most one decision on the request.
    let checks = decisions
        .iter()
        .take_while(|(a, _)| a.verb == "impersonate" && a.is_resource_request)
        .count();
    let (impersonation_checks, decisions) = decisions.split_at(checks);
    assert!(
        decisions.len() <= 1,
        "one request was authorized {} times",
        decisions.len()
    );
    let impersonated = match &asked {
        Ok(items) if !items.is_empty() => Some(items.as_slice()),
        _ => None,
    };
    if let Some(items) = impersonated {
        // No impersonated identity without every check having allowed it: a decision on
        // the request means every item was asked about, in order, and allowed.
        if let Some((attrs, _)) = decisions.first() {
            assert_eq!(
                impersonation_checks.len(),
                items.len(),
                "{} impersonation checks for {items:?}",
                impersonation_checks.len()
            );
            for ((check, decision), item) in impersonation_checks.iter().zip(items) {
                let want = item.attributes(&check.user);
                assert_eq!(
                    (
                        &check.resource,
                        &check.name,
                        &check.subresource,
                        &check.namespace
                    ),
                    (
                        &want.resource,
                        &want.name,
                        &want.subresource,
                        &want.namespace
                    ),
                    "checked out of order"
                );
                assert_eq!(
                    *decision,
                    Decision::Allow,
                    "{item:?} was not allowed, yet the request went on"
                );
            }
            assert_eq!(
                attrs.user,
                crate::impersonation::impersonated_user(items),
                "the request was authorized as someone else"
            );
        }
    } else {
        assert!(
            impersonation_checks.is_empty(),
            "impersonation checks without impersonation headers"
        );
    }

    // Who the stack believed the caller was, if it got as far as authorization.
    if let (Some((Attributes { user, .. }, _)), None) = (decisions.first(), impersonated) {
        if !sent_authorization {
            assert_eq!(
                user.name,
                crate::authn::SYSTEM_ANONYMOUS,
                "no credential, yet {user:?}"
            );
        }
        if credential == "Bearer admin-token" && req_had_single_authorization(&input.headers) {
            assert_eq!(user.name, "admin", "the admin token authenticated {user:?}");
        }
    }

    if let Some(seen) = seen.first() {
        let Some((attrs, decision)) = decisions.first() else {
            panic!(
                "a request reached the backend without authorization: {} {}",
                seen.method, seen.uri
            );
        };
        let user = &attrs.user;
        // What was authorized names the APIService's own group and version: a resource
        // in metrics.k8s.io/v1beta1, or a non-resource path at or below the group-version
        // (its discovery document; `/apis/metrics.k8s.io/v1beta1//` is one too, for
        // RequestInfo trims trailing slashes, and upstream proxies it the same way).
        let own = if attrs.is_resource_request {
            attrs.api_group == "metrics.k8s.io" && attrs.api_version == "v1beta1"
        } else {
            // The group-version root, with any number of trailing slashes: RequestInfo
            // trims them (a non-resource request), the mux routes by prefix, as upstream.
            attrs
                .path
                .strip_prefix("/apis/metrics.k8s.io/v1beta1")
                .is_some_and(|rest| rest.bytes().all(|b| b == b'/'))
        };
        assert!(
            own,
            "the metrics backend was reached by {} {} authorized as {attrs:?}",
            seen.method, seen.uri
        );
        assert_eq!(
            *decision,
            Decision::Allow,
            "a {decision:?} request reached the backend"
        );
        assert_eq!(seen.method, method, "the method changed on the way");
        assert!(
            seen.uri.path().starts_with("/apis/metrics.k8s.io/"),
            "the metrics backend was sent {}",
            seen.uri
        );
        assert_eq!(seen.body, input.body, "the body changed on the way");
        for (name, _) in &seen.headers {
            let n = name.as_str();
            assert!(
                n != "authorization"
                    && n != "proxy-authorization"
                    && !n.starts_with("impersonate-"),
                "the backend was sent {n}"
            );
            // What a backend's request-header authenticator reads: the three names and
            // the extra prefix. The target's users have no extra of their own, so an
            // extra header is one the impersonation checks allowed, or came from the
            // client. (Other `x-remote-*` names mean nothing to it, and upstream passes
            // them on too.)
            if let Some(key) = n.strip_prefix("x-remote-extra-") {
                assert!(
                    user.extra
                        .keys()
                        .any(|k| crate::proxy::escape_extra_key(k).eq_ignore_ascii_case(key)),
                    "the backend was sent {n} for {user:?}"
                );
            }
        }
        let values = |n: &str| -> Vec<&[u8]> {
            seen.headers
                .get_all(n)
                .iter()
                .map(HeaderValue::as_bytes)
                .collect()
        };
        assert_eq!(
            values("x-remote-user"),
            [user.name.as_bytes()],
            "X-Remote-User for {user:?}"
        );
        let groups: Vec<&[u8]> = user.groups.iter().map(|g| g.as_bytes()).collect();
        assert_eq!(
            values("x-remote-group"),
            groups,
            "X-Remote-Group for {user:?}"
        );
        let uid: Vec<&[u8]> = if user.uid.is_empty() {
            Vec::new()
        } else {
            vec![user.uid.as_bytes()]
        };
        assert_eq!(values("x-remote-uid"), uid, "X-Remote-Uid for {user:?}");
        assert_eq!(status, StatusCode::OK, "the backend's answer was replaced");
        return;
    }

    // The backend was not reached: the stack answered itself.
    if let Some((Attributes { user, .. }, decision)) = decisions.first() {
        if *decision != Decision::Allow {
            assert_eq!(
                status,
                StatusCode::FORBIDDEN,
                "{decision:?} for {user:?} answered {status}"
            );
        }
    } else {
        assert!(
            status.is_client_error() || status.is_server_error(),
            "{status} without authorization"
        );
    }
    let from_stack = !parts.headers.contains_key("x-fuzz-host");
    if from_stack && (status.is_client_error() || status.is_server_error()) {
        let content_type = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .map(HeaderValue::as_bytes)
            .unwrap_or_default();
        if content_type == b"text/plain; charset=utf-8" {
            // Go's `http.Error`, which upstream's proxy handler and InternalError use.
            assert_eq!(
                parts
                    .headers
                    .get(http::header::X_CONTENT_TYPE_OPTIONS)
                    .map(HeaderValue::as_bytes),
                Some(&b"nosniff"[..]),
                "a plain-text {status} without nosniff"
            );
            assert!(
                body.ends_with(b"\n"),
                "a plain-text {status} not ending in a newline"
            );
        } else {
            assert_eq!(
                content_type, b"application/json",
                "a {status} answered as {content_type:?}"
            );
            let v: serde_json::Value = match serde_json::from_slice(&body) {
                Ok(v) => v,
                Err(e) => panic!(
                    "a {status} answer is not JSON ({e}): {:?}",
                    String::from_utf8_lossy(&body)
                ),
            };
            assert_eq!(
                v["kind"], "Status",
                "a {status} answer is not a Status: {v}"
            );
            assert_eq!(
                v["code"],
                status.as_u16(),
                "a {status} Status says {}",
                v["code"]
            );
            assert!(
                v["message"].as_str().is_some_and(|m| !m.is_empty()),
                "a {status} Status without a message: {v}"
            );
        }
    }
}

/// True when the only `Authorization` header of the input is the one the target adds.
fn req_had_single_authorization(headers: &[StackHeader<'_>]) -> bool {
    !headers
        .iter()
        .any(|h| h.header_name().eq_ignore_ascii_case("authorization"))
}

/// A backend's discovery document or OpenAPI spec, read with a limit of
/// `limit_step * 64` bytes. Checks that the bounded read refuses exactly the documents
/// over the limit (naming it) and returns the others whole; that a v2 document decodes
/// or fails without panicking, and one that decodes builds an aggregated document whose
/// body is JSON and whose ETag is a quoted 128-digit hex SHA-512; that a legacy resource
/// list converts or fails; and that a spec that parses as JSON survives filtering,
/// merging with itself (clashing definitions renamed), the gnostic protobuf encoding
/// (which must decode again) and the v2-to-v3 conversion.
pub fn fuzz_discovery_documents(limit_step: u8, data: &[u8]) {
    use crate::discovery::v2::{ApiGroupDiscoveryList, ApiResourceList, convert_legacy_resources};
    use crate::discovery::{AggregatedVersion, DocumentBuilder, VersionEntry};
    use crate::openapi::{merge, proto, v3};

    let limit = usize::from(limit_step) * 64;
    let body = crate::body::Body::full(bytes::Bytes::copy_from_slice(data));
    match run_ready(crate::body::read_limited(body, limit), "read_limited") {
        Ok(read) => assert!(data.len() <= limit && read.as_ref() == data),
        Err(e) => {
            assert!(
                data.len() > limit,
                "refused a document within the limit: {e}"
            );
            assert!(e.to_string().contains(&limit.to_string()), "{e}");
        }
    }

    if let Ok(mut list) = serde_json::from_slice::<ApiGroupDiscoveryList>(data) {
        list.fill_response_kinds();
        let mut builder = DocumentBuilder::new();
        for g in list.items {
            for v in g.versions {
                builder.set(
                    &g.metadata.name,
                    VersionEntry {
                        discovery: v,
                        group_priority_minimum: 100,
                        version_priority: 15,
                    },
                );
            }
        }
        let doc = builder.build();
        let parsed: serde_json::Value = serde_json::from_slice(doc.body(AggregatedVersion::V2))
            .expect("the aggregated document is JSON");
        assert_eq!(parsed["kind"], "APIGroupDiscoveryList");
        let etag = doc.etag().to_str().expect("ASCII ETag");
        assert_eq!(etag.len(), 130);
        assert!(etag[1..129].bytes().all(|b| b.is_ascii_hexdigit()));
    }
    if let Ok(list) = serde_json::from_slice::<ApiResourceList>(data) {
        let _ = convert_legacy_resources(&list.resources);
    }
    if let Ok(spec) = serde_json::from_slice::<serde_json::Value>(data) {
        let filtered = merge::filter_by_path_prefixes(&spec, &["/apis/g/v1/"]);
        let merged = merge::merge_all([&spec, &filtered, &spec]);
        let encoded = proto::encode(&merged);
        <proto::Document as prost::Message>::decode(encoded.as_slice())
            .expect("our protobuf encoding decodes");
        let converted = v3::convert_v2_to_v3(&merged);
        serde_json::to_vec(&converted).expect("the v3 document encodes");
        let _ = v3::root_paths(&spec);
    }
}
