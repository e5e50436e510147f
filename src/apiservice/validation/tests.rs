//! The APIService validation rules against upstream's messages, one test per rule of
//! kube-aggregator's `validation.go` (bounds inclusive, the name rules before the
//! `<version>.<group>` check, local APIServices stopping after their two rules), and the
//! order and de-duplication of several errors in one `Invalid` answer.

use super::*;
use crate::apiservice::types::{ApiServiceCondition, ServiceReference};

const PREFIX: &str = "APIService.apiregistration.k8s.io";

/// A valid remote APIService for `<version>.<group>`.
fn remote(version: &str, group: &str) -> ApiService {
    ApiService::remote(group, version, "ns", "api")
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
