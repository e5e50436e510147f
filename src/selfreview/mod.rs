//! SelfSubjectAccessReview, SelfSubjectRulesReview and SelfSubjectReview: what
//! `kubectl auth can-i`, `kubectl auth can-i --list` and `kubectl auth whoami` ask
//! (kubernetes
//! [`pkg/registry/authorization/selfsubjectaccessreview/rest.go`](https://github.com/kubernetes/kubernetes/blob/master/pkg/registry/authorization/selfsubjectaccessreview/rest.go),
//! [`pkg/registry/authorization/selfsubjectrulesreview/rest.go`](https://github.com/kubernetes/kubernetes/blob/master/pkg/registry/authorization/selfsubjectrulesreview/rest.go),
//! [`pkg/registry/authentication/selfsubjectreview/rest.go`](https://github.com/kubernetes/kubernetes/blob/master/pkg/registry/authentication/selfsubjectreview/rest.go)).
//!
//! [`SelfReviewLayer`] answers `POST` to
//!
//! | path | kind | answered from |
//! |---|---|---|
//! | `/apis/authorization.k8s.io/v1/selfsubjectaccessreviews` | `SelfSubjectAccessReview` | [`Authorizer::authorize`] |
//! | `/apis/authorization.k8s.io/v1/selfsubjectrulesreviews` | `SelfSubjectRulesReview` | [`Authorizer::rules_for`] |
//! | `/apis/authentication.k8s.io/v1/selfsubjectreviews` | `SelfSubjectReview` | the [`UserInfo`] |
//!
//! always for the request's own user, after impersonation, with `201 Created` and the
//! review in the request's form filled in. Bodies are JSON, YAML or the Kubernetes
//! protobuf encoding (`application/vnd.kubernetes.protobuf`), which kubectl 1.32 sends by
//! default; the answer is in the form `Accept` prefers. It sits behind the
//! authorization layer, which checks that the user may `create` these resources (RBAC's
//! `system:basic-user` grants it to every authenticated user), and gives the same
//! authorizer: the review says what the stack itself would decide. Other requests go to
//! the inner service untouched.
//!
//! Answers as upstream: a review with neither (or both) of `resourceAttributes` and
//! `nonResourceAttributes`, 422 `Invalid` with the 1.32 wording; a rules review without a
//! namespace, 400 `no namespace on request`; another method on these paths, 405; a body
//! type other than JSON, YAML or protobuf, 415; an `Accept` none of them meets, 406. An
//! empty `version` is checked as `*`; selectors in a review (raw or as requirements) are
//! passed to the authorizer, and those that do not parse are reported in
//! `evaluationError` as upstream does. Mirrors kubernetes `pkg/registry/authorization/
//! {selfsubjectaccessreview,selfsubjectrulesreview,util}` and
//! `pkg/registry/authentication/selfsubjectreview`
//! (<https://github.com/kubernetes/kubernetes/tree/master/pkg/registry/authorization>).
//!
//! ```
//! use std::sync::Arc;
//! use kube_aggregator::authz::{AlwaysAllow, AuthorizationLayer};
//! use kube_aggregator::selfreview::SelfReviewLayer;
//!
//! let authorizer = Arc::new(AlwaysAllow);
//! let stack = tower::ServiceBuilder::new()
//!     .layer(AuthorizationLayer::new(authorizer.clone()))
//!     .layer(SelfReviewLayer::new(authorizer));
//! # let _ = stack;
//! ```
//!
//! [`Authorizer::authorize`]: crate::authz::Authorizer::authorize
//! [`Authorizer::rules_for`]: crate::authz::Authorizer::rules_for
//! [`UserInfo`]: crate::authn::UserInfo
//!
//! Floor 7 of the import order (docs/architecture.md): uses `audit_context`, `authn`,
//! `authz`, `body`, `filter`, `gocompat`, `status`, `tenancy`; used by `builder`.

mod json;
mod proto;
mod review;
mod service;

pub use service::{Answering, ResponseFuture, SelfReviewLayer, SelfReviewService};

use crate::authz::{NonResourceAttributes, ResourceAttributes};

/// The `apiVersion` of the access and rules reviews.
const AUTHORIZATION_V1: &str = "authorization.k8s.io/v1";
/// The `apiVersion` of the subject review.
const AUTHENTICATION_V1: &str = "authentication.k8s.io/v1";

/// The three kinds served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)] // the kinds are named so upstream
enum Kind {
    AccessReview,
    RulesReview,
    SubjectReview,
}

impl Kind {
    /// The `kind` of the review.
    fn name(self) -> &'static str {
        match self {
            Kind::AccessReview => "SelfSubjectAccessReview",
            Kind::RulesReview => "SelfSubjectRulesReview",
            Kind::SubjectReview => "SelfSubjectReview",
        }
    }

    /// The `apiVersion` of the review.
    fn api_version(self) -> &'static str {
        match self {
            Kind::AccessReview | Kind::RulesReview => AUTHORIZATION_V1,
            Kind::SubjectReview => AUTHENTICATION_V1,
        }
    }

    /// The kind a resource request addresses, if it is one of the three collections.
    fn of(info: &crate::authz::RequestInfo) -> Option<Kind> {
        if !info.is_resource_request
            || info.api_version != "v1"
            || !info.namespace.is_empty()
            || !info.name.is_empty()
            || !info.subresource.is_empty()
        {
            return None;
        }
        match (info.api_group.as_str(), info.resource.as_str()) {
            ("authorization.k8s.io", "selfsubjectaccessreviews") => Some(Kind::AccessReview),
            ("authorization.k8s.io", "selfsubjectrulesreviews") => Some(Kind::RulesReview),
            ("authentication.k8s.io", "selfsubjectreviews") => Some(Kind::SubjectReview),
            _ => None,
        }
    }
}

/// A `SelfSubjectAccessReview`'s spec, as sent (and echoed back).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct AccessReview {
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_attributes: Option<ResourceAttributes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    non_resource_attributes: Option<NonResourceAttributes>,
}

/// Why a review could not be answered; each maps to upstream's Status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ReviewError {
    /// The body does not decode.
    #[error("{0}")]
    Decode(String),
}

/// The wire forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Yaml,
    Protobuf,
}

impl Format {
    fn media_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Yaml => "application/yaml",
            Format::Protobuf => proto::MEDIA_TYPE,
        }
    }

    /// The body form from `Content-Type` (JSON when absent, as upstream's
    /// `NegotiateInputSerializer`); `None` for any other type.
    fn of_content_type(value: Option<&http::HeaderValue>) -> Option<Format> {
        let Some(value) = value else {
            return Some(Format::Json);
        };
        let media = value
            .to_str()
            .ok()?
            .split(';')
            .next()?
            .trim()
            .to_ascii_lowercase();
        match media.as_str() {
            "" | "application/json" => Some(Format::Json),
            "application/yaml" => Some(Format::Yaml),
            proto::MEDIA_TYPE => Some(Format::Protobuf),
            _ => None,
        }
    }

    /// The answer's form from `Accept`: the acceptable range with the highest `q`, the
    /// first listed among equals; JSON for `*/*`, `application/*` or no header. `None`
    /// when nothing offered is acceptable.
    fn of_accept(headers: &http::HeaderMap) -> Option<Format> {
        let mut ranges: Vec<(f32, Format)> = Vec::new();
        let mut any = false;
        for value in headers.get_all(http::header::ACCEPT) {
            let Ok(value) = value.to_str() else { continue };
            for range in value.split(',') {
                any = true;
                let mut parts = range.split(';');
                let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
                let q = parts
                    .filter_map(|p| p.trim().strip_prefix("q="))
                    .find_map(|q| q.trim().parse::<f32>().ok())
                    .unwrap_or(1.0);
                let format = match media.as_str() {
                    "application/json" | "application/*" | "*/*" | "" => Format::Json,
                    "application/yaml" => Format::Yaml,
                    proto::MEDIA_TYPE => Format::Protobuf,
                    _ => continue,
                };
                if q > 0.0 {
                    ranges.push((q, format));
                }
            }
        }
        if !any {
            return Some(Format::Json);
        }
        // A stable sort keeps the listed order among equal weights.
        ranges.sort_by(|a, b| b.0.total_cmp(&a.0));
        ranges.first().map(|(_, f)| *f)
    }
}

#[cfg(test)]
mod tests;
