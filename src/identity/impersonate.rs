//! The `Impersonate-*` request headers: their names, and what a request asks to be
//! impersonated as, read in upstream's check order (k8s.io/apiserver
//! [`pkg/endpoints/filters/impersonation/impersonation.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/impersonation/impersonation.go)).
//! The checks themselves are the impersonation filter's; the authorization filter reads
//! these too, to refuse a request whose impersonation nobody checked.

use std::fmt::Write as _;

use http::HeaderMap;

use crate::gocompat::names;

/// `Impersonate-User`.
pub const IMPERSONATE_USER: &str = "impersonate-user";
/// `Impersonate-Group`.
pub const IMPERSONATE_GROUP: &str = "impersonate-group";
/// `Impersonate-Uid`.
pub const IMPERSONATE_UID: &str = "impersonate-uid";
/// The prefix of `Impersonate-Extra-<key>` headers, lower-case.
pub const IMPERSONATE_EXTRA_PREFIX: &str = "impersonate-extra-";

/// The user-name prefix of service accounts: `system:serviceaccount:<namespace>:<name>`.
pub(crate) const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

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
mod tests {
    use super::*;

    #[test]
    fn service_account_names_follow_split_username() {
        for (name, sa) in [
            (
                "system:serviceaccount:foo:default",
                Some(("foo", "default")),
            ),
            ("system:serviceaccount:foo:a.b-c", Some(("foo", "a.b-c"))),
            ("system:serviceaccount:foo", None),
            ("system:serviceaccount:foo:bar:baz", None),
            ("system:serviceaccount:Foo:bar", None),
            ("system:serviceaccount::bar", None),
            ("system:serviceaccount:foo.bar:baz", None),
            ("system:serviceaccounts:foo:bar", None),
        ] {
            assert_eq!(split_service_account(name), sa, "{name}");
        }
    }
}
