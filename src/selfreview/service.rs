//! [`SelfReviewLayer`] and its service: which requests are self reviews, and how one is
//! read, answered and written (the formats are `json.rs`'s and `proto.rs`'s, the
//! attributes `review.rs`'s).

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tower::Service;

use super::{AccessReview, Format, Kind, ReviewError, json, proto, review};
use crate::audit_context::AuditContext;
use crate::authn::UserInfo;
use crate::authz::{Authorizer, RequestInfo, Rules, SubjectAccessReviewStatus};
use crate::body::{Body, BoxError};
use crate::filter::{Filter, Filtered, filter_layer};
use crate::status::{Status, StatusCause, StatusDetails};

/// Upstream's limit on a create request's body (`maxRequestBodyBytes`, 3 MB); a larger
/// review is answered 413 `RequestEntityTooLarge`.
const MAX_BODY: usize = 3 * 1024 * 1024;

/// Layer that answers the self reviews (see the [module docs](super)).
///
/// ```
/// use http::{Request, Response, StatusCode};
/// use http_body_util::BodyExt;
/// use kube_aggregator::Body;
/// use kube_aggregator::authn::UserInfo;
/// use kube_aggregator::authz::PrivilegedGroups;
/// use kube_aggregator::selfreview::SelfReviewLayer;
/// use tower::{Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let service = SelfReviewLayer::new(PrivilegedGroups::system_masters())
///     .layer(tower::service_fn(|_: Request<Body>| async {
///         Ok::<_, std::convert::Infallible>(Response::new(Body::empty()))
///     }));
///
/// // kubectl auth can-i list nodes, as a member of system:masters.
/// let review = r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview",
///     "spec":{"resourceAttributes":{"verb":"list","resource":"nodes"}}}"#;
/// let mut req = Request::post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
///     .header("content-type", "application/json")
///     .body(Body::full(review)).unwrap();
/// req.extensions_mut().insert(UserInfo::new("admin", ["system:masters"]));
/// let res = service.oneshot(req).await.unwrap();
/// assert_eq!(res.status(), StatusCode::CREATED);
/// let body = res.into_body().collect().await.unwrap().to_bytes();
/// let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
/// assert_eq!(answer["status"]["allowed"], true);
/// # }
/// ```
#[derive(Debug)]
pub struct SelfReviewLayer<Z> {
    authorizer: Arc<Z>,
}

impl<Z: Authorizer> SelfReviewLayer<Z> {
    /// A layer answering from `authorizer` (normally the authorization layer's own, so a
    /// review says what the stack itself decides). The authorizer is shared (`Arc`) by
    /// every service the layer builds.
    pub fn new(authorizer: Z) -> Self {
        SelfReviewLayer {
            authorizer: Arc::new(authorizer),
        }
    }
}

// The shared parts behind `Arc`s: no `Z: Clone` needed.
clone_fields!(SelfReviewLayer<Z> { authorizer });

filter_layer! {
    /// Service of [`SelfReviewLayer`]: answers the three review paths itself and calls the
    /// inner service for everything else. Ready when the inner service is.
    pub type SelfReviewService<S, Z> = FilterService<SelfReviewLayer<Z>, S>;
}

impl<S, Z, B> Filter<S, B> for SelfReviewLayer<Z>
where
    S: Service<Request<B>, Response = Response<Body>>,
    Z: Authorizer,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Future = ResponseFuture<S::Future>;

    fn filter(&self, inner: &mut S, mut req: Request<B>) -> Self::Future {
        let kind = match crate::authz::request_info::ensure(&mut req) {
            Ok(()) => req.extensions().get::<RequestInfo>().and_then(Kind::of),
            Err(_) => None,
        };
        let Some(kind) = kind else {
            return Filtered::inner(inner.call(req));
        };
        if req.method() != Method::POST {
            let mut s = Status::failure(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            );
            s.details = Some(StatusDetails::default());
            return Filtered::ready(s.into_response());
        }
        let authorizer = self.authorizer.clone();
        Filtered::wrapped(Answering::new(async move {
            answer(kind, req, &*authorizer).await
        }))
    }
}

/// A 400 `BadRequest` Status with `message`.
fn bad_request(message: impl Into<String>) -> Response<Body> {
    Status::failure(StatusCode::BAD_REQUEST, "BadRequest", message).into_response()
}

/// Upstream's 422 for a review with neither or both attribute sets (1.32 wording).
fn invalid_access_review(review: &AccessReview) -> Option<Response<Body>> {
    let (field, value, detail) =
        match (&review.resource_attributes, &review.non_resource_attributes) {
            (Some(_), None) | (None, Some(_)) => return None,
            (None, None) => (
                "spec.resourceAttributes",
                "\"null\"".to_owned(),
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ),
            (Some(_), Some(n)) => (
                "spec.nonResourceAttributes",
                format!(
                    "authorization.NonResourceAttributes{{Path:{:?}, Verb:{:?}}}",
                    n.path, n.verb
                ),
                "cannot be specified in combination with resourceAttributes",
            ),
        };
    let cause = format!("Invalid value: {value}: {detail}");
    // The registry decodes into the internal type, whose kind is empty: hence the
    // message's bare `.authorization.k8s.io`.
    let mut s = Status::failure(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid",
        format!(".authorization.k8s.io \"\" is invalid: {field}: {cause}"),
    );
    s.details = Some(StatusDetails {
        group: "authorization.k8s.io".into(),
        causes: vec![StatusCause {
            reason: "FieldValueInvalid".into(),
            message: cause,
            field: field.into(),
        }],
        ..StatusDetails::default()
    });
    Some(s.into_response())
}

/// One self review, from request to answer, in upstream's order: the user (400 without
/// one), the body's media type (415), the `Accept` (406), the body within [`MAX_BODY`]
/// (413), then [`respond`]. A body that does not decode is 400 with the decoder's message.
async fn answer<B, Z>(kind: Kind, req: Request<B>, authorizer: &Z) -> Response<Body>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    Z: Authorizer + ?Sized,
{
    let (parts, body) = req.into_parts();
    let Some(user) = parts.extensions.get::<UserInfo>().cloned() else {
        return bad_request("no user present on request");
    };
    let Some(input) = Format::of_content_type(parts.headers.get(header::CONTENT_TYPE)) else {
        let s = Status::failure(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        );
        return s.into_response();
    };
    let Some(output) = Format::of_accept(&parts.headers) else {
        let s = Status::failure(
            StatusCode::NOT_ACCEPTABLE,
            "NotAcceptable",
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        );
        return s.into_response();
    };
    let bytes = match Limited::new(body, MAX_BODY).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            let s = Status::failure(
                StatusCode::PAYLOAD_TOO_LARGE,
                "RequestEntityTooLarge",
                format!("Request entity too large: limit is {MAX_BODY}"),
            );
            return s.into_response();
        }
        Err(e) => return bad_request(format!("reading the request body: {e}")),
    };
    // A self review in a tenant asks about that tenant.
    let tenant = parts.extensions.get::<crate::tenancy::Tenant>();
    let audit = parts.extensions.get::<AuditContext>();
    match respond(
        kind, input, output, &bytes, &user, tenant, authorizer, audit,
    )
    .await
    {
        Ok(res) => res,
        Err(ReviewError::Decode(message)) => bad_request(message),
    }
}

/// Decodes the review, answers it, and encodes the answer: `201 Created` with the review
/// in `output`'s media type. The access review's spec is echoed back with its status;
/// the rules review answers for the namespace it names (400 without one); the subject
/// review is stamped with the system clock's time, as the API server stamps it. The
/// review decoded and the review answered go to the request's audit event (as JSON,
/// whatever the wire format), when its level records them.
#[allow(clippy::too_many_arguments)]
async fn respond<Z: Authorizer + ?Sized>(
    kind: Kind,
    input: Format,
    output: Format,
    bytes: &[u8],
    user: &UserInfo,
    tenant: Option<&crate::tenancy::Tenant>,
    authorizer: &Z,
    audit: Option<&AuditContext>,
) -> Result<Response<Body>, ReviewError> {
    // The request as JSON, or the protobuf object's bytes.
    let (value, raw) = match input {
        Format::Protobuf => {
            let (api_version, found, raw) = proto::unwrap_envelope(bytes)?;
            json::check_type(&api_version, &found, kind)?;
            (None, raw)
        }
        Format::Json | Format::Yaml => (
            Some(json::decode(bytes, input == Format::Yaml, kind)?),
            Vec::new(),
        ),
    };
    let (doc, pb) = match kind {
        Kind::AccessReview => {
            let review = match &value {
                Some(v) => json::access_review(v)?,
                None => proto::decode_access_review(&raw)?,
            };
            if let Some(audit) = audit {
                let decoded = SubjectAccessReviewStatus::default();
                audit.log_request_object(json::access_review_answer(&review, &decoded));
            }
            if let Some(res) = invalid_access_review(&review) {
                return Ok(res);
            }
            let (attrs, notes) = review::attributes(user, &review);
            let attrs = attrs.in_tenant(tenant);
            let status = review::status(authorizer.authorize(&attrs).await, &notes);
            if output == Format::Protobuf {
                if let Some(audit) = audit {
                    audit.log_response_object(json::access_review_answer(&review, &status));
                }
                (None, Some(proto::encode_access_review(&review, &status)))
            } else {
                (Some(json::access_review_answer(&review, &status)), None)
            }
        }
        Kind::RulesReview => {
            let namespace = match &value {
                Some(v) => json::rules_review_namespace(v)?,
                None => proto::decode_rules_review(&raw)?,
            };
            if let Some(audit) = audit {
                audit.log_request_object(json::rules_review_request(&namespace));
            }
            if namespace.is_empty() {
                return Ok(bad_request("no namespace on request"));
            }
            let rules: Rules = authorizer.rules_for(user, &namespace).await;
            if output == Format::Protobuf {
                if let Some(audit) = audit {
                    audit.log_response_object(json::rules_review_answer(&rules));
                }
                (None, Some(proto::encode_rules_review(&rules)))
            } else {
                (Some(json::rules_review_answer(&rules)), None)
            }
        }
        Kind::SubjectReview => {
            if value.is_none() {
                proto::decode_subject_review(&raw)?;
            }
            if let Some(audit) = audit {
                audit.log_request_object(json::subject_review_request());
            }
            let now = std::time::SystemTime::now();
            if output == Format::Protobuf {
                let secs = now
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                if let Some(audit) = audit {
                    let created = humantime::format_rfc3339_seconds(now).to_string();
                    audit.log_response_object(json::subject_review_answer(user, &created));
                }
                (None, Some(proto::encode_subject_review(user, secs)))
            } else {
                let created = humantime::format_rfc3339_seconds(now).to_string();
                (Some(json::subject_review_answer(user, &created)), None)
            }
        }
    };
    if let (Some(audit), Some(doc)) = (audit, &doc) {
        if audit.records_response_object() {
            audit.log_response_object(doc.clone());
        }
    }
    let body = match (pb, doc, output) {
        (Some(pb), _, _) => pb,
        (None, Some(doc), Format::Yaml) => json::to_yaml(&doc),
        (None, Some(doc), _) => json::to_json(&doc),
        (None, None, _) => Vec::new(),
    };
    let mut res = Response::new(Body::full(body));
    *res.status_mut() = StatusCode::CREATED;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(output.media_type()),
    );
    Ok(res)
}

/// Response future of [`SelfReviewService`]: the inner call when the request is not a
/// self review, or the review being answered.
pub type ResponseFuture<F> = Filtered<F, Answering<F>>;

/// A self review being answered here; it never fails, whatever the inner service's
/// error type `F` would be.
pub struct Answering<F> {
    answer: Pin<Box<dyn Future<Output = Response<Body>> + Send>>,
    _call: PhantomData<fn() -> F>,
}

impl<F> Answering<F> {
    fn new(answer: impl Future<Output = Response<Body>> + Send + 'static) -> Self {
        Answering {
            answer: Box::pin(answer),
            _call: PhantomData,
        }
    }
}

debug_fields!(Answering<F> {});

impl<F: crate::body::Answer> Future for Answering<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.answer.as_mut().poll(cx).map(Ok)
    }
}
