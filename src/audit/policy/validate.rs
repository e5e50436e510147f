//! A policy's rules checked as upstream's `ValidatePolicy` checks them
//! (k8s.io/apiserver `pkg/apis/audit/validation/validation.go`), every error collected with
//! its field path.

use super::{GroupResources, Level, PolicyRule, RawRule, Stage};

/// `names` as stages; an invalid one is an error at `path[i]` (upstream
/// `validateOmitStages`).
pub(super) fn stages(names: &[String], path: &str, errors: &mut Vec<String>) -> Vec<Stage> {
    let mut out = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        match Stage::parse(name) {
            Some(s) => out.push(s),
            None => errors.push(format!(
                "{path}[{i}]: Invalid value: {}: allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic",
                crate::gocompat::quote(name)
            )),
        }
    }
    out
}

/// Go's `%#v` of a `[]string`, as a `field.Invalid` error shows a list.
pub(super) fn go_string_slice(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| crate::gocompat::quote(v)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// Upstream `validatePolicyRule`: the rule, with every error appended to `errors`.
pub(super) fn validate_rule(raw: RawRule, path: &str, errors: &mut Vec<String>) -> PolicyRule {
    let level = match Level::parse(&raw.level) {
        Some(l) => l,
        None if raw.level.is_empty() => {
            errors.push(format!("{path}.level: Required value"));
            Level::None
        }
        None => {
            errors.push(format!(
                "{path}.level: Unsupported value: {}: supported values: \"None\", \"Metadata\", \"Request\", \"RequestResponse\"",
                crate::gocompat::quote(&raw.level)
            ));
            Level::None
        }
    };
    for (i, url) in raw.non_resource_urls.iter().enumerate() {
        if url == "*" {
            continue;
        }
        let at = format!(
            "{path}.nonResourceURLs[{i}]: Invalid value: {}",
            crate::gocompat::quote(url)
        );
        if !url.starts_with('/') {
            errors.push(format!(
                "{at}: non-resource URL rules must begin with a '/' character"
            ));
        }
        if url.len() > 1 && url[..url.len() - 1].contains('*') {
            errors.push(format!(
                "{at}: non-resource URL wildcards '*' must be the final character of the rule"
            ));
        }
    }
    for gr in &raw.resources {
        if !gr.group.is_empty() {
            let msgs = crate::gocompat::names::dns1123_subdomain_problems(&gr.group);
            if !msgs.is_empty() {
                errors.push(format!(
                    "{path}.resources.group: Invalid value: {}: {}",
                    crate::gocompat::quote(&gr.group),
                    msgs.join(",")
                ));
            }
        }
        if !gr.resource_names.is_empty() && gr.resources.is_empty() {
            errors.push(format!(
                "{path}.resources.resourceNames: Invalid value: {}: using resourceNames requires at least one resource",
                go_string_slice(&gr.resource_names)
            ));
        }
    }
    let omit_stages = stages(&raw.omit_stages, &format!("{path}.omitStages"), errors);
    if !raw.non_resource_urls.is_empty()
        && (!raw.resources.is_empty() || !raw.namespaces.is_empty())
    {
        errors.push(format!(
            "{path}.nonResourceURLs: Invalid value: {}: rules cannot apply to both regular resources and non-resource URLs",
            go_string_slice(&raw.non_resource_urls)
        ));
    }
    PolicyRule {
        level,
        users: raw.users,
        user_groups: raw.user_groups,
        verbs: raw.verbs,
        resources: raw
            .resources
            .into_iter()
            .map(|gr| GroupResources {
                group: gr.group,
                resources: gr.resources,
                resource_names: gr.resource_names,
            })
            .collect(),
        namespaces: raw.namespaces,
        non_resource_urls: raw.non_resource_urls,
        omit_stages,
        omit_managed_fields: raw.omit_managed_fields,
    }
}
