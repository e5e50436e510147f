//! A review's spec as the authorizer's [`Attributes`] (kubernetes
//! `pkg/registry/authorization/util/helpers.go`), and the status it gets.

use super::AccessReview;
use crate::authn::UserInfo;
use crate::authz::request_info::selector::{
    LabelOperator, parse_field_selector, parse_label_selector, valid_label_requirement,
};
use crate::authz::{
    Attributes, Authorization, AuthorizationError, Decision, SelectorAttributes,
    SelectorRequirement, SubjectAccessReviewStatus,
};

/// How much of a selector could be used: all of it, part of it (some requirements did
/// not parse), or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parsed {
    Whole,
    Partly,
    Not,
}

/// The attributes to check for `review` by `user`, and the notes upstream adds to
/// `evaluationError` for selectors it had to ignore.
pub(super) fn attributes(
    user: &UserInfo,
    review: &AccessReview,
) -> (Attributes, Vec<&'static str>) {
    let mut notes = Vec::new();
    let attrs = match (&review.resource_attributes, &review.non_resource_attributes) {
        (Some(r), _) => {
            let (field_selector, field) = r
                .field_selector
                .as_ref()
                .map_or((Vec::new(), Parsed::Whole), fields);
            let (label_selector, label) = r
                .label_selector
                .as_ref()
                .map_or((Vec::new(), Parsed::Whole), labels);
            for (parsed, which) in [(field, "fieldSelector"), (label, "labelSelector")] {
                notes.push(match (parsed, which) {
                    (Parsed::Whole, _) => continue,
                    (Parsed::Partly, "fieldSelector") => {
                        "spec.resourceAttributes.fieldSelector partially ignored due to parse error"
                    }
                    (Parsed::Not, "fieldSelector") => {
                        "spec.resourceAttributes.fieldSelector ignored due to parse error"
                    }
                    (Parsed::Partly, _) => {
                        "spec.resourceAttributes.labelSelector partially ignored due to parse error"
                    }
                    (Parsed::Not, _) => {
                        "spec.resourceAttributes.labelSelector ignored due to parse error"
                    }
                });
            }
            Attributes {
                user: user.clone(),
                verb: r.verb.clone(),
                namespace: r.namespace.clone(),
                api_group: r.group.clone(),
                // An empty version matches every version.
                api_version: if r.version.is_empty() {
                    "*".to_owned()
                } else {
                    r.version.clone()
                },
                resource: r.resource.clone(),
                subresource: r.subresource.clone(),
                name: r.name.clone(),
                is_resource_request: true,
                field_selector,
                label_selector,
                ..Attributes::default()
            }
        }
        (None, Some(n)) => Attributes {
            user: user.clone(),
            verb: n.verb.clone(),
            path: n.path.clone(),
            ..Attributes::default()
        },
        (None, None) => Attributes {
            user: user.clone(),
            ..Attributes::default()
        },
    };
    (attrs, notes)
}

/// The requirements that parsed and how much that is of what was asked.
fn outcome<T>(reqs: Vec<T>, errors: bool) -> (Vec<T>, Parsed) {
    let parsed = match (errors, reqs.is_empty()) {
        (false, _) => Parsed::Whole,
        (true, false) => Parsed::Partly,
        (true, true) => Parsed::Not,
    };
    (reqs, parsed)
}

/// Requirements win over the raw text when both are given, as upstream's order of
/// assignments makes them.
fn fields(s: &SelectorAttributes) -> (Vec<SelectorRequirement>, Parsed) {
    if !s.requirements.is_empty() {
        let mut errors = false;
        let mut out = Vec::new();
        for r in &s.requirements {
            match (r.operator.as_str(), r.values.len()) {
                ("In" | "NotIn", 1) => out.push(r.clone()),
                _ => errors = true,
            }
        }
        return outcome(out, errors);
    }
    if s.raw_selector.is_empty() {
        return (Vec::new(), Parsed::Whole);
    }
    match parse_field_selector(&s.raw_selector) {
        Ok(reqs) => (
            reqs.into_iter()
                .map(|r| SelectorRequirement {
                    key: r.field,
                    operator: if r.equal { "In" } else { "NotIn" }.to_owned(),
                    values: vec![r.value],
                })
                .collect(),
            Parsed::Whole,
        ),
        Err(_) => (Vec::new(), Parsed::Not),
    }
}

/// A label selector's requirements, as [`fields`] does for field selectors.
fn labels(s: &SelectorAttributes) -> (Vec<SelectorRequirement>, Parsed) {
    if !s.requirements.is_empty() {
        let mut errors = false;
        let mut out = Vec::new();
        for r in &s.requirements {
            let op = match r.operator.as_str() {
                "In" => LabelOperator::In,
                "NotIn" => LabelOperator::NotIn,
                "Exists" => LabelOperator::Exists,
                "DoesNotExist" => LabelOperator::DoesNotExist,
                _ => {
                    errors = true;
                    continue;
                }
            };
            if valid_label_requirement(&r.key, op, &r.values) {
                out.push(r.clone());
            } else {
                errors = true;
            }
        }
        return outcome(out, errors);
    }
    if s.raw_selector.is_empty() {
        return (Vec::new(), Parsed::Whole);
    }
    match parse_label_selector(&s.raw_selector) {
        Ok(_) => {
            let (_, reqs) = crate::authz::selector_requirements("", &s.raw_selector);
            (reqs, Parsed::Whole)
        }
        Err(_) => (Vec::new(), Parsed::Not),
    }
}

/// The review's status for the authorizer's verdict (upstream's
/// `SubjectAccessReviewStatus` from `Authorize` and `BuildEvaluationError`).
pub(super) fn status(
    verdict: Result<Authorization, AuthorizationError>,
    notes: &[&str],
) -> SubjectAccessReviewStatus {
    let mut status = SubjectAccessReviewStatus::default();
    let mut errors: Vec<String> = Vec::new();
    match verdict {
        Ok(a) => {
            status.allowed = a.decision == Decision::Allow;
            status.denied = a.decision == Decision::Deny;
            status.reason = a.reason;
        }
        // Not allowed; the error is reported, as upstream's NoOpinion plus error.
        Err(e) => errors.push(e.to_string()),
    }
    errors.extend(notes.iter().map(|n| (*n).to_owned()));
    status.evaluation_error = errors.join("; ");
    status
}
