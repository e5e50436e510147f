//! Impersonation: `kubectl --as=bob --as-group=team`, checked as kube-apiserver checks it
//! (k8s.io/apiserver
//! [`pkg/endpoints/filters/impersonation/impersonation.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/impersonation/impersonation.go)).
//!
//! [`ImpersonationLayer`] sits between authentication and everything that reads the user.
//! When a request carries `Impersonate-User` (and optionally `Impersonate-Group`,
//! `Impersonate-Uid`, `Impersonate-Extra-<key>`), it asks the [`Authorizer`] whether the
//! authenticated user may `impersonate` each thing requested, in upstream's order:
//!
//! | requested | resource | API group | namespace | name | subresource |
//! |---|---|---|---|---|---|
//! | a user | `users` | `""` | | the user | |
//! | `system:serviceaccount:<ns>:<name>` | `serviceaccounts` | `""` | `<ns>` | `<name>` | |
//! | each group, in header order | `groups` | `""` | | the group | |
//! | each extra value | `userextras` | `authentication.k8s.io` | | the value | the key |
//! | the UID | `uids` | `authentication.k8s.io` | | the UID | |
//!
//! The first check that is not an Allow (an authorizer error included: it fails closed)
//! stops the request with upstream's 403 Forbidden `Status`, e.g. `users "bob" is
//! forbidden: User "alice" cannot impersonate resource "users" in API group "" at the
//! cluster scope`. When every check allows, the [`UserInfo`] in the extensions is
//! replaced by the impersonated one (groups built as upstream: the requested groups, or a
//! service account's two groups when none were requested, then `system:authenticated`,
//! or `system:unauthenticated` for `system:anonymous`; only the requested extras) and every
//! `Impersonate-*` header is removed, so nothing behind, a backend least of all, sees them.
//!
//! Other answers: groups, a UID or extras without a user, 400 `BadRequest` (`requested
//! [{Group  team    }] without impersonating a user`, Go's rendering of the requested
//! references, as kube-apiserver 1.35 and later; 1.32–1.34 answered 500); no user in the
//! extensions, 500 `no user found for request`; a header value that is not UTF-8, 400
//! naming the header (Go keeps the bytes; a name must be text here). An extra key is
//! percent-decoded (`Impersonate-Extra-Example.com%2fscopes` is `example.com/scopes`); a key
//! that does not decode, or decodes to bytes that are not UTF-8, is kept as sent.
//!
//! A request without impersonation headers goes straight through: no allocation, no
//! boxing. Mirrors k8s.io/apiserver
//! [`pkg/endpoints/filters/impersonation/impersonation.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/impersonation/impersonation.go)
//! (the legacy filter; constrained impersonation, KEP-5284, is not implemented).
//!
//! ```
//! use std::sync::Arc;
//! use kube_aggregator::authz::{AlwaysDeny, AuthorizationLayer};
//! use kube_aggregator::impersonation::ImpersonationLayer;
//!
//! // One authorizer for both: impersonation checks and the request itself.
//! let authorizer = Arc::new(AlwaysDeny);
//! let stack = tower::ServiceBuilder::new()
//!     .layer(ImpersonationLayer::new(authorizer.clone()))
//!     .layer(AuthorizationLayer::new(authorizer));
//! # let _ = stack;
//! ```
//!
//! [`Authorizer`]: crate::authz::Authorizer
//!
//! Floor 7 of the import order (docs/architecture.md): uses `audit_context`, `authn`,
//! `authz`, `body`, `filter`, `identity`, `status`, `tenancy`; used by `builder`,
//! `fuzz_logic`.

mod service;

use std::collections::BTreeMap;

pub use service::{
    Checking, Impersonated, ImpersonationLayer, ImpersonationService, ResponseFuture,
};

use crate::authn::{SYSTEM_ANONYMOUS, SYSTEM_AUTHENTICATED, SYSTEM_UNAUTHENTICATED, UserInfo};
use crate::authz::Attributes;
pub use crate::identity::{
    IMPERSONATE_EXTRA_PREFIX, IMPERSONATE_GROUP, IMPERSONATE_UID, IMPERSONATE_USER,
};
pub(crate) use crate::identity::{
    InvalidImpersonation, Requested, SERVICE_ACCOUNT_PREFIX, has_impersonation_headers,
    remove_impersonation_headers, requested,
};

/// The API group of the `userextras` and `uids` resources.
const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";

impl Requested {
    /// The `impersonate` check for this item, by `requester`.
    pub(crate) fn attributes(&self, requester: &UserInfo) -> Attributes {
        let (resource, api_group, api_version, namespace, name, subresource) = match self {
            Requested::User(n) => ("users", "", "", "", n.as_str(), ""),
            Requested::ServiceAccount { namespace, name } => (
                "serviceaccounts",
                "",
                "",
                namespace.as_str(),
                name.as_str(),
                "",
            ),
            Requested::Group(g) => ("groups", "", "", "", g.as_str(), ""),
            Requested::Extra { key, value } => (
                "userextras",
                AUTHENTICATION_GROUP,
                "v1",
                "",
                value.as_str(),
                key.as_str(),
            ),
            Requested::Uid(u) => ("uids", AUTHENTICATION_GROUP, "v1", "", u.as_str(), ""),
        };
        Attributes {
            user: requester.clone(),
            verb: "impersonate".to_owned(),
            namespace: namespace.to_owned(),
            api_group: api_group.to_owned(),
            api_version: api_version.to_owned(),
            resource: resource.to_owned(),
            subresource: subresource.to_owned(),
            name: name.to_owned(),
            is_resource_request: true,
            ..Attributes::default()
        }
    }
}

/// The impersonated user, as upstream assembles it from the checked items.
pub(crate) fn impersonated_user(items: &[Requested]) -> UserInfo {
    let groups_specified = items.iter().any(|r| matches!(r, Requested::Group(_)));
    let mut user = UserInfo::default();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for item in items {
        match item {
            Requested::User(n) => user.name = n.clone(),
            Requested::ServiceAccount { namespace, name } => {
                user.name = format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}");
                if !groups_specified {
                    user.groups = vec![
                        "system:serviceaccounts".to_owned(),
                        format!("system:serviceaccounts:{namespace}"),
                    ];
                }
            }
            Requested::Group(g) => user.groups.push(g.clone()),
            Requested::Extra { key, value } => {
                extra.entry(key.clone()).or_default().push(value.clone())
            }
            Requested::Uid(u) => user.uid = u.clone(),
        }
    }
    if user.name == SYSTEM_ANONYMOUS {
        if !user.groups.iter().any(|g| g == SYSTEM_UNAUTHENTICATED) {
            user.groups.push(SYSTEM_UNAUTHENTICATED.to_owned());
        }
    } else if !user
        .groups
        .iter()
        .any(|g| g == SYSTEM_AUTHENTICATED || g == SYSTEM_UNAUTHENTICATED)
    {
        user.groups.push(SYSTEM_AUTHENTICATED.to_owned());
    }
    user.extra = extra;
    user
}

#[cfg(test)]
mod tests;
