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

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderValue, Request, Uri, header};
use http_body_util::BodyExt;
use serde::Deserialize;
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;

use crate::body::{Body, BoxError};
use crate::rt::Timer;

/// A transport for webhook calls: any service from a request to a response.
pub type WebhookTransport = BoxCloneSyncService<Request<Body>, http::Response<Body>, BoxError>;

/// Retry schedule for transient webhook failures (apimachinery `wait.Backoff`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// First delay.
    pub initial: Duration,
    /// Multiplier per step.
    pub factor: f64,
    /// Up to this fraction of each delay is added at random.
    pub jitter: f64,
    /// Attempts in all.
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

/// A webhook call that failed.
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
    /// The server answered with a non-2xx status.
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

    /// A transport failure, classified by the I/O error somewhere in its chain.
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

/// A JSON webhook endpoint.
#[derive(Clone)]
pub struct WebhookClient {
    transport: WebhookTransport,
    url: Uri,
    token: Option<String>,
    timer: Timer,
    backoff: Backoff,
    timeout: Duration,
}

impl std::fmt::Debug for WebhookClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookClient")
            .field("url", &self.url)
            .field("backoff", &self.backoff)
            .finish_non_exhaustive()
    }
}

impl WebhookClient {
    /// Posts to `url` through `transport`, timing attempts and backoff with `timer`.
    pub fn new(transport: WebhookTransport, url: Uri, timer: Timer) -> WebhookClient {
        WebhookClient {
            transport,
            url,
            token: None,
            timer,
            backoff: Backoff::default(),
            timeout: Duration::from_secs(10),
        }
    }

    /// Sends `Authorization: Bearer <token>` with each call.
    pub fn with_token(mut self, token: Option<String>) -> WebhookClient {
        self.token = token;
        self
    }

    /// Replaces the retry schedule.
    pub fn with_backoff(mut self, backoff: Backoff) -> WebhookClient {
        self.backoff = backoff;
        self
    }

    /// Replaces the per-attempt timeout (default 10 s).
    pub fn with_timeout(mut self, timeout: Duration) -> WebhookClient {
        self.timeout = timeout;
        self
    }

    /// The endpoint.
    pub fn url(&self) -> &Uri {
        &self.url
    }

    /// `POST`s `body` (JSON) and returns the 2xx response body; retries transient
    /// failures per the [`Backoff`]; the last error otherwise.
    pub async fn post_json(&self, body: Bytes) -> Result<Bytes, WebhookError> {
        let mut delay = self.backoff.initial;
        let mut attempt = 1;
        loop {
            match self.attempt(body.clone()).await {
                Ok(b) => return Ok(b),
                Err(e) if e.is_transient() && attempt < self.backoff.steps.max(1) => {
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

    async fn attempt(&self, body: Bytes) -> Result<Bytes, WebhookError> {
        let mut req = Request::post(self.url.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, */*")
            .body(Body::full(body))
            .map_err(|e| WebhookError::Transport(e.to_string()))?;
        if let Some(token) = &self.token {
            let v = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                WebhookError::Transport("the bearer token is not a valid header value".into())
            })?;
            req.headers_mut().insert(header::AUTHORIZATION, v);
        }
        let call = async {
            let res = self
                .transport
                .clone()
                .oneshot(req)
                .await
                .map_err(|e| WebhookError::from_transport(&*e))?;
            let status = res.status();
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
        match self.timer.timeout(self.timeout, call).await {
            Ok(r) => r,
            Err(_) => Err(WebhookError::Timeout(format!(
                "Post \"{}\": context deadline exceeded",
                self.url
            ))),
        }
    }
}

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

/// The parts of a kubeconfig a webhook needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kubeconfig {
    /// `cluster.server`, e.g. `https://authz.example:8443/authorize`.
    pub server: String,
    /// PEM CA from `certificate-authority` or `certificate-authority-data`; `None` means
    /// the platform's roots.
    pub ca_pem: Option<Vec<u8>>,
    /// `insecure-skip-tls-verify`.
    pub insecure_skip_tls_verify: bool,
    /// PEM client certificate (`client-certificate` or `-data`).
    pub client_certificate_pem: Option<Vec<u8>>,
    /// PEM client key (`client-key` or `-data`).
    pub client_key_pem: Option<Vec<u8>>,
    /// `token` or the content of `tokenFile`.
    pub token: Option<String>,
}

/// A kubeconfig that cannot be used: the file, when it came from one, and what is wrong
/// (`authz.kubeconfig: cluster "authz" has no server`). The one error of reading a
/// kubeconfig and of building its webhook client.
#[derive(Debug, thiserror::Error)]
#[error("{}{kind}", file.as_ref().map(|f| format!("{}: ", f.display())).unwrap_or_default())]
pub struct KubeconfigError {
    file: Option<PathBuf>,
    #[source]
    kind: KubeconfigErrorKind,
}

impl KubeconfigError {
    /// The kubeconfig file, when the configuration was read from one.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// What is wrong.
    pub fn kind(&self) -> &KubeconfigErrorKind {
        &self.kind
    }

    /// The same error, naming `file`.
    pub(crate) fn in_file(mut self, file: &Path) -> KubeconfigError {
        self.file = Some(file.to_owned());
        self
    }
}

impl From<KubeconfigErrorKind> for KubeconfigError {
    fn from(kind: KubeconfigErrorKind) -> KubeconfigError {
        KubeconfigError { file: None, kind }
    }
}

/// What is wrong with a kubeconfig.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KubeconfigErrorKind {
    /// The file could not be read.
    #[error("cannot read: {0}")]
    Read(#[source] std::io::Error),
    /// The text is not a kubeconfig.
    #[error("invalid kubeconfig: {0}")]
    Yaml(#[source] serde_yaml_ng::Error),
    /// No cluster (the current context's, or any).
    #[error("no cluster")]
    NoCluster,
    /// The cluster of this name has no `server`.
    #[error("cluster {0:?} has no server")]
    NoServer(String),
    /// A file the kubeconfig names could not be read.
    #[error("cannot read {}: {source}", path.display())]
    ReadReferenced {
        /// The file, relative paths resolved against the kubeconfig's directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A `*-data` field is not base64.
    #[error("{field}: invalid base64: {source}")]
    Base64 {
        /// The field, e.g. `certificate-authority-data`.
        field: &'static str,
        /// Why.
        #[source]
        source: base64::DecodeError,
    },
    /// `server` is not a URL.
    #[error("server {server:?} is not a URL: {source}")]
    ServerNotUrl {
        /// The server as written.
        server: String,
        /// Why.
        #[source]
        source: http::uri::InvalidUri,
    },
    /// `server` is not an `https` URL (the server as written).
    #[error("server {0:?} must be an https URL")]
    ServerNotHttps(String),
    /// `server` has no host (the server as written).
    #[error("server {0:?} has no host")]
    ServerNoHost(String),
    /// Only one of the client certificate and key.
    #[error("client certificate and key must be given together")]
    HalfClientCertificate,
    /// The client certificate and key do not load.
    #[error(transparent)]
    ClientCertificate(#[from] crate::transport::TlsConfigError),
    /// The HTTPS client could not be built (the CA bundle, ...).
    #[error(transparent)]
    Transport(#[from] crate::transport::TransportError),
    /// The webhook's cache could not be set up.
    #[error(transparent)]
    Cache(#[from] crate::authn::AuthenticationError),
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case", default)]
struct RawConfig {
    clusters: Vec<Named<RawCluster>>,
    users: Vec<Named<RawUser>>,
    contexts: Vec<Named<RawContext>>,
    current_context: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context")]
    value: T,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case", default)]
struct RawCluster {
    server: String,
    certificate_authority: Option<PathBuf>,
    certificate_authority_data: Option<String>,
    insecure_skip_tls_verify: bool,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case", default)]
struct RawUser {
    client_certificate: Option<PathBuf>,
    client_certificate_data: Option<String>,
    client_key: Option<PathBuf>,
    client_key_data: Option<String>,
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<PathBuf>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawContext {
    cluster: String,
    user: String,
}

impl Kubeconfig {
    /// Reads a kubeconfig file; relative paths inside it are relative to its directory.
    pub fn load(path: &Path) -> Result<Kubeconfig, KubeconfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| KubeconfigError::from(KubeconfigErrorKind::Read(e)).in_file(path))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Kubeconfig::parse(&text, base).map_err(|e| e.in_file(path))
    }

    /// Parses kubeconfig text; the current context's cluster and user, or the first ones.
    pub fn parse(text: &str, base: &Path) -> Result<Kubeconfig, KubeconfigError> {
        use KubeconfigErrorKind as Kind;
        let raw: RawConfig = serde_yaml_ng::from_str(text).map_err(Kind::Yaml)?;
        let ctx = raw
            .contexts
            .iter()
            .find(|c| c.name == raw.current_context)
            .map(|c| &c.value);
        let cluster = match ctx {
            Some(c) => raw.clusters.iter().find(|x| x.name == c.cluster),
            None => raw.clusters.first(),
        }
        .ok_or(Kind::NoCluster)?;
        let user = match ctx {
            Some(c) => raw.users.iter().find(|x| x.name == c.user),
            None => raw.users.first(),
        };
        let c = &cluster.value;
        if c.server.is_empty() {
            return Err(Kind::NoServer(cluster.name.clone()).into());
        }
        let read = |p: &PathBuf| {
            let p = if p.is_absolute() {
                p.clone()
            } else {
                base.join(p)
            };
            std::fs::read(&p).map_err(|source| Kind::ReadReferenced { path: p, source })
        };
        let data = |field: &'static str, s: &str| {
            base64::engine::general_purpose::STANDARD
                .decode(s.trim())
                .map_err(|source| Kind::Base64 { field, source })
        };
        let ca_pem = match (&c.certificate_authority_data, &c.certificate_authority) {
            (Some(d), _) => Some(data("certificate-authority-data", d)?),
            (None, Some(p)) => Some(read(p)?),
            (None, None) => None,
        };
        let mut out = Kubeconfig {
            server: c.server.clone(),
            ca_pem,
            insecure_skip_tls_verify: c.insecure_skip_tls_verify,
            ..Kubeconfig::default()
        };
        if let Some(u) = user.map(|u| &u.value) {
            out.client_certificate_pem = match (&u.client_certificate_data, &u.client_certificate) {
                (Some(d), _) => Some(data("client-certificate-data", d)?),
                (None, Some(p)) => Some(read(p)?),
                (None, None) => None,
            };
            out.client_key_pem = match (&u.client_key_data, &u.client_key) {
                (Some(d), _) => Some(data("client-key-data", d)?),
                (None, Some(p)) => Some(read(p)?),
                (None, None) => None,
            };
            out.token = match (&u.token, &u.token_file) {
                (Some(t), _) => Some(t.clone()),
                (None, Some(p)) => Some(String::from_utf8_lossy(&read(p)?).trim().to_owned()),
                (None, None) => None,
            };
        }
        Ok(out)
    }

    /// An HTTPS webhook client for this configuration: rustls with the kubeconfig's CA
    /// and client certificate, HTTP/2 or HTTP/1.1 by ALPN, pooled.
    #[cfg(feature = "tokio")]
    pub fn client(
        &self,
        executor: crate::rt::Executor,
        timer: Timer,
    ) -> Result<WebhookClient, KubeconfigError> {
        use crate::transport::{BackendTarget, ClientCertificate, RustlsTransport, Transport};
        use KubeconfigErrorKind as Kind;
        let url: Uri = self.server.parse().map_err(|source| Kind::ServerNotUrl {
            server: self.server.clone(),
            source,
        })?;
        if url.scheme_str() != Some("https") {
            return Err(Kind::ServerNotHttps(self.server.clone()).into());
        }
        let host = url
            .host()
            .ok_or_else(|| Kind::ServerNoHost(self.server.clone()))?;
        let cert = match (&self.client_certificate_pem, &self.client_key_pem) {
            (Some(c), Some(k)) => ClientCertificate::from_pem(c, k).map_err(Kind::from)?,
            (None, None) => ClientCertificate::none(),
            _ => return Err(Kind::HalfClientCertificate.into()),
        };
        let target = BackendTarget {
            server_name: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            ca_bundle: self.ca_pem.clone().unwrap_or_default(),
            insecure_skip_tls_verify: self.insecure_skip_tls_verify,
        };
        let transport = RustlsTransport::new(cert, executor, timer.clone())
            .client(&target)
            .map_err(Kind::from)?;
        Ok(WebhookClient::new(transport, url, timer).with_token(self.token.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_current_context_and_inline_data() {
        let text = r#"
apiVersion: v1
kind: Config
clusters:
- name: other
  cluster: {server: "https://other:1"}
- name: authz
  cluster:
    server: https://127.0.0.1:8443/authorize
    certificate-authority-data: Q0EtUEVN
users:
- name: apiserver
  user: {token: secret}
contexts:
- name: webhook
  context: {cluster: authz, user: apiserver}
current-context: webhook
"#;
        let k = Kubeconfig::parse(text, Path::new(".")).unwrap();
        assert_eq!(k.server, "https://127.0.0.1:8443/authorize");
        assert_eq!(k.ca_pem.as_deref(), Some(b"CA-PEM".as_slice()));
        assert_eq!(k.token.as_deref(), Some("secret"));
        assert!(
            Kubeconfig::parse("clusters: []", Path::new("."))
                .unwrap_err()
                .to_string()
                .contains("no cluster")
        );
    }

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
