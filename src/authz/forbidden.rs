//! The Forbidden (403) answer, word for word as k8s.io/apiserver
//! [`pkg/endpoints/handlers/responsewriters/errors.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/handlers/responsewriters/errors.go)
//! `Forbidden` builds it: `<resource> "<name>" is forbidden: User "<user>" cannot <verb>
//! resource "<resource>" in API group "<group>" in the namespace "<ns>"`, and its variants
//! for subresources, cluster scope and non-resource URLs, with the authorizer's reason
//! appended. kubectl prints this message as it is, so it must match.

use http::Response;

use super::Attributes;
use crate::body::Body;
use crate::gocompat::quote;
use crate::status::{Status, StatusDetails, html_escape};

/// The message of the 403 for `attrs` with the authorizer's `reason` (may be empty).
///
/// Examples: `forbidden: User "alice" cannot get path "/metrics"`;
/// `nodes.metrics.k8s.io "n1" is forbidden: User "alice" cannot get resource "nodes" in
/// API group "metrics.k8s.io" at the cluster scope`. `&`, `<`, `>` are HTML-escaped.
///
/// ```
/// use kube_aggregator::authn::UserInfo;
/// use kube_aggregator::authz::{Attributes, RequestInfo, forbidden_message};
///
/// let info = RequestInfo::from_parts(&http::Method::GET,
///     &"/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods/p1".parse().unwrap()).unwrap();
/// let attrs = Attributes::new(UserInfo::new("alice", ["dev"]), &info);
/// assert_eq!(
///     forbidden_message(&attrs, "no RBAC policy matched"),
///     r#"pods.metrics.k8s.io "p1" is forbidden: User "alice" cannot get resource "pods" in API group "metrics.k8s.io" in the namespace "ns": no RBAC policy matched"#,
/// );
/// ```
pub fn forbidden_message(attrs: &Attributes, reason: &str) -> String {
    let user = quote(&attrs.user.name);
    let mut msg = if !attrs.is_resource_request {
        format!(
            "forbidden: User {user} cannot {} path {}",
            attrs.verb,
            quote(&attrs.path)
        )
    } else {
        let resource = if attrs.subresource.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{}/{}", attrs.resource, attrs.subresource)
        };
        let scope = if attrs.namespace.is_empty() {
            "at the cluster scope".to_owned()
        } else {
            format!("in the namespace {}", quote(&attrs.namespace))
        };
        let what = format!(
            "User {user} cannot {} resource {} in API group {} {scope}",
            attrs.verb,
            quote(&resource),
            quote(&attrs.api_group)
        );
        let qualified = if attrs.api_group.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{}.{}", attrs.resource, attrs.api_group)
        };
        if attrs.name.is_empty() {
            format!("{qualified} is forbidden: {what}")
        } else {
            format!("{qualified} {} is forbidden: {what}", quote(&attrs.name))
        }
    };
    if !reason.is_empty() {
        msg.push_str(": ");
        msg.push_str(reason);
    }
    html_escape(&msg)
}

/// The 403 response for `attrs`.
pub(crate) fn forbidden_response(attrs: &Attributes, reason: &str) -> Response<Body> {
    let details = StatusDetails::of(&attrs.api_group, &attrs.resource, &attrs.name);
    Status::failure(
        http::StatusCode::FORBIDDEN,
        "Forbidden",
        forbidden_message(attrs, reason),
    )
    .with_details(details)
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authn::UserInfo;

    fn attrs(resource_request: bool) -> Attributes {
        Attributes {
            user: UserInfo::new("NAME", Vec::<String>::new()),
            verb: "get".into(),
            is_resource_request: resource_request,
            ..Attributes::default()
        }
    }

    /// The body of the 403 refusing `a`, with no reason.
    fn body_of(a: &Attributes) -> String {
        use http_body_util::BodyExt;
        let body = forbidden_response(a, "").into_body().collect();
        let body = futures_util::FutureExt::now_or_never(body).expect("a full body");
        String::from_utf8(body.unwrap().to_bytes().to_vec()).unwrap()
    }

    #[test]
    fn upstream_forbidden_bodies() {
        let mut a = attrs(false);
        a.verb = "GET".into();
        a.path = "/whatever".into();
        assert_eq!(
            body_of(&a),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"forbidden: User \\\"NAME\\\" cannot GET path \\\"/whatever\\\"\",\"reason\":\"Forbidden\",\"details\":{},\"code\":403}\n"
        );
        a.path = "/<script>".into();
        assert!(body_of(&a).contains("cannot GET path \\\"/\\u0026lt;script\\u0026gt;\\\"\""));

        let mut r = attrs(true);
        r.resource = "pod".into();
        assert_eq!(
            body_of(&r),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"pod is forbidden: User \\\"NAME\\\" cannot get resource \\\"pod\\\" in API group \\\"\\\" at the cluster scope\",\"reason\":\"Forbidden\",\"details\":{\"kind\":\"pod\"},\"code\":403}\n"
        );
        r.name = "mypod".into();
        assert_eq!(
            body_of(&r),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"pod \\\"mypod\\\" is forbidden: User \\\"NAME\\\" cannot get resource \\\"pod\\\" in API group \\\"\\\" at the cluster scope\",\"reason\":\"Forbidden\",\"details\":{\"name\":\"mypod\",\"kind\":\"pod\"},\"code\":403}\n"
        );
        let mut s = attrs(true);
        s.namespace = "test".into();
        s.api_group = "v2".into();
        s.resource = "pod".into();
        s.subresource = "quota".into();
        assert_eq!(
            body_of(&s),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"pod.v2 is forbidden: User \\\"NAME\\\" cannot get resource \\\"pod/quota\\\" in API group \\\"v2\\\" in the namespace \\\"test\\\"\",\"reason\":\"Forbidden\",\"details\":{\"group\":\"v2\",\"kind\":\"pod\"},\"code\":403}\n"
        );
    }

    #[test]
    fn reason_is_appended() {
        let mut a = attrs(true);
        a.user.name = "alice".into();
        a.verb = "list".into();
        a.api_group = "metrics.k8s.io".into();
        a.resource = "nodes".into();
        assert_eq!(
            forbidden_message(&a, "deny by default"),
            "nodes.metrics.k8s.io is forbidden: User \"alice\" cannot list resource \"nodes\" in API group \"metrics.k8s.io\" at the cluster scope: deny by default"
        );
    }
}
