//! The built-in authorizers: `AlwaysAllow` and `AlwaysDeny` (`--authorization-mode`),
//! `PrivilegedGroups` (kube-apiserver's `system:masters` short-circuit) and `Union`
//! (the first decision that is not `NoOpinion`, as `--authorization-mode=A,B` chains them).

use std::sync::Arc;

use super::{
    Attributes, Authorization, AuthorizationError, AuthorizeFuture, Authorizer, Decision, Failed,
    Rules, RulesFuture, SYSTEM_MASTERS, rules,
};
use crate::identity::UserInfo;

/// Allows everything (`--authorization-mode=AlwaysAllow`), with an empty reason. For
/// development stacks and tests; the aggregator then proxies every authenticated request.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysAllow;

impl Authorizer for AlwaysAllow {
    fn authorize(&self, _: &Attributes) -> AuthorizeFuture {
        Box::pin(std::future::ready(Ok(Authorization::new(Decision::Allow))))
    }

    /// Everything: `*` verbs on `*` resources of `*` groups and on `*` URLs.
    fn rules_for(&self, _: &UserInfo, _: &str) -> RulesFuture {
        Box::pin(std::future::ready(rules::allow_everything()))
    }
}

/// Denies everything (`--authorization-mode=AlwaysDeny`), with upstream's empty reason.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysDeny;

impl Authorizer for AlwaysDeny {
    fn authorize(&self, _: &Attributes) -> AuthorizeFuture {
        Box::pin(std::future::ready(Ok(Authorization::new(Decision::Deny))))
    }

    /// Nothing, and that is the complete list.
    fn rules_for(&self, _: &UserInfo, _: &str) -> RulesFuture {
        Box::pin(std::future::ready(Rules::default()))
    }
}

/// Allows every request of a user in one of its groups and has no opinion on the rest,
/// with an empty reason either way.
///
/// kube-apiserver always puts one of these for `system:masters` in front of every
/// configured mode (`authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup)` in
/// [pkg/kubeapiserver/authorizer/config.go](https://github.com/kubernetes/kubernetes/blob/master/pkg/kubeapiserver/authorizer/config.go),
/// the type in k8s.io/apiserver `pkg/authorization/authorizerfactory/builtin.go`), so a
/// break-glass administrator is answered without asking a webhook that may be down or
/// hanging. Put it first in a [`Union`]:
///
/// ```
/// use kube_aggregator::authz::{AlwaysDeny, PrivilegedGroups, Union};
/// let authorizer = Union::new()
///     .push("privileged-groups", PrivilegedGroups::system_masters())
///     .push("AlwaysDeny", AlwaysDeny);
/// # let _ = authorizer;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivilegedGroups {
    groups: Vec<String>,
}

impl PrivilegedGroups {
    /// Allows users in any of `groups`.
    pub fn new(groups: impl IntoIterator<Item = impl Into<String>>) -> PrivilegedGroups {
        PrivilegedGroups {
            groups: groups.into_iter().map(Into::into).collect(),
        }
    }

    /// Allows `system:masters`, as kube-apiserver does.
    pub fn system_masters() -> PrivilegedGroups {
        PrivilegedGroups::new([SYSTEM_MASTERS])
    }
}

impl Authorizer for PrivilegedGroups {
    fn authorize(&self, attrs: &Attributes) -> AuthorizeFuture {
        let privileged = attrs
            .user
            .groups
            .iter()
            .any(|g| self.groups.iter().any(|p| p == g));
        let decision = if privileged {
            Decision::Allow
        } else {
            Decision::NoOpinion
        };
        Box::pin(std::future::ready(Ok(Authorization::new(decision))))
    }

    /// Contributes no rules: kube-apiserver does not list this authorizer among its rule
    /// resolvers.
    fn rules_for(&self, _: &UserInfo, _: &str) -> RulesFuture {
        Box::pin(std::future::ready(Rules::default()))
    }
}

/// Asks authorizers in order; the first Allow or Deny wins with its reason; if all have
/// no opinion the result is NoOpinion with their reasons joined by newlines; an error
/// stops nothing but is returned when nobody decided (k8s.io/apiserver
/// [`pkg/authorization/union/union.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/authorization/union/union.go)).
///
/// ```
/// use kube_aggregator::authn::UserInfo;
/// use kube_aggregator::authz::{AlwaysDeny, Attributes, Authorizer, Decision, PrivilegedGroups, Union};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let union = Union::new()
///     .push("privileged-groups", PrivilegedGroups::system_masters())
///     .push("AlwaysDeny", AlwaysDeny);
/// let attrs = Attributes { user: UserInfo::new("alice", ["dev"]), verb: "get".into(), ..Attributes::default() };
/// // The first member has no opinion on alice; the second denies.
/// assert_eq!(union.authorize(&attrs).await.unwrap().decision, Decision::Deny);
/// # }
/// ```
#[derive(Clone, Default)]
pub struct Union {
    authorizers: Vec<(String, Arc<dyn Authorizer>)>,
}

impl std::fmt::Debug for Union {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.authorizers.iter().map(|(n, _)| n))
            .finish()
    }
}

impl Union {
    /// An empty union (decides NoOpinion, so every request is forbidden).
    pub fn new() -> Union {
        Union::default()
    }

    /// Appends `authorizer`, named `name` in NoOpinion reasons.
    pub fn push(mut self, name: impl Into<String>, authorizer: impl Authorizer) -> Union {
        self.authorizers.push((name.into(), Arc::new(authorizer)));
        self
    }
}

/// What a [`Union`] has gathered from the authorizers asked so far.
#[derive(Default)]
pub(super) struct UnionVerdicts {
    reasons: Vec<String>,
    errors: Vec<AuthorizationError>,
}

impl UnionVerdicts {
    /// Takes one authorizer's answer; `Some` when it decided.
    fn take(
        &mut self,
        name: &str,
        answer: Result<Authorization, AuthorizationError>,
    ) -> Option<Authorization> {
        match answer {
            Ok(a) if a.decision != Decision::NoOpinion => Some(a),
            Ok(a) => {
                if !a.reason.is_empty() {
                    self.reasons.push(format!("{name}: {}", a.reason));
                }
                None
            }
            Err(e) => {
                self.errors.push(e);
                None
            }
        }
    }

    fn finish(mut self) -> Result<Authorization, AuthorizationError> {
        match self.errors.len() {
            0 => {}
            1 => return Err(self.errors.remove(0)),
            _ => return Err(AuthorizationError::new(Failed(self.errors))),
        }
        Ok(Authorization {
            decision: Decision::NoOpinion,
            reason: self.reasons.join("\n"),
        })
    }
}

impl Authorizer for Union {
    fn authorize(&self, attrs: &Attributes) -> AuthorizeFuture {
        // Sequential, as upstream: a later authorizer is not asked once one decided.
        // Answers that are ready at once (a privileged group, a cached decision) are taken
        // here; only when one must be waited for do the attributes get copied for the rest.
        let mut verdicts = UnionVerdicts::default();
        for (i, (name, authorizer)) in self.authorizers.iter().enumerate() {
            let mut pending = authorizer.authorize(attrs);
            let polled = futures_util::FutureExt::now_or_never(&mut pending);
            match polled {
                Some(answer) => {
                    if let Some(decided) = verdicts.take(name, answer) {
                        return Box::pin(std::future::ready(Ok(decided)));
                    }
                }
                None => {
                    let rest = self.authorizers[i + 1..].to_vec();
                    let attrs = attrs.clone();
                    let name = name.clone();
                    return Box::pin(async move {
                        if let Some(decided) = verdicts.take(&name, pending.await) {
                            return Ok(decided);
                        }
                        for (name, authorizer) in rest {
                            if let Some(decided) =
                                verdicts.take(&name, authorizer.authorize(&attrs).await)
                            {
                                return Ok(decided);
                            }
                        }
                        verdicts.finish()
                    });
                }
            }
        }
        Box::pin(std::future::ready(verdicts.finish()))
    }

    /// Every member's rules together (upstream's `unionAuthzRulesHandler`): incomplete when
    /// any member's list is, with every member's error.
    fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesFuture {
        let pending: Vec<RulesFuture> = self
            .authorizers
            .iter()
            .map(|(_, a)| a.rules_for(user, namespace))
            .collect();
        Box::pin(async move {
            let mut all = Rules::default();
            for p in pending {
                all.merge(p.await);
            }
            all
        })
    }
}
