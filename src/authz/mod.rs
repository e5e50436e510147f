//! Authorization: may this user do this.
//!
//! [`AuthorizationLayer`] turns each request into a [`RequestInfo`] (the port of
//! k8s.io/apiserver `requestinfo.go`) and [`Attributes`], asks an [`Authorizer`], and
//! answers 403 with the upstream Forbidden `Status` when the answer is not Allow, or 500
//! when the authorizer failed (mirrors
//! [`pkg/endpoints/filters/authorization.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/authorization.go)).
//! It never lets a request through on an error.
//!
//! Authorizers compose as kube-apiserver's modes do: a [`Union`] asks each in order
//! (`--authorization-mode=Node,RBAC,Webhook`), [`PrivilegedGroups`] answers
//! `system:masters` first, and the [`SubjectAccessReviewAuthorizer`] asks a webhook
//! with upstream's request shape and decision cache.
//!
//! ```
//! use kube_aggregator::authn::UserInfo;
//! use kube_aggregator::authz::{
//!     AlwaysAllow, Attributes, AuthorizationLayer, Authorizer, Decision, PrivilegedGroups,
//!     RequestInfo, Union,
//! };
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let authorizer = Union::new()
//!     .push("privileged-groups", PrivilegedGroups::system_masters());
//!
//! // What the layer asks for `kubectl get nodes.metrics.k8s.io` by alice.
//! let info = RequestInfo::from_parts(&http::Method::GET, &"/apis/metrics.k8s.io/v1beta1/nodes".parse()?)?;
//! let alice = Attributes::new(UserInfo::new("alice", ["dev"]), &info);
//! assert_eq!((alice.verb.as_str(), alice.resource.as_str()), ("list", "nodes"));
//! assert_eq!(authorizer.authorize(&alice).await?.decision, Decision::NoOpinion); // so 403
//!
//! let admin = Attributes::new(UserInfo::new("admin", ["system:masters"]), &info);
//! assert_eq!(authorizer.authorize(&admin).await?.decision, Decision::Allow);
//!
//! let layer = AuthorizationLayer::new(AlwaysAllow);
//! # let _ = layer;
//! # Ok(()) }
//! ```
//!
//! Floor 6 of the import order (docs/architecture.md): uses `audit_context`, `authn`,
//! `body`, `filter`, `gocompat`, `identity`, `outcome_metrics`, `rt`, `span`, `status`,
//! `tenancy`, `webhook`; used by `aggregator`, `apiregistration`, `audit`, `builder`,
//! `fuzz_logic`, `impersonation`, `inflight`, `metrics`, `selfreview`, `tenant`, `timeout`,
//! `trace`.

mod authorizers;
mod cache;
mod forbidden;
mod layer;
mod metrics;
pub mod request_info;
mod rules;
mod webhook;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use forbidden::forbidden_message;
pub(crate) use forbidden::forbidden_response;
pub use layer::{AuthorizationLayer, AuthorizationService, DECISION_ANNOTATION, REASON_ANNOTATION};
pub use metrics::AuthorizationMetrics;
pub use request_info::{ApiPath, RequestInfo, RequestInfoError};
pub use rules::{NonResourceRule, ResourceRule, Rules, RulesFuture};
pub use webhook::{
    NonResourceAttributes, ResourceAttributes, SelectorAttributes, SubjectAccessReview,
    SubjectAccessReviewAuthorizer, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
    UnsupportedWebhookVersion, WebhookVersion, subject_access_review_body,
};

pub use crate::identity::SYSTEM_MASTERS;
use crate::identity::UserInfo;

pub use authorizers::{AlwaysAllow, AlwaysDeny, PrivilegedGroups, Union};

/// What is being asked for, by whom (k8s.io/apiserver `authorizer.Attributes`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// The caller.
    pub user: UserInfo,
    /// Verb, e.g. `get`, `list`, `watch`, `create`; for non-resource requests the
    /// lower-cased HTTP method.
    pub verb: String,
    /// Namespace, empty for cluster-scoped requests.
    pub namespace: String,
    /// API group; empty for the core group.
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Resource, e.g. `nodes`.
    pub resource: String,
    /// Subresource, e.g. `status`.
    pub subresource: String,
    /// Object name, empty for collections.
    pub name: String,
    /// The request path.
    pub path: String,
    /// True for requests to API resources, false for non-resource URLs.
    pub is_resource_request: bool,
    /// The field selector of a list, watch or deletecollection, as requirements
    /// (operators `In` and `NotIn`, one value each); empty when none was given or it did
    /// not parse (upstream's `AuthorizeWithSelectors`, on by default since 1.32).
    pub field_selector: Vec<SelectorRequirement>,
    /// The label selector likewise (operators `In`, `NotIn`, `Exists`, `DoesNotExist`;
    /// `>` and `<` terms are left out, which only broadens the check).
    pub label_selector: Vec<SelectorRequirement>,
    /// The tenant the request is in (the `<name>` of `/clusters/<name>/...`, see
    /// [`crate::tenant`]); empty outside a tenant. Not upstream: kcp's logical cluster,
    /// which the SubjectAccessReview carries as
    /// `spec.extra["authorization.kcp.io/cluster-name"]`.
    pub tenant: String,
}

/// One requirement of a field or label selector, as a SubjectAccessReview carries it
/// (`metav1.FieldSelectorRequirement` / `LabelSelectorRequirement`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SelectorRequirement {
    /// The field path or label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// The values; empty (and omitted) for `Exists` and `DoesNotExist`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// The requirements upstream's webhook sends for RequestInfo's raw selectors
/// (`GetAuthorizerAttributes`, then `fieldSelectorToAuthorizationAPI` /
/// `labelSelectorToAuthorizationAPI` of
/// [`plugin/pkg/authorizer/webhook/webhook.go`](https://github.com/kubernetes/apiserver/blob/master/plugin/pkg/authorizer/webhook/webhook.go)):
/// a selector that does not parse gives none.
pub(crate) fn selector_requirements(
    field: &str,
    label: &str,
) -> (Vec<SelectorRequirement>, Vec<SelectorRequirement>) {
    use request_info::selector::{LabelOperator, parse_field_selector, parse_label_selector};
    // A selector that does not parse, or an empty one, gives no requirements.
    let fields = parse_field_selector(field)
        .unwrap_or_default()
        .into_iter()
        .map(|r| SelectorRequirement {
            key: r.field,
            operator: if r.equal { "In" } else { "NotIn" }.to_owned(),
            values: vec![r.value],
        })
        .collect();
    let labels = parse_label_selector(label)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| {
            let operator = match r.operator {
                LabelOperator::Equals | LabelOperator::In => "In",
                LabelOperator::NotEquals | LabelOperator::NotIn => "NotIn",
                LabelOperator::Exists => "Exists",
                LabelOperator::DoesNotExist => "DoesNotExist",
                LabelOperator::GreaterThan | LabelOperator::LessThan => return None,
            };
            Some(SelectorRequirement {
                key: r.key,
                operator: operator.to_owned(),
                values: r.values,
            })
        })
        .collect();
    (fields, labels)
}

impl Attributes {
    /// Builds the attributes from a user and the request's [`RequestInfo`] (upstream
    /// `GetAuthorizerAttributes`).
    pub fn new(user: UserInfo, info: &RequestInfo) -> Attributes {
        let (field_selector, label_selector) =
            selector_requirements(&info.field_selector, &info.label_selector);
        Attributes {
            user,
            verb: info.verb.clone(),
            namespace: info.namespace.clone(),
            api_group: info.api_group.clone(),
            api_version: info.api_version.clone(),
            resource: info.resource.clone(),
            subresource: info.subresource.clone(),
            name: info.name.clone(),
            path: info.path.clone(),
            is_resource_request: info.is_resource_request,
            field_selector,
            label_selector,
            tenant: String::new(),
        }
    }

    /// [`Attributes::new`] without copying: the strings `info` shares with the
    /// attributes move out of it (it is left with them empty) until
    /// [`give_back`](Self::give_back) returns them. For a filter that owns the request
    /// until the decision, so nothing else sees `info` meanwhile.
    pub(crate) fn lend(user: UserInfo, info: &mut RequestInfo) -> Attributes {
        use std::mem::take;
        let (field_selector, label_selector) =
            selector_requirements(&info.field_selector, &info.label_selector);
        Attributes {
            user,
            verb: take(&mut info.verb),
            namespace: take(&mut info.namespace),
            api_group: take(&mut info.api_group),
            api_version: take(&mut info.api_version),
            resource: take(&mut info.resource),
            subresource: take(&mut info.subresource),
            name: take(&mut info.name),
            path: take(&mut info.path),
            is_resource_request: info.is_resource_request,
            field_selector,
            label_selector,
            tenant: String::new(),
        }
    }

    /// Returns the strings [`lend`](Self::lend) took to `info`, and the user.
    pub(crate) fn give_back(self, info: &mut RequestInfo) -> UserInfo {
        info.verb = self.verb;
        info.namespace = self.namespace;
        info.api_group = self.api_group;
        info.api_version = self.api_version;
        info.resource = self.resource;
        info.subresource = self.subresource;
        info.name = self.name;
        info.path = self.path;
        self.user
    }

    /// These attributes within `tenant` (see [`Attributes::tenant`]).
    pub fn in_tenant(mut self, tenant: Option<&crate::tenancy::Tenant>) -> Attributes {
        self.tenant = tenant.map(|t| t.name().to_owned()).unwrap_or_default();
        self
    }

    /// True for `get`, `list` and `watch`.
    pub fn is_read_only(&self) -> bool {
        matches!(self.verb.as_str(), "get" | "list" | "watch")
    }
}

/// An authorizer's verdict (upstream's `authorizer.Decision`). Only `Allow` lets a request
/// through; `Deny` and `NoOpinion` both end as 403 when no other authorizer allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// The request is allowed.
    Allow,
    /// The request is denied; no other authorizer is asked.
    Deny,
    /// No opinion; the next authorizer is asked, and if none allows, the request is denied.
    NoOpinion,
}

/// A decision with the authorizer's reason (may be empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// The verdict.
    pub decision: Decision,
    /// Why; appended to the Forbidden message as `: <reason>` when non-empty.
    pub reason: String,
}

impl Authorization {
    /// A decision without a reason.
    pub fn new(decision: Decision) -> Authorization {
        Authorization {
            decision,
            reason: String::new(),
        }
    }
}

/// An authorizer could not decide (the webhook could not be reached, its answer did not
/// decode, it said both allow and deny): answered 500, never taken as an Allow. Its
/// `Display` and `source` are those of the cause, which [`AuthorizationError::get_ref`]
/// gives for downcasting; cloning shares it (decisions are cached, errors are not).
#[derive(Debug, Clone, thiserror::Error)]
#[error(transparent)]
pub struct AuthorizationError(Arc<dyn std::error::Error + Send + Sync>);

impl AuthorizationError {
    /// An error caused by `cause` (an error, or a message as a `String` or `&str`).
    pub fn new(cause: impl Into<crate::body::BoxError>) -> AuthorizationError {
        AuthorizationError(Arc::from(cause.into()))
    }

    /// The cause.
    pub fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

/// Every member of a [`Union`] that failed, as upstream's `utilerrors.NewAggregate`
/// lists them (`a, b`).
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
struct Failed(Vec<AuthorizationError>);

/// The boxed future an [`Authorizer`] returns.
pub type AuthorizeFuture =
    Pin<Box<dyn Future<Output = Result<Authorization, AuthorizationError>> + Send>>;

/// A policy that decides requests (k8s.io/apiserver `authorizer.Authorizer`,
/// [`pkg/authorization/authorizer/interfaces.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/authorization/authorizer/interfaces.go)).
///
/// Called on the request path for every request (and for every item an impersonation
/// asks for), so it should answer from memory or a cache. Implemented for `Arc<A>` and
/// `Box<A>`; the same authorizer is usually shared by the authorization, impersonation
/// and self-review layers.
pub trait Authorizer: Send + Sync + 'static {
    /// Decides `attrs`. An `Err` means "could not decide": the request gets 500 and is
    /// never allowed.
    fn authorize(&self, attrs: &Attributes) -> AuthorizeFuture;

    /// What `user` may do in `namespace`, for SelfSubjectRulesReview (upstream
    /// `RuleResolver.RulesFor`). The default says the list is incomplete: an authorizer
    /// that only answers yes or no cannot list its rules.
    fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesFuture {
        let _ = (user, namespace);
        Box::pin(std::future::ready(Rules::unsupported(
            rules::RULES_UNSUPPORTED,
        )))
    }
}

impl<A: Authorizer + ?Sized> Authorizer for Arc<A> {
    fn authorize(&self, attrs: &Attributes) -> AuthorizeFuture {
        (**self).authorize(attrs)
    }

    fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesFuture {
        (**self).rules_for(user, namespace)
    }
}

impl<A: Authorizer + ?Sized> Authorizer for Box<A> {
    fn authorize(&self, attrs: &Attributes) -> AuthorizeFuture {
        (**self).authorize(attrs)
    }

    fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesFuture {
        (**self).rules_for(user, namespace)
    }
}
