//! The errors of [`validate`](super::validate), rendered as apimachinery renders them
//! ([`pkg/util/validation/field/errors.go`](https://github.com/kubernetes/apimachinery/blob/master/pkg/util/validation/field/errors.go),
//! [`pkg/api/errors/errors.go`](https://github.com/kubernetes/apimachinery/blob/master/pkg/api/errors/errors.go) `NewInvalid`).

use super::{API_GROUP, KIND};

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
    /// A field error of any kind, as apimachinery's `field.Error` literal.
    pub(super) fn new(
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

    /// `field.Required`: `<field>: Required value: <detail>`.
    pub(super) fn required(field: &str, detail: &str) -> Self {
        Self::new(field, FieldErrorKind::Required, None, detail)
    }

    /// `field.Forbidden`: `<field>: Forbidden: <detail>`.
    pub(super) fn forbidden(field: &str, detail: &str) -> Self {
        Self::new(field, FieldErrorKind::Forbidden, None, detail)
    }

    /// `field.Invalid` of a string, echoed Go-quoted: `Invalid value: "v1.foo": ...`.
    pub(super) fn invalid_str(field: &str, value: &str, detail: impl Into<String>) -> Self {
        Self::new(
            field,
            FieldErrorKind::Invalid,
            Some(crate::gocompat::quote(value)),
            detail,
        )
    }

    /// `field.Invalid` of a number, echoed bare: `Invalid value: 0: ...`.
    pub(super) fn invalid_int(field: &str, value: i32, detail: &str) -> Self {
        Self::new(
            field,
            FieldErrorKind::Invalid,
            Some(value.to_string()),
            detail,
        )
    }

    /// `field.Invalid` of a boolean, echoed bare: `Invalid value: true: ...`.
    pub(super) fn invalid_bool(field: &str, value: bool, detail: &str) -> Self {
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
    /// Every problem, in upstream's check order; never empty when returned by
    /// [`validate`](super::validate).
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
