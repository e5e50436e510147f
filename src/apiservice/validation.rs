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

/// What kind of problem a [`FieldError`] reports (apimachinery `field.ErrorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FieldErrorKind {
    /// A required value is missing (`Required value`).
    Required,
    /// The value is malformed or out of range (`Invalid value`).
    Invalid,
    /// The value is not one of an enumerated set (`Unsupported value`).
    NotSupported,
    /// The field may not be set on this object (`Forbidden`).
    Forbidden,
    /// The value is too long; the value itself is not echoed (`Too long`).
    TooLong,
}

impl FieldErrorKind {
    /// The human text upstream prints, e.g. `Invalid value`.
    pub fn reason(self) -> &'static str {
        match self {
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Invalid => "Invalid value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::TooLong => "Too long",
        }
    }

    /// The machine value for a `Status` cause's `reason`, e.g. `FieldValueInvalid`
    /// (apimachinery `metav1.CauseType`).
    pub fn cause_type(self) -> &'static str {
        match self {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::TooLong => "FieldValueTooLong",
        }
    }

    /// Kinds whose message echoes the bad value (upstream `ErrorBody`).
    fn shows_value(self) -> bool {
        matches!(self, FieldErrorKind::Invalid | FieldErrorKind::NotSupported)
    }
}

/// One field-level problem, e.g. `spec.groupPriorityMinimum: Invalid value: 0: must be
/// positive and less than 20000`.
///
/// Displays as `<field>: <body>` exactly like apimachinery `field.Error.Error()`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {}", self.body())]
#[non_exhaustive]
pub struct FieldError {
    /// JSON path of the field, e.g. `spec.service.port` or `status.conditions[0].status`.
    pub field: String,
    /// What is wrong.
    pub kind: FieldErrorKind,
    /// The bad value as upstream prints it: strings Go-quoted (`"v1.foo"`), numbers and
    /// booleans bare (`0`, `true`). `None` for kinds that never echo the value.
    pub value: Option<String>,
    /// Explanation; may be empty (then nothing follows the reason).
    pub detail: String,
}

impl FieldError {
    fn new(
        field: impl Into<String>,
        kind: FieldErrorKind,
        value: Option<String>,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            field: field.into(),
            kind,
            value,
            detail: detail.into(),
        }
    }

    fn required(field: &str, detail: &str) -> Self {
        Self::new(field, FieldErrorKind::Required, None, detail)
    }

    fn forbidden(field: &str, detail: &str) -> Self {
        Self::new(field, FieldErrorKind::Forbidden, None, detail)
    }

    fn invalid_str(field: &str, value: &str, detail: impl Into<String>) -> Self {
        Self::new(
            field,
            FieldErrorKind::Invalid,
            Some(crate::gocompat::quote(value)),
            detail,
        )
    }

    fn invalid_int(field: &str, value: i32, detail: &str) -> Self {
        Self::new(
            field,
            FieldErrorKind::Invalid,
            Some(value.to_string()),
            detail,
        )
    }

    fn invalid_bool(field: &str, value: bool, detail: &str) -> Self {
        Self::new(
            field,
            FieldErrorKind::Invalid,
            Some(value.to_string()),
            detail,
        )
    }

    /// The message without the field name (upstream `ErrorBody`), e.g.
    /// `Invalid value: 0: must be positive and less than 20000`. This is what a `Status`
    /// cause carries as `message`.
    pub fn body(&self) -> String {
        let mut s = String::from(self.kind.reason());
        if let (true, Some(value)) = (self.kind.shows_value(), &self.value) {
            s.push_str(": ");
            s.push_str(value);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

/// An APIService failed validation; holds every field problem found.
///
/// Displays as the apiserver's 422 `Status` message (apimachinery `errors.NewInvalid`):
/// `APIService.apiregistration.k8s.io "<name>" is invalid: <error>` for one distinct
/// problem, `... is invalid: [<error1>, <error2>]` for several. Repeated identical messages
/// are shown once, as upstream's `ToAggregate` does; [`ValidationError::errors`] keeps them all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
#[non_exhaustive]
pub struct ValidationError {
    /// `metadata.name` of the rejected object (may be empty).
    pub name: String,
    /// Every problem, in upstream's check order; never empty when returned by [`validate`].
    pub errors: Vec<FieldError>,
}

impl ValidationError {
    /// The `Status.message` text; the same string as `Display`.
    pub fn message(&self) -> String {
        let mut seen: Vec<String> = Vec::with_capacity(self.errors.len());
        for err in &self.errors {
            let text = err.to_string();
            if !seen.contains(&text) {
                seen.push(text);
            }
        }
        let mut out = format!(
            "{KIND}.{API_GROUP} {} is invalid",
            crate::gocompat::quote(&self.name)
        );
        match seen.as_slice() {
            [] => {}
            [only] => {
                out.push_str(": ");
                out.push_str(only);
            }
            many => {
                out.push_str(": [");
                out.push_str(&many.join(", "));
                out.push(']');
            }
        }
        out
    }
}

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
mod tests {
    use super::*;
    use crate::apiservice::types::{ApiServiceCondition, ServiceReference};

    const PREFIX: &str = "APIService.apiregistration.k8s.io";

    /// A valid remote APIService for `<version>.<group>`.
    fn remote(version: &str, group: &str) -> ApiService {
        let mut svc = ApiService::default();
        svc.metadata.name = format!("{version}.{group}");
        svc.spec.group = group.to_owned();
        svc.spec.version = version.to_owned();
        svc.spec.group_priority_minimum = 100;
        svc.spec.version_priority = 100;
        svc.spec.service = Some(ServiceReference {
            namespace: "ns".to_owned(),
            name: "api".to_owned(),
            port: None,
        });
        svc
    }

    fn local(version: &str, group: &str) -> ApiService {
        let mut svc = remote(version, group);
        svc.spec.service = None;
        svc
    }

    /// Asserts the single error's text and the full aggregate message.
    fn assert_one(svc: &ApiService, field_error: &str) {
        let err = validate(svc).expect_err("expected a validation error");
        let texts: Vec<String> = err.errors.iter().map(ToString::to_string).collect();
        assert_eq!(texts, vec![field_error.to_owned()]);
        assert_eq!(
            err.to_string(),
            format!(
                "{PREFIX} {} is invalid: {field_error}",
                crate::gocompat::quote(&svc.metadata.name)
            )
        );
    }

    fn texts(svc: &ApiService) -> Vec<String> {
        validate(svc)
            .expect_err("expected a validation error")
            .errors
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    const DNS1123_DETAIL: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const DNS1035_DETAIL: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
    const QNAME_DETAIL: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const LABEL_VALUE_DETAIL: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

    #[test]
    fn metrics_server_apiservice_is_valid() {
        let mut svc = ApiService::default();
        svc.metadata.name = "v1beta1.metrics.k8s.io".to_owned();
        svc.metadata
            .labels
            .insert("k8s-app".to_owned(), "metrics-server".to_owned());
        svc.spec.group = "metrics.k8s.io".to_owned();
        svc.spec.version = "v1beta1".to_owned();
        svc.spec.insecure_skip_tls_verify = true;
        svc.spec.group_priority_minimum = 100;
        svc.spec.version_priority = 100;
        svc.spec.service = Some(ServiceReference {
            namespace: "kube-system".to_owned(),
            name: "metrics-server".to_owned(),
            port: None,
        });
        assert_eq!(validate(&svc), Ok(()));
    }

    #[test]
    fn local_apiservice_is_valid() {
        let mut svc = local("v1", "apps");
        svc.set_condition(
            "Available",
            crate::apiservice::types::ConditionStatus::True,
            "Local",
            "Local APIServices are always available",
            "2024-01-01T00:00:00Z",
        );
        assert_eq!(validate(&svc), Ok(()));
    }

    #[test]
    fn legacy_core_apiservice_is_valid() {
        assert_eq!(validate(&local("v1", "")), Ok(()));
    }

    #[test]
    fn bounds_are_inclusive() {
        let mut svc = remote("v1", "foo");
        svc.spec.group_priority_minimum = 20000;
        svc.spec.version_priority = 1000;
        svc.spec.service.as_mut().expect("remote").port = Some(65535);
        assert_eq!(validate(&svc), Ok(()));
        svc.spec.group_priority_minimum = 1;
        svc.spec.version_priority = 1;
        svc.spec.service.as_mut().expect("remote").port = Some(1);
        assert_eq!(validate(&svc), Ok(()));
    }

    #[test]
    fn name_may_not_be_dot_or_dotdot() {
        for name in [".", ".."] {
            let mut svc = remote("v1", "foo");
            svc.metadata.name = name.to_owned();
            assert_one(
                &svc,
                &format!("metadata.name: Invalid value: \"{name}\": may not be '{name}'"),
            );
        }
    }

    #[test]
    fn name_may_not_contain_slash_or_percent_and_skips_equality_check() {
        let mut svc = remote("v1", "foo");
        svc.metadata.name = "v1/a%b".to_owned();
        let err = validate(&svc).expect_err("invalid");
        assert_eq!(
            err.to_string(),
            "APIService.apiregistration.k8s.io \"v1/a%b\" is invalid: [\
             metadata.name: Invalid value: \"v1/a%b\": may not contain '/', \
             metadata.name: Invalid value: \"v1/a%b\": may not contain '%']"
        );
    }

    #[test]
    fn name_must_be_version_dot_group() {
        let mut svc = remote("v1", "foo");
        svc.metadata.name = "v1.bar".to_owned();
        assert_one(
            &svc,
            "metadata.name: Invalid value: \"v1.bar\": must be `spec.version+\".\"+spec.group`: \"v1.foo\"",
        );
    }

    #[test]
    fn name_is_required() {
        let mut svc = remote("v1", "foo");
        svc.metadata.name.clear();
        assert_one(
            &svc,
            "metadata.name: Required value: name or generateName is required",
        );
        assert!(
            validate(&svc)
                .expect_err("invalid")
                .to_string()
                .starts_with("APIService.apiregistration.k8s.io \"\" is invalid: ")
        );
    }

    #[test]
    fn name_is_not_checked_as_dns_subdomain() {
        // Upstream's custom name function replaces the usual DNS-subdomain check, so only
        // equality with version.group constrains it; an invalid group is reported on spec.group.
        let svc = remote("v1", "Foo_Bar");
        assert_eq!(
            texts(&svc),
            vec![format!(
                "spec.group: Invalid value: \"Foo_Bar\": {DNS1123_DETAIL}"
            )]
        );
    }

    #[test]
    fn namespace_is_forbidden() {
        let mut svc = remote("v1", "foo");
        svc.metadata.namespace = "default".to_owned();
        assert_one(
            &svc,
            "metadata.namespace: Forbidden: not allowed on this type",
        );
    }

    #[test]
    fn label_keys_and_values_are_checked() {
        let mut svc = remote("v1", "foo");
        svc.metadata
            .labels
            .insert("-bad".to_owned(), "ok".to_owned());
        assert_one(
            &svc,
            &format!("metadata.labels: Invalid value: \"-bad\": {QNAME_DETAIL}"),
        );

        let mut svc = remote("v1", "foo");
        svc.metadata
            .labels
            .insert("ok".to_owned(), "bad value".to_owned());
        assert_one(
            &svc,
            &format!("metadata.labels: Invalid value: \"bad value\": {LABEL_VALUE_DETAIL}"),
        );

        let mut svc = remote("v1", "foo");
        svc.metadata
            .labels
            .insert("Example.com/x".to_owned(), "x".repeat(64));
        assert_eq!(
            texts(&svc),
            vec![
                format!(
                    "metadata.labels: Invalid value: \"Example.com/x\": prefix part {DNS1123_DETAIL}"
                ),
                format!(
                    "metadata.labels: Invalid value: \"{}\": must be no more than 63 characters",
                    "x".repeat(64)
                ),
            ]
        );

        let mut svc = remote("v1", "foo");
        svc.metadata
            .labels
            .insert("a/b/c".to_owned(), String::new());
        svc.metadata.labels.insert("/x".to_owned(), String::new());
        assert_eq!(
            texts(&svc),
            vec![
                "metadata.labels: Invalid value: \"/x\": prefix part must be non-empty".to_owned(),
                "metadata.labels: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_owned(),
            ]
        );
    }

    #[test]
    fn annotation_keys_are_case_insensitive_and_size_is_limited() {
        let mut svc = remote("v1", "foo");
        svc.metadata
            .annotations
            .insert("Example.COM/Owner".to_owned(), "x".to_owned());
        assert_eq!(validate(&svc), Ok(()));

        svc.metadata
            .annotations
            .insert("bad key".to_owned(), "x".to_owned());
        assert_one(
            &svc,
            "metadata.annotations: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        );

        let mut svc = remote("v1", "foo");
        svc.metadata
            .annotations
            .insert("big".to_owned(), "x".repeat(256 * 1024));
        assert_one(
            &svc,
            "metadata.annotations: Too long: may not be more than 262144 bytes",
        );
    }

    #[test]
    fn empty_group_only_for_v1() {
        let svc = remote("v2", "");
        assert_one(
            &svc,
            "spec.group: Required value: only v1 may have an empty group and it better be legacy kube",
        );
    }

    #[test]
    fn group_must_be_dns1123_subdomain() {
        let svc = remote("v1", "Foo.com");
        assert_one(
            &svc,
            &format!("spec.group: Invalid value: \"Foo.com\": {DNS1123_DETAIL}"),
        );
        let svc = remote("v1", "foo..com");
        assert_one(
            &svc,
            &format!("spec.group: Invalid value: \"foo..com\": {DNS1123_DETAIL}"),
        );
        let long = "a".repeat(254);
        let svc = remote("v1", &long);
        assert_one(
            &svc,
            &format!("spec.group: Invalid value: \"{long}\": must be no more than 253 characters"),
        );
    }

    #[test]
    fn version_must_be_dns1035_label() {
        for version in ["1v", "V1", "v1-", "v1.1", ""] {
            let svc = remote(version, "foo");
            assert_one(
                &svc,
                &format!("spec.version: Invalid value: \"{version}\": {DNS1035_DETAIL}"),
            );
        }
        let long = format!("v{}", "1".repeat(63));
        let svc = remote(&long, "foo");
        assert_one(
            &svc,
            &format!("spec.version: Invalid value: \"{long}\": must be no more than 63 characters"),
        );
    }

    #[test]
    fn group_priority_minimum_range() {
        for value in [0, -1, 20001] {
            let mut svc = remote("v1", "foo");
            svc.spec.group_priority_minimum = value;
            assert_one(
                &svc,
                &format!(
                    "spec.groupPriorityMinimum: Invalid value: {value}: must be positive and less than 20000"
                ),
            );
        }
    }

    #[test]
    fn version_priority_range() {
        for value in [0, -5, 1001] {
            let mut svc = remote("v1", "foo");
            svc.spec.version_priority = value;
            assert_one(
                &svc,
                &format!(
                    "spec.versionPriority: Invalid value: {value}: must be positive and less than 1000"
                ),
            );
        }
    }

    #[test]
    fn local_may_not_have_ca_bundle() {
        let mut svc = local("v1", "foo");
        svc.spec.ca_bundle = b"abc".to_vec();
        assert_one(
            &svc,
            "spec.caBundle: Invalid value: \"3 bytes\": local APIServices may not have a caBundle",
        );
    }

    #[test]
    fn local_may_not_skip_tls_verify() {
        let mut svc = local("v1", "foo");
        svc.spec.insecure_skip_tls_verify = true;
        assert_one(
            &svc,
            "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify",
        );
    }

    #[test]
    fn local_with_both_reports_only_local_rules() {
        let mut svc = local("v1", "foo");
        svc.spec.insecure_skip_tls_verify = true;
        svc.spec.ca_bundle = vec![0; 10];
        assert_eq!(
            texts(&svc),
            vec![
                "spec.caBundle: Invalid value: \"10 bytes\": local APIServices may not have a caBundle",
                "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify",
            ]
        );
    }

    #[test]
    fn service_namespace_and_name_required() {
        let mut svc = remote("v1", "foo");
        svc.spec.service.as_mut().expect("remote").namespace.clear();
        assert_one(&svc, "spec.service.namespace: Required value");
        let mut svc = remote("v1", "foo");
        svc.spec.service.as_mut().expect("remote").name.clear();
        assert_one(&svc, "spec.service.name: Required value");
    }

    #[test]
    fn service_port_range_with_default() {
        for port in [0, -1, 65536] {
            let mut svc = remote("v1", "foo");
            svc.spec.service.as_mut().expect("remote").port = Some(port);
            assert_one(
                &svc,
                &format!(
                    "spec.service.port: Invalid value: {port}: port is not valid: must be between 1 and 65535, inclusive"
                ),
            );
        }
        // Absent port is defaulted to 443, which is valid.
        assert_eq!(validate(&remote("v1", "foo")), Ok(()));
    }

    #[test]
    fn insecure_with_ca_bundle_is_invalid() {
        let mut svc = remote("v1", "foo");
        svc.spec.insecure_skip_tls_verify = true;
        svc.spec.ca_bundle = b"pem".to_vec();
        assert_one(
            &svc,
            "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
        );
        svc.spec.insecure_skip_tls_verify = false;
        assert_eq!(validate(&svc), Ok(()));
    }

    #[test]
    fn condition_status_must_be_known() {
        let mut svc = remote("v1", "foo");
        for status in ["True", "Maybe"] {
            svc.status.conditions.push(ApiServiceCondition {
                type_: "Available".to_owned(),
                status: status.to_owned(),
                ..Default::default()
            });
        }
        assert_one(
            &svc,
            "status.conditions[1].status: Unsupported value: \"Maybe\": supported values: \"True\", \"False\", \"Unknown\"",
        );
    }

    #[test]
    fn collects_every_error_in_upstream_order() {
        let mut svc = ApiService::default();
        svc.metadata.name = "v1.bar".to_owned();
        svc.metadata.namespace = "ns".to_owned();
        svc.spec.group = "foo".to_owned();
        svc.spec.version = "v1".to_owned();
        svc.spec.service = Some(ServiceReference {
            port: Some(0),
            ..Default::default()
        });
        let err = validate(&svc).expect_err("invalid");
        assert_eq!(err.name, "v1.bar");
        let kinds: Vec<FieldErrorKind> = err.errors.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            vec![
                FieldErrorKind::Invalid,
                FieldErrorKind::Forbidden,
                FieldErrorKind::Invalid,
                FieldErrorKind::Invalid,
                FieldErrorKind::Required,
                FieldErrorKind::Required,
                FieldErrorKind::Invalid,
            ]
        );
        assert_eq!(
            err.to_string(),
            "APIService.apiregistration.k8s.io \"v1.bar\" is invalid: [\
             metadata.name: Invalid value: \"v1.bar\": must be `spec.version+\".\"+spec.group`: \"v1.foo\", \
             metadata.namespace: Forbidden: not allowed on this type, \
             spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000, \
             spec.versionPriority: Invalid value: 0: must be positive and less than 1000, \
             spec.service.namespace: Required value, \
             spec.service.name: Required value, \
             spec.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive]"
        );
    }

    #[test]
    fn repeated_messages_are_shown_once() {
        let mut svc = remote("v1", "foo");
        svc.metadata.labels.insert("a".to_owned(), "-x".to_owned());
        svc.metadata.labels.insert("b".to_owned(), "-x".to_owned());
        let err = validate(&svc).expect_err("invalid");
        assert_eq!(err.errors.len(), 2);
        assert_eq!(
            err.to_string(),
            format!(
                "{PREFIX} \"v1.foo\" is invalid: metadata.labels: Invalid value: \"-x\": {LABEL_VALUE_DETAIL}"
            )
        );
    }

    #[test]
    fn cause_fields_match_upstream() {
        let mut svc = remote("v1", "foo");
        svc.spec.group_priority_minimum = 0;
        let err = validate(&svc).expect_err("invalid");
        let cause = &err.errors[0];
        assert_eq!(cause.field, "spec.groupPriorityMinimum");
        assert_eq!(cause.kind.cause_type(), "FieldValueInvalid");
        assert_eq!(cause.value.as_deref(), Some("0"));
        assert_eq!(
            cause.body(),
            "Invalid value: 0: must be positive and less than 20000"
        );
    }
}
