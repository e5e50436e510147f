//! What the SubjectAccessReview and TokenReview webhooks share: their kubeconfig-format
//! configuration file, a JSON `POST` over any tower service, and upstream's retry policy.
//!
//! Mirrors k8s.io/apiserver
//! [`pkg/util/webhook/webhook.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/util/webhook/webhook.go) and
//! [`pkg/util/webhook/authentication.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/util/webhook/authentication.go): the
//! configuration is a kubeconfig whose current context (or first cluster and user) names
//! the server, its CA and the client credentials; transient failures (a reset or lost
//! connection, HTTP 429, 500, 504, or a `Retry-After`) are retried with exponential
//! backoff (500 ms, ×1.5, jitter 0.2, 5 steps); each attempt has a timeout (10 s), and an
//! attempt that times out is not retried, so a hanging webhook costs one call and at most
//! one timeout per request. Each attempt can be counted and timed by its status code
//! ([`WebhookMetrics`], upstream's `apiserver_delegated_authn_request_*` and
//! `apiserver_delegated_authz_request_*`).
//!
//! The [`SubjectAccessReviewAuthorizer`](crate::authz::SubjectAccessReviewAuthorizer) and
//! the [`TokenReviewAuthenticator`](crate::authn::TokenReviewAuthenticator) post through a
//! [`WebhookClient`]; with the `tokio` feature [`Kubeconfig::client`] builds one over
//! HTTPS, and any tower service can carry the calls instead (a test double, a client of
//! the host's).
//!
//! ```
//! use std::time::Duration;
//! use bytes::Bytes;
//! use http::{Request, Response, StatusCode};
//! use kube_aggregator::Body;
//! use kube_aggregator::rt::Timer;
//! use kube_aggregator::webhook::{Backoff, WebhookClient, WebhookError, WebhookTransport};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // A webhook that is overloaded: 429 every time.
//! let transport = WebhookTransport::new(tower::service_fn(|_: Request<Body>| async {
//!     let mut res = Response::new(Body::full("slow down"));
//!     *res.status_mut() = StatusCode::TOO_MANY_REQUESTS;
//!     Ok::<_, kube_aggregator::body::BoxError>(res)
//! }));
//! let backoff = Backoff { initial: Duration::from_millis(1), steps: 2, ..Backoff::default() };
//! let client = WebhookClient::new(transport, "https://authz.example/authorize".parse().unwrap(), Timer::tokio())
//!     .with_backoff(backoff);
//!
//! // Retried (429 is transient), then the last error.
//! let err = client.post_json(Bytes::from_static(b"{}")).await.unwrap_err();
//! assert!(matches!(err, WebhookError::Status { code: 429, .. }));
//! assert!(err.is_transient());
//! # }
//! ```
//!
//! Floor 4 of the import order (docs/architecture.md): uses `body`, `outcome_metrics`,
//! `rt`, `span`, `status`, `transport`; used by `audit`, `authn`, `authz`, `fuzz_logic`.

mod client;
mod kubeconfig;
mod metrics;
mod token;

pub use client::{Backoff, WebhookClient, WebhookError, WebhookTransport};
pub use kubeconfig::{Kubeconfig, KubeconfigError, KubeconfigErrorKind};
pub use metrics::WebhookMetrics;
