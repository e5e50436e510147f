//! The `SubjectAccessReview` wire types (authorization.k8s.io `v1` and `v1beta1`) and the
//! webhook version flag: what k8s.io/apiserver
//! [`plugin/pkg/authorizer/webhook/webhook.go`](https://github.com/kubernetes/apiserver/blob/master/plugin/pkg/authorizer/webhook/webhook.go)
//! sends and reads, with the field names and `omitempty` rules of
//! [`k8s.io/api/authorization/v1`](https://github.com/kubernetes/api/blob/master/authorization/v1/types.go).

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::authz::{Attributes, Authorization, AuthorizationError, Decision, SelectorRequirement};

/// Upstream's error for a review that both allows and denies.
pub(super) const BOTH_ALLOW_AND_DENY: &str =
    "webhook subject access review returned both allow and deny response";

/// A `SubjectAccessReview` (authorization.k8s.io `v1`, or `v1beta1` on the wire when so
/// configured), as sent to and answered by an authorization webhook.
///
/// Serializes like upstream: `kind`, `apiVersion`, `metadata` (`{}`), `spec`, and
/// `status` with `allowed` always present (it has no `omitempty` in Go).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct SubjectAccessReview {
    /// `SubjectAccessReview`.
    pub kind: String,
    /// `authorization.k8s.io/v1` or `authorization.k8s.io/v1beta1`.
    pub api_version: String,
    /// Object metadata; empty in requests.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// What is asked, by whom.
    pub spec: SubjectAccessReviewSpec,
    /// The webhook's answer.
    pub status: SubjectAccessReviewStatus,
}

/// Who asks to do what (upstream `SubjectAccessReviewSpec`); every empty field is omitted
/// on the wire, and exactly one of the attribute sets is present.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct SubjectAccessReviewSpec {
    /// Set for resource requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_attributes: Option<ResourceAttributes>,
    /// Set for non-resource requests (`{}` when path and verb are both empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_resource_attributes: Option<NonResourceAttributes>,
    /// User name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user: String,
    /// Groups, in the authenticator's order (`group` in v1beta1).
    #[serde(skip_serializing_if = "Vec::is_empty", alias = "group")]
    pub groups: Vec<String>,
    /// Extra user attributes, keys as the authenticator gave them.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
    /// User UID.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// A resource request's attributes (upstream `ResourceAttributes`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct ResourceAttributes {
    /// Namespace; empty for cluster scope.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Verb, e.g. `get`, `list`, `watch`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub verb: String,
    /// API group; empty for the core group.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// API version.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Resource, e.g. `pods`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// Subresource, e.g. `status`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
    /// Object name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The field selector a list or watch is limited to.
    #[serde(rename = "fieldSelector", skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<SelectorAttributes>,
    /// The label selector a list or watch is limited to.
    #[serde(rename = "labelSelector", skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<SelectorAttributes>,
}

/// A selector in a review (`FieldSelectorAttributes` / `LabelSelectorAttributes`): the raw
/// text, or its requirements. Reviews the library sends carry requirements only, as
/// upstream's webhook does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct SelectorAttributes {
    /// The selector as written, e.g. `metadata.name=foo`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub raw_selector: String,
    /// The parsed requirements.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<SelectorRequirement>,
}

impl SelectorAttributes {
    /// Requirements only; `None` when there are none, so the key is omitted.
    pub fn from_requirements(requirements: &[SelectorRequirement]) -> Option<SelectorAttributes> {
        (!requirements.is_empty()).then(|| SelectorAttributes {
            raw_selector: String::new(),
            requirements: requirements.to_vec(),
        })
    }
}

/// A non-resource request's attributes (upstream `NonResourceAttributes`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct NonResourceAttributes {
    /// URL path, e.g. `/healthz`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// Lower-cased HTTP method, e.g. `get`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub verb: String,
}

/// The webhook's answer (upstream `SubjectAccessReviewStatus`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct SubjectAccessReviewStatus {
    /// The request is allowed.
    pub allowed: bool,
    /// The request is denied outright; no later authorizer is asked.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub denied: bool,
    /// Why; appended to a Forbidden message.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// An error the webhook met while deciding; informational only.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub evaluation_error: String,
}

impl SubjectAccessReviewSpec {
    /// The spec upstream builds for `attrs`: the user, and resource attributes (without
    /// the path) for resource requests or the path and verb otherwise.
    ///
    /// Beyond upstream, the tenant ([`Attributes::tenant`]) goes into `extra` under
    /// [`TENANT_EXTRA_KEY`](crate::tenancy::TENANT_EXTRA_KEY) (`authorization.kcp.io/cluster-name`,
    /// as kcp sends it); whatever the user's own extra held under that key is dropped, so
    /// only the request's path can place it in a tenant.
    pub fn from_attributes(attrs: &Attributes) -> SubjectAccessReviewSpec {
        let (resource_attributes, non_resource_attributes) = if attrs.is_resource_request {
            let r = ResourceAttributes {
                namespace: attrs.namespace.clone(),
                verb: attrs.verb.clone(),
                group: attrs.api_group.clone(),
                version: attrs.api_version.clone(),
                resource: attrs.resource.clone(),
                subresource: attrs.subresource.clone(),
                name: attrs.name.clone(),
                field_selector: SelectorAttributes::from_requirements(&attrs.field_selector),
                label_selector: SelectorAttributes::from_requirements(&attrs.label_selector),
            };
            (Some(r), None)
        } else {
            let n = NonResourceAttributes {
                path: attrs.path.clone(),
                verb: attrs.verb.clone(),
            };
            (None, Some(n))
        };
        let mut extra = attrs.user.extra.clone();
        extra.remove(crate::tenancy::TENANT_EXTRA_KEY);
        if !attrs.tenant.is_empty() {
            extra.insert(
                crate::tenancy::TENANT_EXTRA_KEY.to_owned(),
                vec![attrs.tenant.clone()],
            );
        }
        SubjectAccessReviewSpec {
            resource_attributes,
            non_resource_attributes,
            user: attrs.user.name.clone(),
            groups: attrs.user.groups.clone(),
            extra,
            uid: attrs.user.uid.clone(),
        }
    }
}

impl SubjectAccessReviewStatus {
    /// The decision upstream reads from a status: both allowed and denied is an error
    /// (upstream returns Deny with that error, which the filter answers with 500);
    /// denied is Deny; allowed is Allow; neither is NoOpinion. The reason passes through.
    pub fn decision(&self) -> Result<Authorization, AuthorizationError> {
        let decision = match (self.allowed, self.denied) {
            (true, true) => return Err(AuthorizationError::new(BOTH_ALLOW_AND_DENY)),
            (_, true) => Decision::Deny,
            (true, false) => Decision::Allow,
            (false, false) => Decision::NoOpinion,
        };
        Ok(Authorization {
            decision,
            reason: self.reason.clone(),
        })
    }
}

/// The API version a webhook speaks (`--authorization-webhook-version`), parsed from the
/// flag's value (`"v1".parse()`; anything else is an [`UnsupportedWebhookVersion`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WebhookVersion {
    /// `authorization.k8s.io/v1` (the default).
    #[default]
    V1,
    /// `authorization.k8s.io/v1beta1`: the same body with groups under `spec.group`.
    V1beta1,
}

impl WebhookVersion {
    /// The `apiVersion` this version sends.
    pub fn api_version(self) -> &'static str {
        match self {
            WebhookVersion::V1 => "authorization.k8s.io/v1",
            WebhookVersion::V1beta1 => "authorization.k8s.io/v1beta1",
        }
    }
}

/// An `--authorization-webhook-version` other than `v1` or `v1beta1`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unsupported webhook authorizer version {0:?}, supported versions are [\"v1\" \"v1beta1\"]"
)]
pub struct UnsupportedWebhookVersion(pub String);

impl FromStr for WebhookVersion {
    type Err = UnsupportedWebhookVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "v1" => Ok(WebhookVersion::V1),
            "v1beta1" => Ok(WebhookVersion::V1beta1),
            other => Err(UnsupportedWebhookVersion(other.to_owned())),
        }
    }
}
