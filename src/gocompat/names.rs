//! apimachinery's name checks
//! (<https://github.com/kubernetes/apimachinery/blob/master/pkg/util/validation/validation.go>):
//! DNS-1123 labels and subdomains, DNS-1035 labels, qualified names and label values,
//! with upstream's messages, which reach users in `Invalid` Status causes.

use std::fmt::Write as _;

/// `DNS1123SubdomainMaxLength`: the whole name, dots included.
const DNS1123_SUBDOMAIN_MAX_LEN: usize = 253;
/// `DNS1035LabelMaxLength`.
const DNS1035_LABEL_MAX_LEN: usize = 63;
/// `qualifiedNameMaxLength`: the name part after an optional `prefix/`.
const QUALIFIED_NAME_MAX_LEN: usize = 63;
/// `LabelValueMaxLength`.
const LABEL_VALUE_MAX_LEN: usize = 63;

// The messages and the regular expressions they quote, upstream's text for text: they
// reach users inside `Invalid` causes, and tools match on them.

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";

/// apimachinery `RegexError`: the doubled space before ` or ` is upstream's.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        let _ = write!(out, "'{example}', ");
    }
    let _ = write!(out, "regex used for validation is '{fmt}')");
    out
}

/// apimachinery `MaxLenError`.
fn max_len_error(len: usize) -> String {
    format!("must be no more than {len} characters")
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, with no length limit.
fn has_dns1123_label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => {
            edge(first) && edge(last) && b.iter().all(|&c| edge(c) || c == b'-')
        }
        _ => false,
    }
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, the qualified-name part (also a non-empty label value).
pub(crate) fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// apimachinery `IsDNS1123Subdomain`.
pub(crate) fn dns1123_subdomain_problems(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX_LEN {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LEN));
    }
    if !s.split('.').all(has_dns1123_label_shape) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// apimachinery `IsDNS1035Label`.
pub(crate) fn dns1035_label_problems(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1035_LABEL_MAX_LEN {
        errs.push(max_len_error(DNS1035_LABEL_MAX_LEN));
    }
    let starts_alpha = s.as_bytes().first().is_some_and(u8::is_ascii_lowercase);
    if !(starts_alpha && has_dns1123_label_shape(s)) {
        errs.push(regex_error(
            DNS1035_LABEL_MSG,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// apimachinery `IsQualifiedName`: `[prefix/]name`, prefix a DNS-1123 subdomain.
pub(crate) fn qualified_name_problems(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                errs.extend(
                    dns1123_subdomain_problems(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            let regex = regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"],
            );
            errs.push(format!(
                "a qualified name {regex} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > QUALIFIED_NAME_MAX_LEN {
        errs.push(format!(
            "name part {}",
            max_len_error(QUALIFIED_NAME_MAX_LEN)
        ));
    }
    if !is_qualified_name_part(name) {
        let regex = regex_error(
            QUALIFIED_NAME_MSG,
            QUALIFIED_NAME_FMT,
            &["MyName", "my.name", "123-abc"],
        );
        errs.push(format!("name part {regex}"));
    }
    errs
}

/// apimachinery `IsValidLabelValue`.
pub(crate) fn label_value_problems(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_VALUE_MAX_LEN {
        errs.push(max_len_error(LABEL_VALUE_MAX_LEN));
    }
    if !(s.is_empty() || is_qualified_name_part(s)) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// apimachinery `IsDNS1123Label`: the label shape, at most 63 characters.
pub(crate) fn is_dns1123_label(s: &str) -> bool {
    s.len() <= DNS1035_LABEL_MAX_LEN && has_dns1123_label_shape(s)
}

/// apimachinery `IsDNS1123Subdomain` without its messages: dot-separated label shapes, at
/// most 253 characters in all (no limit per label).
pub(crate) fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= DNS1123_SUBDOMAIN_MAX_LEN && s.split('.').all(has_dns1123_label_shape)
}
