//! The `audit.k8s.io/v1` `Policy`: which requests are audited, at which level and in
//! which stages, as kube-apiserver reads `--audit-policy-file` and matches its rules
//! (k8s.io/apiserver `pkg/audit/policy/reader.go`, `checker.go`, and
//! `pkg/apis/audit/validation/validation.go` for the messages).

mod validate;

use std::path::Path;

use serde::Deserialize;

use crate::authn::UserInfo;
use crate::authz::RequestInfo;

use validate::{stages, validate_rule};

/// How much of a request an audit event records (`audit.k8s.io/v1` `Level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Not audited.
    None,
    /// The request's metadata (user, verb, resource, ...), no bodies.
    Metadata,
    /// Metadata and the request body.
    Request,
    /// Metadata and both bodies.
    RequestResponse,
}

impl Level {
    /// The name in the API (`RequestResponse`).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }

    fn parse(s: &str) -> Option<Level> {
        Some(match s {
            "None" => Level::None,
            "Metadata" => Level::Metadata,
            "Request" => Level::Request,
            "RequestResponse" => Level::RequestResponse,
            _ => return None,
        })
    }
}

/// When in a request's life an audit event is written (`audit.k8s.io/v1` `Stage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// As soon as the request is received, before it is handled.
    RequestReceived,
    /// When the response headers are sent, before the body (long-running requests only).
    ResponseStarted,
    /// When the response is complete.
    ResponseComplete,
    /// When the handler panicked.
    Panic,
}

impl Stage {
    /// The name in the API (`ResponseComplete`).
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }

    fn parse(s: &str) -> Option<Stage> {
        Some(match s {
            "RequestReceived" => Stage::RequestReceived,
            "ResponseStarted" => Stage::ResponseStarted,
            "ResponseComplete" => Stage::ResponseComplete,
            "Panic" => Stage::Panic,
            _ => return None,
        })
    }
}

/// A group's resources a rule names (`audit.k8s.io/v1` `GroupResources`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupResources {
    /// The API group; empty for the core group.
    pub group: String,
    /// Resources (`pods`), subresources (`pods/log`), and the `*`, `*/log` and `pods/*`
    /// wildcards; empty for every resource of the group.
    pub resources: Vec<String>,
    /// Object names; empty for every name.
    pub resource_names: Vec<String>,
}

/// One rule of a [`Policy`] (`audit.k8s.io/v1` `PolicyRule`). Every field that is set
/// must match; empty lists match everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRule {
    /// The level of the requests it matches.
    pub level: Level,
    /// User names.
    pub users: Vec<String>,
    /// Groups, any of which the user must be in.
    pub user_groups: Vec<String>,
    /// Verbs (`get`, `list`, `watch`, ...).
    pub verbs: Vec<String>,
    /// Resources; a rule with resources or namespaces matches resource requests only.
    pub resources: Vec<GroupResources>,
    /// Namespaces; `""` is the cluster scope.
    pub namespaces: Vec<String>,
    /// Non-resource paths, exact or with a final `*` (`/healthz*`), or `*`.
    pub non_resource_urls: Vec<String>,
    /// Stages not written for the requests it matches (with the policy's own).
    pub omit_stages: Vec<Stage>,
    /// Overrides [`Policy::omit_managed_fields`] when set.
    pub omit_managed_fields: Option<bool>,
}

/// An audit policy (`audit.k8s.io/v1` `Policy`): rules tried in order, the first that
/// matches a request gives its level; a request no rule matches is not audited.
///
/// ```
/// use kube_aggregator::audit::{Level, Policy, Stage};
/// use kube_aggregator::authn::UserInfo;
/// use kube_aggregator::authz::RequestInfo;
///
/// let policy = Policy::from_bytes(br#"
/// apiVersion: audit.k8s.io/v1
/// kind: Policy
/// omitStages: [RequestReceived]
/// rules:
/// - level: None
///   nonResourceURLs: ["/healthz*", "/readyz"]
/// - level: RequestResponse
///   resources: [{group: metrics.k8s.io, resources: ["nodes"]}]
/// - level: Metadata
/// "#).unwrap();
/// let nodes = RequestInfo {
///     is_resource_request: true,
///     verb: "list".into(),
///     api_group: "metrics.k8s.io".into(),
///     resource: "nodes".into(),
///     ..RequestInfo::default()
/// };
/// let alice = UserInfo::new("alice", ["dev"]);
/// let config = policy.evaluate(Some(&alice), &nodes);
/// assert_eq!(config.level, Level::RequestResponse);
/// assert_eq!(config.omit_stages, [Stage::RequestReceived]);
///
/// let err = Policy::from_bytes(b"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n").unwrap_err();
/// assert_eq!(err.to_string(), r#"rules[0].level: Unsupported value: "Everything": supported values: "None", "Metadata", "Request", "RequestResponse""#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Stages never written, whatever the rule.
    pub omit_stages: Vec<Stage>,
    /// The rules, in order.
    pub rules: Vec<PolicyRule>,
    /// Leave `metadata.managedFields` out of the bodies recorded.
    pub omit_managed_fields: bool,
}

/// What a [`Policy`] says of one request (upstream's `RequestAuditConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestAuditConfig {
    /// The level; [`Level::None`] when no rule matched.
    pub level: Level,
    /// The stages not written: the policy's and the matching rule's, in stage order.
    pub omit_stages: Vec<Stage>,
    /// Whether `metadata.managedFields` is left out of recorded bodies.
    pub omit_managed_fields: bool,
}

/// A policy that was refused: the file, or the fields that are wrong, in upstream's
/// words (`rules[0].level: Unsupported value: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PolicyError(String);

/// The document as written; validated into [`Policy`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPolicy {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    omit_stages: Vec<String>,
    #[serde(default)]
    rules: Vec<RawRule>,
    #[serde(default)]
    omit_managed_fields: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRule {
    #[serde(default)]
    level: String,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    user_groups: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    resources: Vec<RawGroupResources>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
    #[serde(default)]
    omit_stages: Vec<String>,
    #[serde(default)]
    omit_managed_fields: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawGroupResources {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
}

impl Policy {
    /// Reads `--audit-policy-file`.
    ///
    /// # Errors
    ///
    /// A [`PolicyError`] naming the file: it cannot be read, or [`Policy::from_bytes`]
    /// refuses it.
    pub fn from_file(path: &Path) -> Result<Policy, PolicyError> {
        let bytes = std::fs::read(path).map_err(|e| {
            PolicyError(format!(
                "failed to read file path {:?}: {e}",
                path.display()
            ))
        })?;
        Policy::from_bytes(&bytes)
            .map_err(|e| PolicyError(format!("{e}: from file {}", path.display())))
    }

    /// Parses a policy (YAML or JSON) and validates it as upstream does.
    ///
    /// # Errors
    ///
    /// A [`PolicyError`]: not a document (`failed decoding: ...`), an `apiVersion` and
    /// `kind` other than `audit.k8s.io/v1` `Policy`, the validation errors of every field
    /// (one, or all of them in brackets, as an aggregated `field.ErrorList`), or no
    /// rules (`loaded illegal policy with 0 rules`).
    pub fn from_bytes(bytes: &[u8]) -> Result<Policy, PolicyError> {
        let raw: RawPolicy = crate::gocompat::yaml::from_slice(bytes)
            .map_err(|e| PolicyError(format!("failed decoding: {e}")))?;
        if raw.api_version != "audit.k8s.io/v1" || raw.kind != "Policy" {
            return Err(PolicyError(format!(
                "unknown group version field {}, Kind={} in policy",
                if raw.api_version.is_empty() {
                    "/"
                } else {
                    &raw.api_version
                },
                raw.kind
            )));
        }
        let mut errors = Vec::new();
        let omit_stages = stages(&raw.omit_stages, "omitStages", &mut errors);
        let mut rules = Vec::with_capacity(raw.rules.len());
        for (i, rule) in raw.rules.into_iter().enumerate() {
            rules.push(validate_rule(rule, &format!("rules[{i}]"), &mut errors));
        }
        match errors.len() {
            0 => {}
            1 => return Err(PolicyError(errors.remove(0))),
            _ => return Err(PolicyError(format!("[{}]", errors.join(", ")))),
        }
        if rules.is_empty() {
            return Err(PolicyError("loaded illegal policy with 0 rules".into()));
        }
        Ok(Policy {
            omit_stages,
            rules,
            omit_managed_fields: raw.omit_managed_fields,
        })
    }

    /// The level, stages and managed-fields choice for a request by `user` (`None` before
    /// authentication succeeded) described by `info`: the first rule that matches, or
    /// [`Level::None`] with the policy's stages. Mirrors upstream `EvaluatePolicyRule`.
    pub fn evaluate(&self, user: Option<&UserInfo>, info: &RequestInfo) -> RequestAuditConfig {
        for rule in &self.rules {
            if rule.matches(user, info) {
                return RequestAuditConfig {
                    level: rule.level,
                    omit_stages: union(&self.omit_stages, &rule.omit_stages),
                    omit_managed_fields: rule
                        .omit_managed_fields
                        .unwrap_or(self.omit_managed_fields),
                };
            }
        }
        RequestAuditConfig {
            level: Level::None,
            omit_stages: union(&self.omit_stages, &[]),
            omit_managed_fields: self.omit_managed_fields,
        }
    }
}

impl PolicyRule {
    /// Whether the rule applies to the request (upstream `ruleMatches`).
    fn matches(&self, user: Option<&UserInfo>, info: &RequestInfo) -> bool {
        if !self.users.is_empty() && !user.is_some_and(|u| self.users.contains(&u.name)) {
            return false;
        }
        if !self.user_groups.is_empty()
            && !user.is_some_and(|u| u.groups.iter().any(|g| self.user_groups.contains(g)))
        {
            return false;
        }
        if !self.verbs.is_empty() && !self.verbs.contains(&info.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(info);
        }
        if !self.non_resource_urls.is_empty() {
            return !info.is_resource_request
                && self
                    .non_resource_urls
                    .iter()
                    .any(|spec| path_matches(&info.path, spec));
        }
        true
    }

    /// Upstream `ruleMatchesResource`.
    fn matches_resource(&self, info: &RequestInfo) -> bool {
        if !info.is_resource_request {
            return false;
        }
        if !self.namespaces.is_empty() && !self.namespaces.contains(&info.namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let (resource, subresource) = (info.resource.as_str(), info.subresource.as_str());
        let combined = if subresource.is_empty() {
            resource.to_owned()
        } else {
            format!("{resource}/{subresource}")
        };
        self.resources
            .iter()
            .filter(|gr| gr.group == info.api_group)
            .any(|gr| {
                if gr.resources.is_empty() {
                    return true;
                }
                if !gr.resource_names.is_empty() && !gr.resource_names.contains(&info.name) {
                    return false;
                }
                gr.resources.iter().any(|res| {
                    res == &combined
                        || res == "*"
                        || (!subresource.is_empty() && res.strip_prefix("*/") == Some(subresource))
                        || res.strip_suffix("/*") == Some(resource)
                })
            })
    }
}

/// Upstream `pathMatches`: `*`, the path itself, or a prefix ending in `*`.
fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*"
        || spec == path
        || spec
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

/// The stages of both lists, each once, in stage order.
fn union(a: &[Stage], b: &[Stage]) -> Vec<Stage> {
    let mut all: Vec<Stage> = a.iter().chain(b).copied().collect();
    all.sort_unstable();
    all.dedup();
    all
}

#[cfg(test)]
mod tests;
