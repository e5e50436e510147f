//! Who a request runs as: [`UserInfo`] and the well-known user and group names
//! (k8s.io/apiserver
//! [`pkg/authentication/user/user.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/authentication/user/user.go)).

use std::collections::BTreeMap;

/// The group every authenticated, non-anonymous user gets (k8s.io/apiserver
/// `pkg/authentication/group/authenticated_group_adder.go` adds it).
pub const SYSTEM_AUTHENTICATED: &str = "system:authenticated";
/// The group of anonymous requests.
pub const SYSTEM_UNAUTHENTICATED: &str = "system:unauthenticated";
/// The anonymous user name.
pub const SYSTEM_ANONYMOUS: &str = "system:anonymous";

/// An authenticated user (k8s.io/apiserver `user.Info`).
///
/// The [`AuthenticationLayer`](crate::authn::AuthenticationLayer) puts one into each
/// request's extensions; impersonation replaces it; authorization reads it; the proxy
/// writes it to backends as `X-Remote-User`, `X-Remote-Uid`, `X-Remote-Group` and
/// `X-Remote-Extra-*`. A host that authenticates by its own means may insert one itself.
///
/// ```
/// use kube_aggregator::authn::{SYSTEM_AUTHENTICATED, UserInfo};
///
/// let mut alice = UserInfo::new("alice", ["dev"]);
/// alice.extra.insert("scopes.example.com".into(), vec!["read".into()]);
/// alice.add_authenticated_group();
/// assert_eq!(alice.groups, ["dev", SYSTEM_AUTHENTICATED]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct UserInfo {
    /// User name, e.g. `alice` or `system:kube-aggregator`.
    pub name: String,
    /// Unique id; empty when unknown.
    pub uid: String,
    /// Groups, in the order the authenticator reported them.
    pub groups: Vec<String>,
    /// Extra attributes; keys are expected lower-case (they travel in header names, which
    /// backends lower-case), values in order.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user with a name and groups, no UID and no extra.
    pub fn new(
        name: impl Into<String>,
        groups: impl IntoIterator<Item = impl Into<String>>,
    ) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.into_iter().map(Into::into).collect(),
            ..UserInfo::default()
        }
    }

    /// A copy whose group list has room for one more: the `system:authenticated` that
    /// [`add_authenticated_group`](Self::add_authenticated_group) appends then does not
    /// move the list. For an authenticator answering from a cache.
    pub(crate) fn clone_with_group_room(&self) -> UserInfo {
        let mut groups = Vec::with_capacity(self.groups.len() + 1);
        groups.extend(self.groups.iter().cloned());
        UserInfo {
            name: self.name.clone(),
            uid: self.uid.clone(),
            groups,
            extra: self.extra.clone(),
        }
    }

    /// Appends `system:authenticated` unless the user is anonymous or already carries
    /// `system:authenticated` or `system:unauthenticated`
    /// (k8s.io/apiserver `authenticated_group_adder.go`).
    pub fn add_authenticated_group(&mut self) {
        if self.name == SYSTEM_ANONYMOUS {
            return;
        }
        if self
            .groups
            .iter()
            .any(|g| g == SYSTEM_AUTHENTICATED || g == SYSTEM_UNAUTHENTICATED)
        {
            return;
        }
        self.groups.push(SYSTEM_AUTHENTICATED.to_owned());
    }
}

/// The group kube-apiserver's privileged-group authorizer allows (`user.SystemPrivilegedGroup`).
pub const SYSTEM_MASTERS: &str = "system:masters";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_adder_follows_upstream() {
        let mut u = UserInfo::new("alice", ["dev"]);
        u.add_authenticated_group();
        assert_eq!(u.groups, ["dev", SYSTEM_AUTHENTICATED]);
        let mut anon = UserInfo::new(SYSTEM_ANONYMOUS, [SYSTEM_UNAUTHENTICATED]);
        anon.add_authenticated_group();
        assert_eq!(anon.groups, [SYSTEM_UNAUTHENTICATED]);
        let mut already = UserInfo::new("bob", [SYSTEM_AUTHENTICATED]);
        already.add_authenticated_group();
        assert_eq!(already.groups, [SYSTEM_AUTHENTICATED]);
    }

    /// The copy is equal, and appending `system:authenticated` to it keeps its list where
    /// it is.
    #[test]
    fn a_copy_with_group_room_takes_the_authenticated_group_in_place() {
        let mut u = UserInfo::new("alice", ["dev", "ops"]);
        u.uid = "42".into();
        u.extra.insert("scopes".into(), vec!["a".into()]);
        let mut copy = u.clone_with_group_room();
        assert_eq!(copy, u);
        let list = copy.groups.as_ptr();
        copy.add_authenticated_group();
        assert_eq!(copy.groups, ["dev", "ops", SYSTEM_AUTHENTICATED]);
        assert_eq!(copy.groups.as_ptr(), list);
    }
}
