//! APIService validation with upstream's rules and error texts.
//!
//! Mirrors kube-aggregator `pkg/apis/apiregistration/validation/validation.go`
//! (`ValidateAPIService`, `ValidateAPIServiceStatus`), the ObjectMeta checks of apimachinery
//! `pkg/api/validation/objectmeta.go` for a cluster-scoped object, the format checks of
//! apimachinery `pkg/util/validation/validation.go` and `pkg/api/validation/path/name.go`,
//! and the error rendering of apimachinery `pkg/util/validation/field/errors.go` and
//! `pkg/api/errors/errors.go` (`NewInvalid`).

use super::types::{API_GROUP, ApiService, ObjectMeta};
use crate::gocompat::names;

/// Kind name used in the aggregate message (`APIService.apiregistration.k8s.io "<name>" ...`).
const KIND: &str = "APIService";
/// `spec.groupPriorityMinimum` upper bound, inclusive.
const MAX_GROUP_PRIORITY_MINIMUM: i32 = 20000;
/// `spec.versionPriority` upper bound, inclusive.
const MAX_VERSION_PRIORITY: i32 = 1000;
/// apimachinery `TotalAnnotationSizeLimitB`: keys plus values, in bytes.
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

mod error;

pub use error::{FieldError, FieldErrorKind, ValidationError};

/// Validates an APIService the way kube-aggregator does on create and update.
///
/// Checks, in upstream order, collecting every failure:
/// - `metadata.name`: required; not `.`/`..`, no `/` or `%`; then it must equal
///   `spec.version + "." + spec.group`. The name is deliberately *not* checked as a DNS
///   subdomain: upstream passes its own name function to ObjectMeta validation.
/// - `metadata.namespace` must be empty (cluster-scoped). Note that the apiserver's create
///   path clears a namespace on cluster-scoped objects before validating, so a host wanting
///   identical create semantics clears it first.
/// - `metadata.labels` (qualified-name keys, label values) and `metadata.annotations`
///   (qualified-name keys compared in lower case, at most 256 KiB of keys plus values).
///   Entries are checked in key order; upstream walks a Go map in random order.
/// - `spec.group` empty only for version `v1`; otherwise a DNS-1123 subdomain.
/// - `spec.version` a DNS-1035 label.
/// - `spec.groupPriorityMinimum` in 1..=20000 and `spec.versionPriority` in 1..=1000
///   (upstream's text says "less than" although the bound itself is accepted).
/// - Local (no `spec.service`): no `caBundle`, no `insecureSkipTLSVerify`.
/// - With `spec.service`: namespace and name required, port 1..=65535 after v1 defaulting
///   (absent means 443), and not `insecureSkipTLSVerify` together with a `caBundle`.
/// - `status.conditions[i].status` one of `True`, `False`, `Unknown`. Upstream runs this
///   only on `/status` updates (create wipes status); here it is part of one check.
///
/// # Errors
/// [`ValidationError`] listing every problem when any rule fails.
///
/// ```
/// use kube_aggregator::apiservice::{ApiService, validate};
///
/// let mut svc = ApiService::default();
/// svc.metadata.name = "v1beta1.metrics.k8s.io".into();
/// svc.spec.group = "metrics.k8s.io".into();
/// svc.spec.version = "v1beta1".into();
/// svc.spec.version_priority = 100;
/// let err = validate(&svc).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "APIService.apiregistration.k8s.io \"v1beta1.metrics.k8s.io\" is invalid: \
///      spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000"
/// );
/// ```
pub fn validate(svc: &ApiService) -> Result<(), ValidationError> {
    let mut errors = Vec::new();
    validate_metadata(svc, &mut errors);
    validate_spec(svc, &mut errors);
    validate_status(svc, &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ValidationError {
            name: svc.metadata.name.clone(),
            errors,
        })
    }
}

/// The `metadata` rules: the name (path-segment rules, then `<version>.<group>`), no
/// namespace, labels and annotations.
fn validate_metadata(svc: &ApiService, errors: &mut Vec<FieldError>) {
    let meta = &svc.metadata;
    if meta.name.is_empty() {
        errors.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        let required = format!("{}.{}", svc.spec.version, svc.spec.group);
        for msg in apiservice_name_problems(&meta.name, &required) {
            errors.push(FieldError::invalid_str("metadata.name", &meta.name, msg));
        }
    }
    if !meta.namespace.is_empty() {
        errors.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    validate_labels(meta, errors);
    validate_annotations(meta, errors);
}

/// The name function kube-aggregator hands to ObjectMeta validation: path-segment rules
/// first (and only those if they fail), then equality with `version.group`.
fn apiservice_name_problems(name: &str, required: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    let segment: Vec<String> = ["/", "%"]
        .iter()
        .filter(|bad| name.contains(**bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect();
    if !segment.is_empty() {
        return segment;
    }
    if name != required {
        return vec![format!(
            "must be `spec.version+\".\"+spec.group`: {}",
            crate::gocompat::quote(required)
        )];
    }
    Vec::new()
}

/// apimachinery `ValidateLabels`: each key a qualified name, each value a label value.
fn validate_labels(meta: &ObjectMeta, errors: &mut Vec<FieldError>) {
    for (key, value) in &meta.labels {
        for msg in names::qualified_name_problems(key) {
            errors.push(FieldError::invalid_str("metadata.labels", key, msg));
        }
        for msg in names::label_value_problems(value) {
            errors.push(FieldError::invalid_str("metadata.labels", value, msg));
        }
    }
}

/// apimachinery `ValidateAnnotations`: lower-cased keys as qualified names, and the
/// total size of keys and values within 256 KiB.
fn validate_annotations(meta: &ObjectMeta, errors: &mut Vec<FieldError>) {
    let mut total = 0usize;
    for (key, value) in &meta.annotations {
        // Annotation keys are qualified names compared case-insensitively.
        for msg in names::qualified_name_problems(&key.to_lowercase()) {
            errors.push(FieldError::invalid_str("metadata.annotations", key, msg));
        }
        total = total.saturating_add(key.len()).saturating_add(value.len());
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errors.push(FieldError::new(
            "metadata.annotations",
            FieldErrorKind::TooLong,
            None,
            format!("may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
        ));
    }
}

/// The `spec` rules of kube-aggregator's `ValidateAPIServiceSpec`: group, version,
/// priorities, then the local or remote service rules (a local APIService stops after
/// its two, as upstream returns early).
fn validate_spec(svc: &ApiService, errors: &mut Vec<FieldError>) {
    let spec = &svc.spec;
    if spec.group.is_empty() && spec.version != "v1" {
        errors.push(FieldError::required(
            "spec.group",
            "only v1 may have an empty group and it better be legacy kube",
        ));
    }
    if !spec.group.is_empty() {
        for msg in names::dns1123_subdomain_problems(&spec.group) {
            errors.push(FieldError::invalid_str("spec.group", &spec.group, msg));
        }
    }
    for msg in names::dns1035_label_problems(&spec.version) {
        errors.push(FieldError::invalid_str("spec.version", &spec.version, msg));
    }
    if !(1..=MAX_GROUP_PRIORITY_MINIMUM).contains(&spec.group_priority_minimum) {
        errors.push(FieldError::invalid_int(
            "spec.groupPriorityMinimum",
            spec.group_priority_minimum,
            "must be positive and less than 20000",
        ));
    }
    if !(1..=MAX_VERSION_PRIORITY).contains(&spec.version_priority) {
        errors.push(FieldError::invalid_int(
            "spec.versionPriority",
            spec.version_priority,
            "must be positive and less than 1000",
        ));
    }

    let Some(service) = &spec.service else {
        if !spec.ca_bundle.is_empty() {
            let size = format!("{} bytes", spec.ca_bundle.len());
            errors.push(FieldError::invalid_str(
                "spec.caBundle",
                &size,
                "local APIServices may not have a caBundle",
            ));
        }
        if spec.insecure_skip_tls_verify {
            errors.push(FieldError::invalid_bool(
                "spec.insecureSkipTLSVerify",
                true,
                "local APIServices may not have insecureSkipTLSVerify",
            ));
        }
        return;
    };
    if service.namespace.is_empty() {
        errors.push(FieldError::required("spec.service.namespace", ""));
    }
    if service.name.is_empty() {
        errors.push(FieldError::required("spec.service.name", ""));
    }
    let port = service.port_or_default();
    if !(1..=65535).contains(&port) {
        errors.push(FieldError::invalid_int(
            "spec.service.port",
            port,
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    if spec.insecure_skip_tls_verify && !spec.ca_bundle.is_empty() {
        errors.push(FieldError::invalid_bool(
            "spec.insecureSkipTLSVerify",
            true,
            "may not be true if caBundle is present",
        ));
    }
}

/// kube-aggregator's `ValidateAPIServiceStatus`: each condition's status is `True`,
/// `False` or `Unknown` (a `NotSupported` error listing them otherwise).
fn validate_status(svc: &ApiService, errors: &mut Vec<FieldError>) {
    for (i, cond) in svc.status.conditions.iter().enumerate() {
        if !matches!(cond.status.as_str(), "True" | "False" | "Unknown") {
            errors.push(FieldError::new(
                format!("status.conditions[{i}].status"),
                FieldErrorKind::NotSupported,
                Some(crate::gocompat::quote(&cond.status)),
                "supported values: \"True\", \"False\", \"Unknown\"",
            ));
        }
    }
}

#[cfg(test)]
mod tests;
