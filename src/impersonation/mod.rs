//! Impersonation: `kubectl --as=bob --as-group=team`, checked as kube-apiserver checks it
//! (docs/upstream-behaviour.md §11).
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

mod service;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use http::HeaderMap;

pub use service::{Impersonated, ImpersonationLayer, ImpersonationService, ResponseFuture};

use crate::authn::{SYSTEM_ANONYMOUS, SYSTEM_AUTHENTICATED, SYSTEM_UNAUTHENTICATED, UserInfo};
use crate::authz::Attributes;
use crate::gocompat::names;

/// `Impersonate-User`.
pub const IMPERSONATE_USER: &str = "impersonate-user";
/// `Impersonate-Group`.
pub const IMPERSONATE_GROUP: &str = "impersonate-group";
/// `Impersonate-Uid`.
pub const IMPERSONATE_UID: &str = "impersonate-uid";
/// The prefix of `Impersonate-Extra-<key>` headers, lower-case.
pub const IMPERSONATE_EXTRA_PREFIX: &str = "impersonate-extra-";

/// The API group of the `userextras` and `uids` resources.
const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// True when any header name starts with `impersonate-`: the cheap test that lets every
/// other request through untouched.
pub(crate) fn has_impersonation_headers(headers: &HeaderMap) -> bool {
    headers
        .keys()
        .any(|n| n.as_str().starts_with("impersonate-"))
}

/// Deletes every `Impersonate-*` header upstream's filter deletes.
pub(crate) fn remove_impersonation_headers(headers: &mut HeaderMap) {
    if !has_impersonation_headers(headers) {
        return;
    }
    let doomed: Vec<http::HeaderName> = headers
        .keys()
        .filter(|n| {
            let n = n.as_str();
            n == IMPERSONATE_USER
                || n == IMPERSONATE_GROUP
                || n == IMPERSONATE_UID
                || n.starts_with(IMPERSONATE_EXTRA_PREFIX)
        })
        .cloned()
        .collect();
    for name in doomed {
        headers.remove(&name);
    }
}

/// One thing asked for (upstream builds a `v1.ObjectReference` per item).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Requested {
    User(String),
    ServiceAccount { namespace: String, name: String },
    Group(String),
    Extra { key: String, value: String },
    Uid(String),
}

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

    /// Go's `%v` of the `ObjectReference` upstream builds:
    /// `{Kind Namespace Name UID APIVersion ResourceVersion FieldPath}`.
    fn write_go_value(&self, out: &mut String) {
        let (kind, namespace, name, api_version, field_path) = match self {
            Requested::User(n) => ("User", "", n.as_str(), "", ""),
            Requested::ServiceAccount { namespace, name } => {
                ("ServiceAccount", namespace.as_str(), name.as_str(), "", "")
            }
            Requested::Group(g) => ("Group", "", g.as_str(), "", ""),
            Requested::Extra { key, value } => (
                "UserExtra",
                "",
                value.as_str(),
                "authentication.k8s.io/v1",
                key.as_str(),
            ),
            Requested::Uid(u) => ("UID", "", u.as_str(), "authentication.k8s.io/v1", ""),
        };
        let _ = write!(
            out,
            "{{{kind} {namespace} {name}  {api_version}  {field_path}}}"
        );
    }
}

/// Why the impersonation headers cannot be used at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InvalidImpersonation {
    /// Groups, a UID or extras without a user.
    #[error("requested {0} without impersonating a user")]
    NoUser(String),
    /// A header value that is not UTF-8.
    #[error("the {0} header value is not valid UTF-8")]
    NotUtf8(String),
}

/// The requested items in upstream's check order: user, groups in header order, extras
/// (in header order here; Go's map order is unspecified), then the UID. Empty when the
/// request does not impersonate (no header, or only an empty `Impersonate-User`).
pub(crate) fn requested(headers: &HeaderMap) -> Result<Vec<Requested>, InvalidImpersonation> {
    let text = |name: &str, v: &http::HeaderValue| {
        std::str::from_utf8(v.as_bytes())
            .map(str::to_owned)
            .map_err(|_| InvalidImpersonation::NotUtf8(name.to_owned()))
    };
    let mut out = Vec::new();
    let user = match headers.get(IMPERSONATE_USER) {
        Some(v) => text("Impersonate-User", v)?,
        None => String::new(),
    };
    let has_user = !user.is_empty();
    if has_user {
        out.push(match split_service_account(&user) {
            Some((namespace, name)) => Requested::ServiceAccount {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            },
            None => Requested::User(user),
        });
    }
    let mut others = false;
    for v in headers.get_all(IMPERSONATE_GROUP) {
        others = true;
        out.push(Requested::Group(text("Impersonate-Group", v)?));
    }
    let mut extras: Vec<&http::HeaderName> = Vec::new();
    for name in headers.keys() {
        if name.as_str().starts_with(IMPERSONATE_EXTRA_PREFIX) && !extras.contains(&name) {
            extras.push(name);
        }
    }
    for name in extras {
        others = true;
        let key =
            crate::identity::unescape_extra_key(&name.as_str()[IMPERSONATE_EXTRA_PREFIX.len()..]);
        for v in headers.get_all(name) {
            out.push(Requested::Extra {
                key: key.clone(),
                value: text(name.as_str(), v)?,
            });
        }
    }
    if let Some(v) = headers.get(IMPERSONATE_UID) {
        let uid = text("Impersonate-Uid", v)?;
        if !uid.is_empty() {
            others = true;
            out.push(Requested::Uid(uid));
        }
    }
    if others && !has_user {
        let mut list = String::from("[");
        for (i, r) in out.iter().enumerate() {
            if i > 0 {
                list.push(' ');
            }
            r.write_go_value(&mut list);
        }
        list.push(']');
        return Err(InvalidImpersonation::NoUser(list));
    }
    Ok(out)
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

/// `serviceaccount.SplitUsername`: `system:serviceaccount:<ns>:<name>` with exactly two
/// parts, a DNS-1123 label namespace and a DNS-1123 subdomain name.
fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix(SERVICE_ACCOUNT_PREFIX)?;
    let mut parts = rest.split(':');
    let (namespace, name) = (parts.next()?, parts.next()?);
    if parts.next().is_some()
        || !names::is_dns1123_label(namespace)
        || !names::is_dns1123_subdomain(name)
    {
        return None;
    }
    Some((namespace, name))
}

#[cfg(test)]
mod tests;
