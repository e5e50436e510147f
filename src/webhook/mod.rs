//! What the SubjectAccessReview and TokenReview webhooks share: their kubeconfig-format
//! configuration file, a JSON `POST` over any tower service, and upstream's retry policy.
//!
//! Mirrors k8s.io/apiserver `pkg/util/webhook` (`webhook.go`, `authentication.go`): the
//! configuration is a kubeconfig whose current context (or first cluster and user) names
//! the server, its CA and the client credentials; transient failures (a reset or lost
//! connection, HTTP 429, 500, 504, or a `Retry-After`) are retried with exponential
//! backoff (500 ms, ×1.5, jitter 0.2, 5 steps); each attempt has a timeout (10 s), and an
//! attempt that times out is not retried, so a hanging webhook costs one call and at most
//! one timeout per request.

mod client;
mod kubeconfig;

pub use client::{Backoff, WebhookClient, WebhookError, WebhookTransport};
pub use kubeconfig::{Kubeconfig, KubeconfigError, KubeconfigErrorKind};
