//! The TokenReview webhook token authenticator (k8s.io/apiserver
//! [`plugin/pkg/authenticator/token/webhook/webhook.go`](https://github.com/kubernetes/apiserver/blob/master/plugin/pkg/authenticator/token/webhook/webhook.go))
//! with the token cache in front of it.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;

use super::token_cache::{CacheTtl, TokenCache};
use super::{AuthenticateFuture, AuthenticationError, TokenAuthenticator, UserInfo};
use crate::rt::Timer;
use crate::webhook::{WebhookClient, WebhookMetrics};

/// The TokenReview version sent (`authentication.k8s.io/v1`, upstream's default
/// `--authentication-token-webhook-version`).
const API_VERSION: &str = "authentication.k8s.io/v1";

/// Asks a TokenReview webhook (`authentication.k8s.io/v1`) whether a bearer token is
/// valid, and caches the answer.
///
/// - Request: `POST` `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview",
///   "spec":{"token":..., "audiences":[...]}}`, audiences only when some are wanted;
///   transient failures retried by the [`WebhookClient`]'s backoff.
/// - `status.authenticated: false`: not ok, with `status.error` as the error when set.
/// - Wanted audiences: the response's `status.audiences` (or, when it has none, the
///   implicit audiences of [`with_implicit_audiences`](Self::with_implicit_audiences))
///   must intersect them, or the token is not ok.
/// - Cache: keyed by an HMAC-SHA256 of token and audiences under a per-process random key;
///   ok results kept for [`CacheTtl::success`], not-ok ones for [`CacheTtl::failure`],
///   errors never; concurrent lookups of one key make one webhook call.
///
/// ```
/// use std::time::Duration;
/// use http::{Request, Response};
/// use kube_aggregator::Body;
/// use kube_aggregator::authn::{CacheTtl, TokenAuthenticator, TokenReviewAuthenticator};
/// use kube_aggregator::rt::Timer;
/// use kube_aggregator::webhook::{WebhookClient, WebhookTransport};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // A webhook that knows one user.
/// let transport = WebhookTransport::new(tower::service_fn(|_: Request<Body>| async {
///     Ok(Response::new(Body::full(r#"{"status":{"authenticated":true,
///         "user":{"username":"alice","uid":"42","groups":["dev"]}}}"#)))
/// }));
/// let client = WebhookClient::new(transport, "https://authn.example/review".parse()?, Timer::tokio());
/// let authn = TokenReviewAuthenticator::new(client, Timer::tokio(), CacheTtl::both(Duration::from_secs(120)))?;
///
/// let user = authn.authenticate_token("eyJhbGciOi...", &[]).await?.unwrap();
/// assert_eq!((user.name.as_str(), user.uid.as_str()), ("alice", "42"));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct TokenReviewAuthenticator {
    inner: Arc<Inner>,
}

/// The webhook client, the implicit audiences and the cache, shared by clones.
#[derive(Clone)]
struct Inner {
    client: WebhookClient,
    metrics: Arc<WebhookMetrics>,
    implicit_audiences: Vec<String>,
    cache: Arc<TokenCache>,
}

impl std::fmt::Debug for TokenReviewAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenReviewAuthenticator")
            .field("url", self.inner.client.url())
            .field("ttl", &self.inner.cache.ttl())
            .finish_non_exhaustive()
    }
}

impl TokenReviewAuthenticator {
    /// An authenticator calling `client`, caching for `ttl` on `timer`'s clock.
    ///
    /// Errors only when the system has no randomness for the cache key.
    pub fn new(
        client: WebhookClient,
        timer: Timer,
        ttl: CacheTtl,
    ) -> Result<Self, AuthenticationError> {
        let metrics = Arc::new(WebhookMetrics::delegated_authn());
        Ok(TokenReviewAuthenticator {
            inner: Arc::new(Inner {
                client: client.with_metrics(metrics.clone()),
                metrics,
                implicit_audiences: Vec::new(),
                cache: Arc::new(TokenCache::new(ttl, timer)?),
            }),
        })
    }

    /// The webhook of the kubeconfig file at `path` (`--authentication-token-webhook-
    /// config-file`) over HTTPS, caching for `ttl`.
    #[cfg(feature = "tokio")]
    pub fn from_kubeconfig(
        path: &std::path::Path,
        executor: crate::rt::Executor,
        timer: Timer,
        ttl: CacheTtl,
    ) -> Result<Self, crate::webhook::KubeconfigError> {
        use crate::webhook::{KubeconfigError, KubeconfigErrorKind};
        let client = crate::webhook::Kubeconfig::load_client(path, executor, timer.clone())?;
        Self::new(client, timer, ttl).map_err(|e| {
            KubeconfigError::from(KubeconfigErrorKind::Cache(Box::new(e))).in_file(path)
        })
    }

    /// Its calls' counts and latencies by status code
    /// (`apiserver_delegated_authn_request_total`, `..._duration_seconds`), for the host
    /// to [register](WebhookMetrics::register).
    pub fn metrics(&self) -> &Arc<WebhookMetrics> {
        &self.inner.metrics
    }

    /// The audiences the webhook's server accepts when its answer names none
    /// (upstream's implicit audiences, the API server's `--api-audiences`). Starts a
    /// fresh cache, since cached answers depend on them.
    pub fn with_implicit_audiences(
        self,
        audiences: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        let mut inner = (*self.inner).clone();
        inner.implicit_audiences = audiences.into_iter().map(Into::into).collect();
        if let Ok(cache) = TokenCache::new(inner.cache.ttl(), inner.cache.timer()) {
            inner.cache = Arc::new(cache);
        }
        TokenReviewAuthenticator {
            inner: Arc::new(inner),
        }
    }

    /// One uncached webhook call: `POST` a `TokenReview` for `token` and `audiences`, and
    /// read its status as upstream does.
    ///
    /// `Ok(Some)` for `authenticated: true` whose audiences match (the answer's, or the
    /// implicit ones when it names none); `Ok(None)` for not authenticated without an
    /// error, or audiences that do not match; `Err` for the status's `error`, a webhook
    /// failure (`token review webhook <url>: ...`) or an answer that does not decode.
    pub async fn review(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Result<Option<UserInfo>, AuthenticationError> {
        self.inner.review(token, audiences).await
    }
}

impl Inner {
    async fn review(
        &self,
        token: &str,
        wanted: &[String],
    ) -> Result<Option<UserInfo>, AuthenticationError> {
        let mut spec = serde_json::json!({ "token": token });
        if !wanted.is_empty() {
            spec["audiences"] = wanted.into();
        }
        let body = serde_json::json!({
            "apiVersion": API_VERSION,
            "kind": "TokenReview",
            "metadata": {"creationTimestamp": null},
            "spec": spec,
            "status": {"user": {}},
        });
        let url = self.client.url();
        let fail = |detail: String| {
            AuthenticationError::Other(format!("token review webhook {url}: {detail}"))
        };
        let answer = self
            .client
            .post_json(Bytes::from(body.to_string()))
            .await
            .map_err(|e| fail(e.to_string()))?;
        let review: Review = serde_json::from_slice(&answer)
            .map_err(|e| fail(format!("cannot decode the TokenReview response: {e}")))?;
        if !wanted.is_empty() {
            let got = if review.status.audiences.is_empty() {
                &self.implicit_audiences
            } else {
                &review.status.audiences
            };
            if !wanted.iter().any(|w| got.contains(w)) {
                return Ok(None);
            }
        }
        let status = review.status;
        if !status.authenticated {
            return match status.error {
                e if e.is_empty() => Ok(None),
                e => Err(AuthenticationError::Other(e)),
            };
        }
        Ok(Some(UserInfo {
            name: status.user.username,
            uid: status.user.uid,
            groups: status.user.groups,
            extra: status.user.extra,
        }))
    }
}

impl TokenAuthenticator for TokenReviewAuthenticator {
    fn authenticate_token(&self, token: &str, audiences: &[String]) -> AuthenticateFuture {
        let this = self.inner.clone();
        let token = token.to_owned();
        let audiences = audiences.to_vec();
        Box::pin(async move {
            let key = this.cache.key(&token, &audiences);
            let reviewer = this.clone();
            this.cache
                .get_or_lookup(key, move || async move {
                    reviewer.review(&token, &audiences).await
                })
                .await
        })
    }
}

#[derive(Deserialize)]
struct Review {
    #[serde(default)]
    status: ReviewStatus,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ReviewStatus {
    authenticated: bool,
    user: ReviewUser,
    audiences: Vec<String>,
    error: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ReviewUser {
    username: String,
    uid: String,
    groups: Vec<String>,
    extra: BTreeMap<String, Vec<String>>,
}

#[cfg(test)]
#[path = "token_review_tests.rs"]
mod tests;
