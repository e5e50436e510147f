//! The `audit.k8s.io/v1` `Event`, as kube-apiserver writes it (k8s.io/apiserver
//! `pkg/apis/audit/v1/types.go`; the metadata is filled in as `pkg/audit/request.go`
//! `LogRequestMetadata` does).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::SystemTime;

use http::{HeaderMap, HeaderName};
use serde::{Serialize, Serializer};

use super::{Level, Stage};
use crate::authz::RequestInfo;
use crate::identity::UserInfo;
use crate::status::StatusDetails;

/// One audit event: a request at one [`Stage`]. Serializes to upstream's JSON, field for
/// field and in upstream's order (`kind`, `apiVersion`, `level`, `auditID`, `stage`, ...);
/// timestamps with microseconds in UTC (`2026-12-06T14:02:03.123456Z`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Event {
    pub(super) kind: &'static str,
    pub(super) api_version: &'static str,
    /// The level the policy chose.
    pub level: Level,
    /// The request's `Audit-Id`.
    #[serde(rename = "auditID")]
    pub audit_id: String,
    /// The stage this event was written at.
    pub stage: Stage,
    /// Path and query as the client sent them.
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    /// The Kubernetes verb (`get`, `list`, `watch`, ...; the lower-case method for
    /// non-resource requests).
    pub verb: String,
    /// The authenticated user (before impersonation); empty when authentication failed.
    pub user: EventUser,
    /// The user the request ran as, when it asked for impersonation and was allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<EventUser>,
    /// `X-Forwarded-For`, then `X-Real-Ip`, then the connection's address (see
    /// [`source_ips`]).
    #[serde(rename = "sourceIPs", skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    /// `User-Agent`, cut at 1024 bytes (then `...TRUNCATED` appended).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    /// What a resource request was about; `None` for non-resource requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectReference>,
    /// The answer's code, and the `Status`'s fields when the stack answered with one.
    /// `None` in `RequestReceived` events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_status: Option<ResponseStatus>,
    /// The object the request carried, at `Request` level and above, when the handler
    /// decoded one (see [`AuditContext::log_request_object`](super::AuditContext::log_request_object)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_object: Option<serde_json::Value>,
    /// The object answered, at `RequestResponse` level, when the handler encoded one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_object: Option<serde_json::Value>,
    /// When the request was received.
    #[serde(serialize_with = "micro_time")]
    pub request_received_timestamp: SystemTime,
    /// When this stage was reached.
    #[serde(serialize_with = "micro_time")]
    pub stage_timestamp: SystemTime,
    /// `authorization.k8s.io/decision`, `authorization.k8s.io/reason`, ...
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// `authentication.k8s.io/v1` `UserInfo` as events carry it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EventUser {
    /// The name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// The UID.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The groups.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// The extra attributes.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl From<&UserInfo> for EventUser {
    fn from(user: &UserInfo) -> EventUser {
        EventUser {
            username: user.name.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
        }
    }
}

/// `audit.k8s.io/v1` `ObjectReference`: the resource a request is about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// The resource (`pods`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// The namespace; empty for cluster-scoped requests.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The object's name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The API group; empty for the core group.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// The API version.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The subresource (`status`, `log`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

impl ObjectReference {
    /// The reference of a resource request; `None` for a non-resource one.
    pub fn of(info: &RequestInfo) -> Option<ObjectReference> {
        info.is_resource_request.then(|| ObjectReference {
            resource: info.resource.clone(),
            namespace: info.namespace.clone(),
            name: info.name.clone(),
            api_group: info.api_group.clone(),
            api_version: info.api_version.clone(),
            subresource: info.subresource.clone(),
        })
    }
}

/// The `responseStatus` of an event: a `metav1.Status` without type meta. For answers the
/// stack wrote as a `Status` it has that Status's `status`, `message`, `reason` and
/// `details` (upstream's `LogResponseObject`); for anything else (a proxied answer) just
/// the code.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResponseStatus {
    metadata: Empty,
    /// `Success` or `Failure`; empty when only the code is known.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// The Status's message.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The Status's reason (`Forbidden`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The Status's details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code.
    #[serde(skip_serializing_if = "is_zero")]
    pub code: u16,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
struct Empty {}

fn is_zero(code: &u16) -> bool {
    *code == 0
}

impl ResponseStatus {
    /// Only a code.
    pub fn code(code: u16) -> ResponseStatus {
        ResponseStatus {
            code,
            ..ResponseStatus::default()
        }
    }

    /// What upstream records for a request whose handler returned without an answer
    /// (the client went away, or the request timed out first): 200, `Success`,
    /// `Connection closed early`.
    pub fn closed_early() -> ResponseStatus {
        ResponseStatus {
            status: "Success".to_owned(),
            message: "Connection closed early".to_owned(),
            ..ResponseStatus::code(200)
        }
    }

    /// From a `Status` the stack answered with.
    pub(crate) fn of_status(status: &crate::status::Status) -> ResponseStatus {
        ResponseStatus {
            metadata: Empty {},
            status: status.status.to_owned(),
            message: status.message.clone(),
            reason: status.reason.clone(),
            details: status.details.clone(),
            code: status.code,
        }
    }
}

impl Event {
    /// An event at `level` for a request described by `metadata`, at stage
    /// `RequestReceived`, with no answer yet.
    pub(crate) fn new(level: Level, metadata: RequestMetadata) -> Event {
        Event {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level,
            audit_id: metadata.audit_id,
            stage: Stage::RequestReceived,
            request_uri: metadata.request_uri,
            verb: metadata.verb,
            user: metadata.user,
            impersonated_user: None,
            source_ips: metadata.source_ips,
            user_agent: metadata.user_agent,
            object_ref: metadata.object_ref,
            response_status: None,
            request_object: None,
            response_object: None,
            request_received_timestamp: metadata.received,
            stage_timestamp: metadata.received,
            annotations: BTreeMap::new(),
        }
    }

    /// The event as JSON, with Go's HTML-safe escaping (`&` as `\u0026`, ...).
    pub fn to_json(&self) -> Vec<u8> {
        let mut line = self.to_json_line();
        line.pop();
        line
    }
}

/// What an event says of the request itself, gathered once when it arrives.
#[derive(Debug, Clone)]
pub(crate) struct RequestMetadata {
    pub(crate) audit_id: String,
    pub(crate) received: SystemTime,
    pub(crate) request_uri: String,
    pub(crate) verb: String,
    pub(crate) user: EventUser,
    pub(crate) source_ips: Vec<String>,
    pub(crate) user_agent: String,
    pub(crate) object_ref: Option<ObjectReference>,
}

impl RequestMetadata {
    /// The metadata of a request with head `parts`, described by `info`, by `user`.
    pub(crate) fn of(
        parts: &http::request::Parts,
        info: &RequestInfo,
        user: Option<&UserInfo>,
        received: SystemTime,
    ) -> RequestMetadata {
        let audit_id = match parts.extensions.get::<super::AuditId>() {
            Some(id) => String::from_utf8_lossy(id.0.as_bytes()).into_owned(),
            None => String::from_utf8_lossy(super::new_uuid().as_bytes()).into_owned(),
        };
        let remote = parts
            .extensions
            .get::<crate::authn::ConnectionInfo>()
            .and_then(|c| c.remote_addr);
        RequestMetadata {
            audit_id,
            received,
            request_uri: parts
                .uri
                .path_and_query()
                .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned()),
            verb: info.verb.clone(),
            user: user.map(EventUser::from).unwrap_or_default(),
            source_ips: source_ips(&parts.headers, remote),
            user_agent: user_agent(&parts.headers),
            object_ref: ObjectReference::of(info),
        }
    }

    /// An anonymous `get` of `/apis` received at the epoch, with ID `audit_id`: the
    /// sinks' tests' event.
    #[cfg(test)]
    pub(crate) fn get_apis(audit_id: String) -> RequestMetadata {
        RequestMetadata {
            audit_id,
            received: std::time::UNIX_EPOCH,
            request_uri: "/apis".into(),
            verb: "get".into(),
            user: EventUser::default(),
            source_ips: Vec::new(),
            user_agent: String::new(),
            object_ref: None,
        }
    }
}

/// The `sourceIPs` of a request, as apimachinery `SourceIPs` (`pkg/util/net/http.go`)
/// lists them: every valid address of the first `X-Forwarded-For` header, then
/// `X-Real-Ip` unless already listed, then the connection's address unless it is the
/// last one listed. Invalid entries are skipped; IPv4-mapped IPv6 addresses are written
/// as IPv4, as Go does.
pub fn source_ips(headers: &HeaderMap, remote: Option<SocketAddr>) -> Vec<String> {
    let mut ips: Vec<IpAddr> = Vec::new();
    // Names made once: looking a header up by a `&str` parses the name each time.
    const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
    const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");
    if let Some(forwarded) = headers.get(X_FORWARDED_FOR) {
        let text = String::from_utf8_lossy(forwarded.as_bytes());
        ips.extend(text.split(',').filter_map(|part| parse_ip(part.trim())));
    }
    if let Some(real) = headers.get(X_REAL_IP) {
        let ip = std::str::from_utf8(real.as_bytes()).ok().and_then(parse_ip);
        if let Some(ip) = ip.filter(|ip| !ips.contains(ip)) {
            ips.push(ip);
        }
    }
    if let Some(addr) = remote {
        let ip = canonical(addr.ip());
        if ips.last() != Some(&ip) {
            ips.push(ip);
        }
    }
    ips.iter().map(IpAddr::to_string).collect()
}

fn parse_ip(s: &str) -> Option<IpAddr> {
    s.parse().ok().map(canonical)
}

/// Go's `net.IP` compares and prints an IPv4-mapped IPv6 address as the IPv4 one.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Upstream's `maybeTruncateUserAgent`: the first `User-Agent`, cut at 1024 bytes with
/// `...TRUNCATED` appended.
fn user_agent(headers: &HeaderMap) -> String {
    const MAX: usize = 1024;
    let Some(value) = headers.get(http::header::USER_AGENT) else {
        return String::new();
    };
    let bytes = value.as_bytes();
    if bytes.len() > MAX {
        let mut out = String::from_utf8_lossy(&bytes[..MAX]).into_owned();
        out.push_str("...TRUNCATED");
        out
    } else {
        String::from_utf8_lossy(bytes).into_owned()
    }
}

/// `metav1.MicroTime`: RFC 3339 in UTC with six fractional digits.
fn micro_time<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    let mut text = Vec::with_capacity(27);
    crate::gocompat::micro_time(&mut text, *t);
    s.serialize_str(std::str::from_utf8(&text).unwrap_or_default())
}

impl Serialize for Level {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl Serialize for Stage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn source_ips_as_apimachinery_lists_them() {
        let remote: SocketAddr = "10.0.0.9:4242".parse().unwrap();
        let mut h = HeaderMap::new();
        assert_eq!(source_ips(&h, Some(remote)), ["10.0.0.9"]);
        h.insert(
            "x-forwarded-for",
            " 192.0.2.1 , bogus, ::ffff:198.51.100.7,2001:db8::1"
                .parse()
                .unwrap(),
        );
        h.insert("x-real-ip", "192.0.2.1".parse().unwrap());
        assert_eq!(
            source_ips(&h, Some(remote)),
            ["192.0.2.1", "198.51.100.7", "2001:db8::1", "10.0.0.9"]
        );
        // The connection's address is not repeated when it is the last hop listed, and
        // X-Real-Ip is added when not listed.
        h.insert("x-forwarded-for", "10.0.0.9".parse().unwrap());
        h.insert("x-real-ip", "203.0.113.5".parse().unwrap());
        assert_eq!(
            source_ips(&h, Some(remote)),
            ["10.0.0.9", "203.0.113.5", "10.0.0.9"]
        );
        h.remove("x-real-ip");
        assert_eq!(source_ips(&h, Some(remote)), ["10.0.0.9"]);
        assert!(source_ips(&HeaderMap::new(), None).is_empty());
    }

    #[test]
    fn long_user_agents_are_cut_as_upstream_cuts_them() {
        let mut h = HeaderMap::new();
        h.insert("user-agent", "a".repeat(1025).parse().unwrap());
        let ua = user_agent(&h);
        assert_eq!(ua.len(), 1024 + "...TRUNCATED".len());
        assert!(ua.ends_with("a...TRUNCATED"));
        h.insert("user-agent", "kubectl/v1.32.0".parse().unwrap());
        assert_eq!(user_agent(&h), "kubectl/v1.32.0");
    }

    #[test]
    fn events_serialize_as_upstream_writes_them() {
        let at = UNIX_EPOCH + Duration::from_micros(1_765_000_000_123_456);
        let mut event = Event::new(
            Level::Metadata,
            RequestMetadata {
                audit_id: "5d1c8f0e-0000-4000-8000-000000000001".into(),
                received: at,
                request_uri: "/apis/metrics.k8s.io/v1beta1/pods?limit=1&x=<y>".into(),
                verb: "list".into(),
                user: EventUser {
                    username: "alice".into(),
                    groups: vec!["system:authenticated".into()],
                    ..EventUser::default()
                },
                source_ips: vec!["127.0.0.1".into()],
                user_agent: String::new(),
                object_ref: Some(ObjectReference {
                    resource: "pods".into(),
                    api_group: "metrics.k8s.io".into(),
                    api_version: "v1beta1".into(),
                    ..ObjectReference::default()
                }),
            },
        );
        event.stage = Stage::ResponseComplete;
        event.stage_timestamp = at + Duration::from_micros(2);
        event.response_status = Some(ResponseStatus::code(200));
        event
            .annotations
            .insert("authorization.k8s.io/decision".into(), "allow".into());
        event
            .annotations
            .insert("authorization.k8s.io/reason".into(), String::new());
        let line = String::from_utf8(event.to_json_line()).unwrap();
        assert_eq!(
            line,
            concat!(
                r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","#,
                r#""auditID":"5d1c8f0e-0000-4000-8000-000000000001","stage":"ResponseComplete","#,
                r#""requestURI":"/apis/metrics.k8s.io/v1beta1/pods?limit=1\u0026x=\u003cy\u003e","#,
                r#""verb":"list","user":{"username":"alice","groups":["system:authenticated"]},"#,
                r#""sourceIPs":["127.0.0.1"],"#,
                r#""objectRef":{"resource":"pods","apiGroup":"metrics.k8s.io","apiVersion":"v1beta1"},"#,
                r#""responseStatus":{"metadata":{},"code":200},"#,
                r#""requestReceivedTimestamp":"2025-12-06T05:46:40.123456Z","#,
                r#""stageTimestamp":"2025-12-06T05:46:40.123458Z","#,
                r#""annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":""}}"#,
                "\n"
            )
        );
    }
}
