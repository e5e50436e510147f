//! What a user may do in a namespace, as a list of rules: upstream's
//! `authorizer.RuleResolver`, which `SelfSubjectRulesReview` (`kubectl auth can-i --list`)
//! reports (kubernetes
//! [`pkg/registry/authorization/selfsubjectrulesreview/rest.go`](https://github.com/kubernetes/kubernetes/blob/master/pkg/registry/authorization/selfsubjectrulesreview/rest.go)).

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

/// The boxed future [`Authorizer::rules_for`](super::Authorizer::rules_for) returns.
pub type RulesFuture = Pin<Box<dyn Future<Output = Rules> + Send>>;

/// Verbs allowed on resources (`authorization.k8s.io/v1` `ResourceRule`); `*` is any.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceRule {
    /// Verbs, e.g. `get`, `list`, `*`.
    pub verbs: Vec<String>,
    /// API groups; `""` is the core group.
    #[serde(rename = "apiGroups", skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Resources, e.g. `pods`, `pods/log`, `*`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Object names the rule is limited to; empty is any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
}

/// Verbs allowed on non-resource URLs (`NonResourceRule`); a trailing `*` is a prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NonResourceRule {
    /// Verbs, e.g. `get`.
    pub verbs: Vec<String>,
    /// Paths, e.g. `/healthz`, `/apis/*`.
    #[serde(rename = "nonResourceURLs", skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

/// An authorizer's rules for one user and namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Rules on resources.
    pub resource_rules: Vec<ResourceRule>,
    /// Rules on non-resource URLs.
    pub non_resource_rules: Vec<NonResourceRule>,
    /// True when the authorizer may allow more than these rules say.
    pub incomplete: bool,
    /// Why the list is incomplete, one entry per failing authorizer.
    pub errors: Vec<String>,
}

impl Rules {
    /// No rules, incomplete, with `error`: what an authorizer that cannot list rules says
    /// (the webhook's `webhook authorizer does not support user rule resolution`).
    pub fn unsupported(error: impl Into<String>) -> Rules {
        Rules {
            incomplete: true,
            errors: vec![error.into()],
            ..Rules::default()
        }
    }

    /// Adds `other`'s rules, as upstream's union of rule resolvers does.
    pub fn merge(&mut self, other: Rules) {
        self.resource_rules.extend(other.resource_rules);
        self.non_resource_rules.extend(other.non_resource_rules);
        self.incomplete |= other.incomplete;
        self.errors.extend(other.errors);
    }

    /// The errors as upstream's `utilerrors.NewAggregate(...).Error()` prints them: one as
    /// it is, several de-duplicated, joined with `, ` in brackets; `None` when there are
    /// none.
    pub fn evaluation_error(&self) -> Option<String> {
        match self.errors.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            many => {
                let mut seen: Vec<&str> = Vec::new();
                for e in many {
                    if !seen.contains(&e.as_str()) {
                        seen.push(e);
                    }
                }
                Some(if seen.len() == 1 {
                    seen[0].to_owned()
                } else {
                    format!("[{}]", seen.join(", "))
                })
            }
        }
    }
}

/// The error of an authorizer that does not implement
/// [`rules_for`](super::Authorizer::rules_for).
pub(crate) const RULES_UNSUPPORTED: &str = "authorizer does not support user rule resolution";

/// `AlwaysAllow`'s rules (upstream `alwaysAllowAuthorizer.RulesFor`): everything.
pub(crate) fn allow_everything() -> Rules {
    let star = || vec!["*".to_owned()];
    Rules {
        resource_rules: vec![ResourceRule {
            verbs: star(),
            api_groups: star(),
            resources: star(),
            resource_names: Vec::new(),
        }],
        non_resource_rules: vec![NonResourceRule {
            verbs: star(),
            non_resource_urls: star(),
        }],
        incomplete: false,
        errors: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_aggregate_as_upstream() {
        let mut r = Rules::default();
        assert_eq!(r.evaluation_error(), None);
        r.merge(Rules::unsupported("a"));
        assert_eq!(r.evaluation_error().as_deref(), Some("a"));
        r.merge(Rules::unsupported("a"));
        assert_eq!(r.evaluation_error().as_deref(), Some("a"));
        r.merge(Rules::unsupported("b"));
        assert_eq!(r.evaluation_error().as_deref(), Some("[a, b]"));
        assert!(r.incomplete);
        let mut all = allow_everything();
        all.merge(Rules::default());
        assert!(!all.incomplete);
        assert_eq!(
            serde_json::to_string(&all.resource_rules).unwrap(),
            r#"[{"verbs":["*"],"apiGroups":["*"],"resources":["*"]}]"#
        );
    }
}
