//! The whole-stack target's fixture: tokens, credentials, header names, targets, a
//! recording policy and recording backends.

use super::super::*;

/// The `--token-auth-file` of the whole-stack target: an admin (group `admins`), a
/// viewer, a user allowed only the core group, a user the policy has no opinion on, and
/// an admin whose name and a group cannot be written as header values (a LF, a DEL), so
/// cannot be forwarded at all.
pub(super) const STACK_TOKENS: &str = "admin-token,admin,1,\"admins\"\n\
viewer-token,viewer,2\n\
core-token,core,4\n\
nobody-token,nobody,3,\"x,y\"\n\
unsendable-token,\"eve\nx\",5,\"admins,a\x7fb\"\n";

/// `Authorization` values the target may add: none, each known token, an unknown
/// token, a basic credential, malformed bearer forms, and the unsendable admin's token.
pub(super) const STACK_CREDENTIALS: [&str; 10] = [
    "",
    "Bearer admin-token",
    "Bearer viewer-token",
    "Bearer core-token",
    "Bearer nobody-token",
    "Bearer wrong-token",
    "Basic YWRtaW46YWRtaW4=",
    "bearer  admin-token",
    "Bearer admin-token extra",
    "Bearer unsendable-token",
];

/// Header names a client might use to smuggle identity or confuse the proxy; a
/// header's selector picks one of these, or its raw name when past the end.
pub(super) const STACK_HEADER_NAMES: [&str; 22] = [
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
pub(super) const STACK_TARGET_PREFIXES: [&str; 13] = [
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
    pub(super) fn header_name(&self) -> &str {
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
pub(super) struct SeenRequest {
    pub(super) uri: Uri,
    pub(super) method: Method,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
}

pub(super) type DecisionLog = std::sync::Arc<std::sync::Mutex<Vec<(Attributes, Decision)>>>;

/// The fixed policy of the whole-stack target, recording every decision: `admins` may do
/// anything; `viewer` may get/list/watch in `metrics.k8s.io`; `core` may do anything in
/// the core group (and nothing in `metrics.k8s.io`); any authenticated user may GET
/// non-resource URLs under `/apis` (discovery); `nobody` gets no opinion; the rest is
/// denied.
pub(super) struct RecordingPolicy(pub(super) DecisionLog);

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
pub(super) fn stack_apiservice(group: &str, service: Option<(&str, &str)>) -> ApiService {
    match service {
        Some((namespace, name)) => {
            ApiService::remote(group, "v1", namespace, name).insecure_skip_tls_verify()
        }
        None => ApiService::local(group, "v1"),
    }
    .priorities(1000, 15)
}

/// An in-memory extension server that records each request (body read to the end) and
/// answers 200.
pub(super) fn recording_backend(
    seen: std::sync::Arc<std::sync::Mutex<Vec<SeenRequest>>>,
) -> impl crate::body::Handles<BoxError> + Sync {
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
pub(super) async fn stack_host(
    req: Request<Body>,
) -> Result<http::Response<Body>, std::convert::Infallible> {
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
