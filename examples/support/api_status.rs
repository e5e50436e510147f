//! The `Status` failures the sample extension servers answer, worded as apimachinery's
//! `pkg/api/errors/errors.go` constructors and apiserver's storage errors word them.

#![allow(unreachable_pub)]

use http::{Response, StatusCode};
use kube_aggregator::Body;
use kube_aggregator::status::{Status, StatusCause, StatusDetails};

/// `<resource>.<group>`, or `<resource>` for the core group (`GroupResource.String()`).
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    }
}

fn details(group: &str, kind: &str, name: &str) -> StatusDetails {
    StatusDetails {
        name: name.to_owned(),
        group: group.to_owned(),
        kind: kind.to_owned(),
        ..StatusDetails::default()
    }
}

/// 404 `NotFound`: `<resource>.<group> "<name>" not found` (`NewNotFound`).
pub fn not_found(group: &str, resource: &str, name: &str) -> Response<Body> {
    Status::not_found(group, resource, name).into_response()
}

/// 409 `AlreadyExists`: `<resource>.<group> "<name>" already exists`.
pub fn already_exists(group: &str, resource: &str, name: &str) -> Response<Body> {
    let message = format!("{} \"{name}\" already exists", qualified(group, resource));
    Status::failure(StatusCode::CONFLICT, "AlreadyExists", message)
        .with_details(details(group, resource, name))
        .into_response()
}

/// The optimistic-lock message of the generic registry (`OptimisticLockErrorMsg`).
pub const OPTIMISTIC_LOCK: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// 409 `Conflict`: `Operation cannot be fulfilled on <resource>.<group> "<name>": <why>`.
pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Response<Body> {
    let message = format!(
        "Operation cannot be fulfilled on {} \"{name}\": {why}",
        qualified(group, resource)
    );
    Status::failure(StatusCode::CONFLICT, "Conflict", message)
        .with_details(details(group, resource, name))
        .into_response()
}

/// One `field.Error`: its type (`FieldValueInvalid`, ...), the field path and the
/// `ErrorBody()` text (`Invalid value: "x": detail`).
#[derive(Debug, Clone)]
pub struct FieldError {
    /// The cause type, e.g. `FieldValueRequired`.
    pub kind: &'static str,
    /// The field path, e.g. `metadata.name`.
    pub field: String,
    /// The text after `<field>: `.
    pub body: String,
}

impl FieldError {
    /// `field.Required`.
    pub fn required(field: &str, detail: &str) -> FieldError {
        FieldError {
            kind: "FieldValueRequired",
            field: field.to_owned(),
            body: with_detail("Required value".to_owned(), detail),
        }
    }

    /// `field.Invalid` with the value already rendered (`"x"` for strings, `0` for
    /// numbers, JSON otherwise).
    pub fn invalid(field: &str, rendered_value: &str, detail: &str) -> FieldError {
        FieldError {
            kind: "FieldValueInvalid",
            field: field.to_owned(),
            body: with_detail(format!("Invalid value: {rendered_value}"), detail),
        }
    }

    /// `field.Forbidden`.
    pub fn forbidden(field: &str, detail: &str) -> FieldError {
        FieldError {
            kind: "FieldValueForbidden",
            field: field.to_owned(),
            body: with_detail("Forbidden".to_owned(), detail),
        }
    }

    /// `field.NotSupported`: `Unsupported value: "x": supported values: "a", "b"`.
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> FieldError {
        let listed: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        FieldError {
            kind: "FieldValueNotSupported",
            field: field.to_owned(),
            body: format!(
                "Unsupported value: {value:?}: supported values: {}",
                listed.join(", ")
            ),
        }
    }
}

fn with_detail(s: String, detail: &str) -> String {
    if detail.is_empty() {
        s
    } else {
        format!("{s}: {detail}")
    }
}

/// 422 `Invalid`: `<kind>.<group> "<name>" is invalid: <errors>` (`NewInvalid`; one error
/// as it is, several as `[e1, e2]`, as `utilerrors.Aggregate` prints them).
pub fn invalid(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Response<Body> {
    let texts: Vec<String> = errors
        .iter()
        .map(|e| format!("{}: {}", e.field, e.body))
        .collect();
    let aggregated = match texts.as_slice() {
        [] => String::new(),
        [one] => format!(": {one}"),
        many => format!(": [{}]", many.join(", ")),
    };
    let message = format!(
        "{} \"{name}\" is invalid{aggregated}",
        qualified(group, kind)
    );
    let causes = errors
        .iter()
        .map(|e| StatusCause {
            reason: e.kind.to_owned(),
            message: e.body.clone(),
            field: e.field.clone(),
        })
        .collect();
    let mut d = details(group, kind, name);
    d.causes = causes;
    Status::failure(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message)
        .with_details(d)
        .into_response()
}

/// 400 `BadRequest` with `message` (`NewBadRequest`).
pub fn bad_request(message: impl Into<String>) -> Response<Body> {
    Status::failure(StatusCode::BAD_REQUEST, "BadRequest", message).into_response()
}

/// 410 `Expired` (`NewResourceExpired`).
pub fn expired(message: impl Into<String>) -> Response<Body> {
    expired_status(message).into_response()
}

/// The `Status` of [`expired`], also the object of a watch's `ERROR` event.
pub fn expired_status(message: impl Into<String>) -> Status {
    Status::failure(StatusCode::GONE, "Expired", message)
}

/// 504 `Timeout` for a resourceVersion the store has not reached
/// (`storage.NewTooLargeResourceVersionError`), with `Retry-After: 1`.
pub fn too_large_resource_version(asked: u64, current: u64) -> Response<Body> {
    let message = format!("Timeout: Too large resource version: {asked}, current: {current}");
    let d = StatusDetails {
        causes: vec![StatusCause {
            reason: "ResourceVersionTooLarge".to_owned(),
            message: "Too large resource version".to_owned(),
            field: String::new(),
        }],
        retry_after_seconds: 1,
        ..StatusDetails::default()
    };
    Status::failure(StatusCode::GATEWAY_TIMEOUT, "Timeout", message)
        .with_details(d)
        .into_response()
}

/// 415 `UnsupportedMediaType` (`negotiation.NewUnsupportedMediaTypeError`).
pub fn unsupported_media_type(accepted: &[&str]) -> Response<Body> {
    let message = format!(
        "the body of the request was in an unknown format - accepted media types include: {}",
        accepted.join(", ")
    );
    Status::failure(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "UnsupportedMediaType",
        message,
    )
    .into_response()
}

/// 405 `MethodNotAllowed` (`NewMethodNotSupported`).
pub fn method_not_supported(group: &str, resource: &str, action: &str) -> Response<Body> {
    Status::method_not_supported(group, resource, action).into_response()
}

/// 406 `NotAcceptable` with `message`.
pub fn not_acceptable(message: impl Into<String>) -> Response<Body> {
    Status::failure(StatusCode::NOT_ACCEPTABLE, "NotAcceptable", message).into_response()
}

/// 404 for a path the server does not serve, as go-restful's mux words it.
pub fn path_not_found() -> Response<Body> {
    Status::failure(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
    )
    .with_details(StatusDetails::default())
    .into_response()
}
