//! The JSON webhook client: one `POST`, retried on upstream's transient failures.

use crate::span::{Kind, PathSpan};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Uri, header};
use http_body_util::BodyExt;
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;

use super::WebhookMetrics;
use super::token::{FileToken, Token};
use crate::body::{Body, BoxError};
use crate::rt::Timer;

/// A transport for webhook calls: any service from a request to a response.
///
/// Requests are `POST`s with an absolute `https` URI and a JSON body; the response body
/// is read whole. An `Err` is a transport failure, classified by the I/O error in its
/// source chain ([`WebhookError::ConnectionLost`] for a reset, otherwise
/// [`WebhookError::Transport`]).
pub type WebhookTransport = BoxCloneSyncService<Request<Body>, http::Response<Body>, BoxError>;

/// Retry schedule for transient webhook failures (apimachinery `wait.Backoff`,
/// [`pkg/util/wait/backoff.go`](https://github.com/kubernetes/apimachinery/blob/master/pkg/util/wait/backoff.go)).
///
/// Attempt `n` (from 1) waits `initial × factor^(n-1)` plus up to `jitter` of that at
/// random before attempt `n + 1`; there are `steps` attempts in all, so the default waits
/// about 0.5 s, 0.75 s, 1.1 s and 1.7 s between its five.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// First delay.
    pub initial: Duration,
    /// Multiplier per step (values below 1 count as 1: delays never shrink).
    pub factor: f64,
    /// Up to this fraction of each delay is added at random (0 for none; 0.2 adds up to
    /// 20 %).
    pub jitter: f64,
    /// Attempts in all, the first included (0 counts as 1: one attempt, no retry).
    pub steps: u32,
}

impl Default for Backoff {
    /// Upstream's webhook default: 500 ms, ×1.5, jitter 0.2, 5 steps.
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(500),
            factor: 1.5,
            jitter: 0.2,
            steps: 5,
        }
    }
}

/// A webhook call that failed: the last attempt's failure, after any retries.
///
/// Its text is what the caller reports: the authorizer's and authenticator's errors quote
/// it, as upstream quotes the webhook's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// The server could not be reached (dial, TLS, protocol). Not retried: upstream
    /// retries a connection only when it was reset or lost ([`WebhookError::ConnectionLost`]).
    #[error("{0}")]
    Transport(String),
    /// The connection was reset by the server (`ECONNRESET`) or aborted while the call was
    /// under way; retried, as upstream's `utilnet.IsConnectionReset` and
    /// `IsHTTP2ConnectionLost` errors are.
    #[error("{0}")]
    ConnectionLost(String),
    /// The attempt did not finish within the client timeout (10 s by default). Not retried:
    /// upstream's client-side deadline ends the call (`context deadline exceeded`).
    #[error("{0}")]
    Timeout(String),
    /// The server answered with a non-2xx status. Its text is client-go's for a status
    /// without a `Status` body.
    #[error(
        "the server responded with the status code {code} but did not return more information: {body}"
    )]
    Status {
        /// HTTP status.
        code: u16,
        /// The response body (truncated to 1 KiB).
        body: String,
        /// True when the response carried `Retry-After`.
        retry_after: bool,
    },
}

impl WebhookError {
    /// True for failures upstream retries (apiserver `webhook.DefaultShouldRetry`): a
    /// reset or lost connection, and 429, 500, 504 or any answer with `Retry-After`.
    /// Never a timeout, a refused connection or a TLS failure.
    pub fn is_transient(&self) -> bool {
        match self {
            WebhookError::ConnectionLost(_) => true,
            WebhookError::Transport(_) | WebhookError::Timeout(_) => false,
            WebhookError::Status {
                code, retry_after, ..
            } => *retry_after || matches!(code, 429 | 500 | 504),
        }
    }

    /// A transport failure, classified by the I/O error somewhere in its chain: a reset
    /// or aborted connection is [`WebhookError::ConnectionLost`] (retried), anything else
    /// [`WebhookError::Transport`]. The text is the whole chain, as Go prints it.
    fn from_transport(e: &(dyn std::error::Error + 'static)) -> WebhookError {
        let text = crate::status::error_chain(e);
        let mut cur = Some(e);
        while let Some(err) = cur {
            if let Some(io) = err.downcast_ref::<std::io::Error>() {
                if matches!(
                    io.kind(),
                    std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
                ) {
                    return WebhookError::ConnectionLost(text);
                }
            }
            cur = err.source();
        }
        WebhookError::Transport(text)
    }
}

/// A JSON webhook endpoint: one URL, an optional bearer token, a retry policy and a
/// per-attempt timeout, over a [`WebhookTransport`].
///
/// Cloning shares the transport (its pooled connections). Every call is independent: no
/// state is kept between calls beyond the transport's.
#[derive(Clone)]
pub struct WebhookClient {
    transport: WebhookTransport,
    url: Uri,
    token: Token,
    timer: Timer,
    backoff: Backoff,
    timeout: Duration,
    retry_every_error: bool,
    metrics: Option<Arc<WebhookMetrics>>,
}

debug_fields!(WebhookClient { url, backoff });

impl WebhookClient {
    /// Posts to `url` through `transport`, timing attempts and backoff with `timer`. No
    /// token, the default [`Backoff`], a 10 s timeout per attempt.
    pub fn new(transport: WebhookTransport, url: Uri, timer: Timer) -> WebhookClient {
        WebhookClient {
            transport,
            url,
            token: Token::None,
            timer,
            backoff: Backoff::default(),
            timeout: Duration::from_secs(10),
            retry_every_error: false,
            metrics: None,
        }
    }

    /// Retries every failure, not only the transient ones (upstream's audit webhook
    /// retries any error; the authorization and authentication webhooks do not).
    pub fn retry_every_error(mut self) -> WebhookClient {
        self.retry_every_error = true;
        self
    }

    /// Sends `Authorization: Bearer <token>` with each call (`None` sends none). A token
    /// that is not a valid header value fails every call with
    /// [`WebhookError::Transport`].
    pub fn with_token(mut self, token: Option<String>) -> WebhookClient {
        self.token = token.map_or(Token::None, Token::Static);
        self
    }

    /// Sends the content of the file at `path` (surrounding whitespace trimmed) as the
    /// bearer token, read again when the copy in hand is 50 s old, as client-go's
    /// `NewCachedFileTokenSource` does (a one-minute period, ten seconds of leeway): a
    /// service account token that the kubelet rotates is picked up within a minute.
    /// `initial` is the content already read (by [`Kubeconfig::parse`](super::Kubeconfig::parse)),
    /// used until the first re-read. When a re-read fails, the last token read is sent
    /// and the read is tried again on the next call; with no token read at all, the
    /// call fails with [`WebhookError::Transport`] naming the file.
    pub fn with_token_file(mut self, path: PathBuf, initial: Option<String>) -> WebhookClient {
        let now = self.timer.now();
        self.token = Token::File(Arc::new(FileToken::new(path, initial, now)));
        self
    }

    /// Replaces the retry schedule.
    pub fn with_backoff(mut self, backoff: Backoff) -> WebhookClient {
        self.backoff = backoff;
        self
    }

    /// Replaces the per-attempt timeout (default 10 s), covering the whole attempt: the
    /// connection, the headers and the body.
    pub fn with_timeout(mut self, timeout: Duration) -> WebhookClient {
        self.timeout = timeout;
        self
    }

    /// Counts and times each attempt in `metrics`, by its status code.
    pub fn with_metrics(mut self, metrics: Arc<WebhookMetrics>) -> WebhookClient {
        self.metrics = Some(metrics);
        self
    }

    /// The endpoint.
    pub fn url(&self) -> &Uri {
        &self.url
    }

    /// `POST`s `body` (JSON) and returns the 2xx response body; retries transient
    /// failures per the [`Backoff`]; the last error otherwise.
    ///
    /// Sent with `Content-Type: application/json` and `Accept: application/json, */*`.
    ///
    /// # Errors
    ///
    /// The last attempt's [`WebhookError`]: a non-2xx status (its body, cut to 1 KiB, in
    /// the error), a timeout (`Post "<url>": context deadline exceeded`, never retried),
    /// or a transport failure. Non-transient failures are returned at once.
    pub async fn post_json(&self, body: Bytes) -> Result<Bytes, WebhookError> {
        let mut delay = self.backoff.initial;
        let mut attempt = 1;
        loop {
            match self.attempt(body.clone()).await {
                Ok(b) => return Ok(b),
                Err(e)
                    if (self.retry_every_error || e.is_transient())
                        && attempt < self.backoff.steps.max(1) =>
                {
                    tracing::debug!(url = %self.url, attempt, error = %e, "webhook call failed; retrying");
                    self.timer
                        .sleep(with_jitter(delay, self.backoff.jitter))
                        .await;
                    delay = delay.mul_f64(self.backoff.factor.max(1.0));
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One attempt, bounded by the timeout: the request, the status, the whole body.
    async fn attempt(&self, body: Bytes) -> Result<Bytes, WebhookError> {
        let mut req = Request::post(self.url.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, */*")
            .body(Body::full(body))
            .map_err(|e| WebhookError::Transport(e.to_string()))?;
        if let Some(token) = self.token.current(self.timer.now())? {
            let v = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                WebhookError::Transport("the bearer token is not a valid header value".into())
            })?;
            req.headers_mut().insert(header::AUTHORIZATION, v);
        }
        // Under the `authorization` span when a traced request's decision needs the webhook.
        let span = PathSpan::current("webhook", Kind::Client);
        span.text("url.full", &self.url.to_string());
        span.inject(req.headers_mut());
        let started = self.timer.now();
        let mut code = None;
        let answered = &mut code;
        let call = async {
            let res = self
                .transport
                .clone()
                .oneshot(req)
                .await
                .map_err(|e| WebhookError::from_transport(&*e))?;
            let status = res.status();
            *answered = Some(status.as_u16());
            let retry_after = res.headers().contains_key(header::RETRY_AFTER);
            let bytes = res
                .into_body()
                .collect()
                .await
                .map_err(|e| WebhookError::from_transport(&*e))?
                .to_bytes();
            if status.is_success() {
                Ok(bytes)
            } else {
                let mut text =
                    String::from_utf8_lossy(&bytes[..bytes.len().min(1024)]).into_owned();
                if text.is_empty() {
                    text = status.canonical_reason().unwrap_or_default().to_owned();
                }
                Err(WebhookError::Status {
                    code: status.as_u16(),
                    body: text,
                    retry_after,
                })
            }
        };
        let result = match self.timer.timeout(self.timeout, call).await {
            Ok(r) => r,
            Err(_) => Err(WebhookError::Timeout(format!(
                "Post \"{}\": context deadline exceeded",
                self.url
            ))),
        };
        if let Some(metrics) = &self.metrics {
            // Upstream counts the status whenever one came, `<error>` otherwise.
            let took = self.timer.now().saturating_duration_since(started);
            metrics.attempt(code, took);
        }
        if let Some(code) = code {
            span.number("http.response.status_code", i64::from(code));
        }
        if let Err(e) = &result {
            span.error(e);
        }
        span.end();
        result
    }
}

/// `d` plus a random fraction of `d × jitter` (apimachinery's `wait.Jitter`): within
/// `[d, d × (1 + jitter))`. The randomness is the standard library's per-process hash
/// keys, which is plenty to keep retries of many callers apart.
fn with_jitter(d: Duration, jitter: f64) -> Duration {
    if jitter <= 0.0 {
        return d;
    }
    use std::hash::{BuildHasher, Hasher};
    // A cheap random fraction in [0, 1): the standard library's per-process random keys.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(d.as_nanos() as u64);
    let frac = (h.finish() >> 11) as f64 / (1u64 << 53) as f64;
    d + d.mul_f64(jitter * frac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_errors_follow_upstream() {
        assert!(!WebhookError::Transport("connection refused".into()).is_transient());
        assert!(!WebhookError::Timeout("context deadline exceeded".into()).is_transient());
        assert!(WebhookError::ConnectionLost("connection reset by peer".into()).is_transient());
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(WebhookError::from_transport(&reset).is_transient());
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(!WebhookError::from_transport(&refused).is_transient());
        for (code, transient) in [
            (429, true),
            (500, true),
            (504, true),
            (403, false),
            (404, false),
        ] {
            let e = WebhookError::Status {
                code,
                body: String::new(),
                retry_after: false,
            };
            assert_eq!(e.is_transient(), transient, "{code}");
        }
        assert!(
            WebhookError::Status {
                code: 503,
                body: String::new(),
                retry_after: true
            }
            .is_transient()
        );
    }

    #[test]
    fn jitter_stays_within_bounds() {
        let d = Duration::from_millis(500);
        for _ in 0..100 {
            let j = with_jitter(d, 0.2);
            assert!(j >= d && j <= d.mul_f64(1.2), "{j:?}");
        }
    }
}
