//! Kubernetes `Status` responses and the plain-text errors upstream writes with Go's `http.Error`.
//!
//! Every refusal in the stack is one of two shapes, chosen as upstream chooses them:
//!
//! - a JSON [`Status`] (`metav1.Status`, `status: Failure`) from the filters: 401 from
//!   authentication, 403 from authorization and impersonation, 429 from the in-flight
//!   limit, 504 from the timeout filter, 404/405 from the aggregator's own resources;
//! - a plain-text body ([`plain_text_error`], [`internal_error`]) where upstream writes with
//!   Go's `http.Error`: the proxy's `service unavailable` 503, the 502 for a redirect,
//!   `Internal Server Error: "<uri>": ...` 500s.
//!
//! The JSON matches Go's encoder byte for byte: field order `kind, apiVersion, metadata,
//! status, message, reason, details, code`, empty fields omitted, `&`, `<`, `>` escaped as
//! `\u0026`, `\u003c`, `\u003e`, and a trailing newline. Mirrors k8s.io/apiserver
//! [`pkg/endpoints/handlers/responsewriters/status.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/handlers/responsewriters/status.go),
//! [`writers.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/handlers/responsewriters/writers.go)
//! and [`errors.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/handlers/responsewriters/errors.go),
//! with the constructors of apimachinery
//! [`pkg/api/errors/errors.go`](https://github.com/kubernetes/apimachinery/blob/master/pkg/api/errors/errors.go).
//!
//! ```
//! use http::StatusCode;
//! use kube_aggregator::status::{Status, StatusDetails, internal_error, plain_text_error};
//!
//! let res = Status::unauthorized().into_response();
//! assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
//! assert_eq!(res.headers()["content-type"], "application/json");
//!
//! // Retry-After follows the details, as upstream's 429 and 503 set both.
//! let busy = Status::failure(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests", "too many requests")
//!     .with_details(StatusDetails { retry_after_seconds: 1, ..StatusDetails::default() });
//! assert_eq!(busy.into_response().headers()["retry-after"], "1");
//!
//! // Go's `http.Error`: the message, a newline, text/plain.
//! let res = plain_text_error(StatusCode::SERVICE_UNAVAILABLE, "service unavailable");
//! assert_eq!(res.headers()["content-type"], "text/plain; charset=utf-8");
//!
//! // User-controlled text is HTML-escaped in 500s.
//! let res = internal_error("/apis/<x>", &"boom");
//! assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
//! ```
//!
//! Floor 1 of the import order (docs/architecture.md): uses `body`, `gocompat`; used by
//! `aggregator`, `apiregistration`, `audit`, `authn`, `authz`, `availability`, `discovery`,
//! `filter`, `fuzz_logic`, `impersonation`, `inflight`, `openapi`, `proxy`, `selfreview`,
//! `server`, `tenancy`, `tenant`, `timeout`, `transport`, `webhook`.

use http::{HeaderValue, Response, StatusCode, header};
use serde::Serialize;

use crate::body::Body;

/// A `metav1.Status` with `status: Failure`, as every JSON refusal of the stack writes it.
///
/// Build one with [`Status::failure`] or a named constructor, adjust the public fields,
/// then send it with [`Status::into_response`] (or take the bytes with
/// [`Status::to_json`]). `kind`, `apiVersion`, `metadata` and `status` are fixed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    // Empty only in the timeout filter's 504, which upstream encodes without type meta.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(crate) kind: &'static str,
    #[serde(rename = "apiVersion", skip_serializing_if = "str::is_empty")]
    pub(crate) api_version: &'static str,
    metadata: Empty,
    pub(crate) status: &'static str,
    /// Human-readable description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// CamelCase reason, e.g. `Unauthorized`, `Forbidden`, `NotFound`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Extra detail; `None` omits the key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code, also the response's status (an invalid code answers 500).
    pub code: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Empty {}

/// `metav1.StatusDetails`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// Name of the object concerned.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// API group of the object concerned.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Resource (kind) of the object concerned.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Each problem found, e.g. the invalid fields of a 422.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// Seconds the client should wait before retrying; also sets `Retry-After` (as an
    /// integer number of seconds). 0 omits both.
    #[serde(skip_serializing_if = "is_zero")]
    pub retry_after_seconds: u32,
}

impl StatusDetails {
    /// Details naming the object `name` (empty for none) of `resource` (written as `kind`,
    /// as apimachinery's errors do) in `group`.
    pub fn of(group: &str, resource: &str, name: &str) -> StatusDetails {
        StatusDetails {
            name: name.to_owned(),
            group: group.to_owned(),
            kind: resource.to_owned(),
            ..StatusDetails::default()
        }
    }
}

/// `metav1.StatusCause`: one problem behind a failure.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct StatusCause {
    /// Machine-readable reason, e.g. `FieldValueInvalid`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The field concerned, e.g. `spec.resourceAttributes`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub field: String,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl Status {
    /// A failure Status with the given code, reason and message, and no details.
    /// `reason` is upstream's CamelCase `StatusReason` (`Forbidden`, `Timeout`,
    /// `TooManyRequests`, ...); an empty one is omitted from the JSON.
    pub fn failure(code: StatusCode, reason: &str, message: impl Into<String>) -> Status {
        Status {
            kind: "Status",
            api_version: "v1",
            metadata: Empty {},
            status: "Failure",
            message: message.into(),
            reason: reason.to_owned(),
            details: None,
            code: code.as_u16(),
        }
    }

    /// The 401 every failed authentication gets:
    /// `{"kind":"Status",...,"message":"Unauthorized","reason":"Unauthorized","code":401}`
    /// (k8s.io/apiserver
    /// [`pkg/endpoints/handlers/responsewriters/errors.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/handlers/responsewriters/errors.go)
    /// `Unauthorized`, written by the authentication filter whatever the cause).
    pub fn unauthorized() -> Status {
        Status::failure(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized")
    }

    /// A 404 `NotFound` for `<resource>.<group> "<name>"` (apimachinery `NewNotFound`):
    /// message `<resource>.<group> "<name>" not found` (just `<resource>` for the core
    /// group), details naming the group, the resource as `kind`, and the name.
    ///
    /// ```
    /// use kube_aggregator::status::Status;
    ///
    /// let s = Status::not_found("apiregistration.k8s.io", "apiservices", "v1.example.com");
    /// assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    /// assert_eq!(s.message, r#"apiservices.apiregistration.k8s.io "v1.example.com" not found"#);
    /// ```
    pub fn not_found(group: &str, resource: &str, name: &str) -> Status {
        let message = format!("{} \"{name}\" not found", qualified(group, resource));
        Status::failure(StatusCode::NOT_FOUND, "NotFound", message)
            .with_details(StatusDetails::of(group, resource, name))
    }

    /// A 405 `MethodNotAllowed` (apimachinery `NewMethodNotSupported`): message
    /// `<action> is not supported on resources of kind "<resource>.<group>"`, details with
    /// the group and the resource as `kind`.
    pub fn method_not_supported(group: &str, resource: &str, action: &str) -> Status {
        let qualified = qualified(group, resource);
        let message = format!("{action} is not supported on resources of kind \"{qualified}\"");
        Status::failure(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", message)
            .with_details(StatusDetails::of(group, resource, ""))
    }

    /// Sets `details`, replacing any set before.
    pub fn with_details(mut self, details: StatusDetails) -> Status {
        self.details = Some(details);
        self
    }

    /// The JSON body, ending with a newline as upstream's encoder writes it, with Go's
    /// HTML-safe escaping (`&` as `\u0026`, `<` as `\u003c`, `>` as `\u003e`, U+2028 and
    /// U+2029 escaped).
    pub fn to_json(&self) -> Vec<u8> {
        crate::gocompat::json::to_line(self, 256)
    }

    /// The response: this Status as `application/json` with its code,
    /// `X-Content-Type-Options: nosniff`, and `Retry-After` when details ask for it. The
    /// Status itself rides along in the response extensions, for the audit layer.
    pub fn into_response(self) -> Response<Body> {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let retry_after = self
            .details
            .as_ref()
            .map(|d| d.retry_after_seconds)
            .unwrap_or(0);
        let mut res = Response::new(Body::full(self.to_json()));
        *res.status_mut() = code;
        let h = res.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        if retry_after > 0 {
            h.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
        }
        // The audit layer records what the answer said (upstream's `LogResponseObject`).
        res.extensions_mut().insert(self);
        res
    }
}

/// `<resource>.<group>`, or `<resource>` for the core group: how apimachinery's errors
/// name a group resource (`schema.GroupResource.String()`).
fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    }
}

/// A response in the format of Go's `http.Error`: body `message + "\n"`,
/// `Content-Type: text/plain; charset=utf-8`, `X-Content-Type-Options: nosniff`.
///
/// The message is sent as given: escape user-controlled text first ([`html_escape`]), as
/// [`internal_error`] does.
pub fn plain_text_error(code: StatusCode, message: &str) -> Response<Body> {
    let mut body = String::with_capacity(message.len() + 1);
    body.push_str(message);
    body.push('\n');
    let mut res = Response::new(Body::full(body));
    *res.status_mut() = code;
    let text = HeaderValue::from_static("text/plain; charset=utf-8");
    res.headers_mut().insert(header::CONTENT_TYPE, text);
    let nosniff = HeaderValue::from_static("nosniff");
    res.headers_mut()
        .insert(header::X_CONTENT_TYPE_OPTIONS, nosniff);
    res
}

/// The 500 upstream writes for internal errors (responsewriters `InternalError`):
/// `Internal Server Error: "<uri>": <err>`, with `&`, `<`, `>` HTML-escaped, as plain text.
///
/// `request_uri` is the request's URI as the client sent it (path and query); `err` is
/// written with `Display`. Used, as upstream, for a request path that does not parse into
/// a `RequestInfo`, an authorizer error, and a request that reaches authorization or
/// impersonation with no user.
pub fn internal_error(request_uri: &str, err: &dyn std::fmt::Display) -> Response<Body> {
    let text = format!(
        "Internal Server Error: \"{}\": {}",
        html_escape(request_uri),
        html_escape(&err.to_string())
    );
    plain_text_error(StatusCode::INTERNAL_SERVER_ERROR, &text)
}

/// Replaces `&`, `<` and `>` with their HTML entities (`&amp;`, `&lt;`, `&gt;`), as
/// the `strings.Replacer` of upstream's `InternalError` does before writing
/// user-controlled text into error bodies. Quotes are left alone.
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// An error and its sources joined with `: ` (hyper and rustls keep the cause in `source`),
/// skipping a source whose text the message already contains. This is how Go prints a
/// wrapped error (`dial tcp 10.0.0.5:443: connect: connection refused`), which upstream
/// messages quote.
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unauthorized_body_matches_upstream() {
        let body = Status::unauthorized().to_json();
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}\n"
        );
    }

    #[test]
    fn not_found_names_the_qualified_resource() {
        let s = Status::not_found("apiregistration.k8s.io", "apiservices", "v1.foo");
        assert_eq!(
            s.message,
            "apiservices.apiregistration.k8s.io \"v1.foo\" not found"
        );
        let json = String::from_utf8(s.to_json()).unwrap();
        assert!(json.contains("\"details\":{\"name\":\"v1.foo\",\"group\":\"apiregistration.k8s.io\",\"kind\":\"apiservices\"},\"code\":404"));
    }

    #[tokio::test]
    async fn internal_error_escapes_html() {
        use http_body_util::BodyExt as _;
        let res = internal_error("/<script>?a=1&b=2", &"<b>ARGH</b> & more");
        assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            res.headers()[header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
        let body = res.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            "Internal Server Error: \"/&lt;script&gt;?a=1&amp;b=2\": &lt;b&gt;ARGH&lt;/b&gt; &amp; more\n"
        );
        assert_eq!(html_escape("/<script>&"), "/&lt;script&gt;&amp;");
    }
}
