//! The kubeconfig-format webhook configuration file (`--authorization-webhook-config-file`,
//! `--authentication-token-webhook-config-file`), as client-go's `clientcmd` reads it for
//! apiserver's webhooks: only the cluster and user of the current context matter.

use std::path::{Path, PathBuf};

use base64::Engine as _;
#[cfg(feature = "tokio")]
use http::Uri;
use serde::Deserialize;

#[cfg(feature = "tokio")]
use super::WebhookClient;
#[cfg(feature = "tokio")]
use crate::rt::Timer;

/// The parts of a kubeconfig a webhook needs.
///
/// File references (`certificate-authority`, `client-certificate`, `client-key`,
/// `tokenFile`) are read when the kubeconfig is parsed, relative to its directory; the
/// `*-data` fields are base64 as in any kubeconfig. Contexts, namespaces, exec and auth
/// provider plugins are not supported: a webhook's credentials are a client certificate
/// or a token.
///
/// ```
/// use kube_aggregator::webhook::Kubeconfig;
///
/// let k = Kubeconfig::parse(r#"
/// apiVersion: v1
/// kind: Config
/// clusters:
/// - name: authz
///   cluster: {server: "https://authz.example:8443/authorize", insecure-skip-tls-verify: true}
/// users:
/// - name: apiserver
///   user: {token: secret}
/// contexts:
/// - name: webhook
///   context: {cluster: authz, user: apiserver}
/// current-context: webhook
/// "#, std::path::Path::new(".")).unwrap();
/// assert_eq!(k.server, "https://authz.example:8443/authorize");
/// assert_eq!(k.token.as_deref(), Some("secret"));
/// assert!(k.insecure_skip_tls_verify && k.ca_pem.is_none());
///
/// let err = Kubeconfig::parse("clusters: [{name: a, cluster: {}}]", std::path::Path::new(".")).unwrap_err();
/// assert_eq!(err.to_string(), r#"cluster "a" has no server"#);
/// ```
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
    /// `token` or the content of `tokenFile` (surrounding whitespace trimmed) when the
    /// kubeconfig was parsed.
    pub token: Option<String>,
    /// `tokenFile`, resolved against the kubeconfig's directory: the webhook client reads
    /// it again as it changes (a service account's projected token is rotated by the
    /// kubelet), see [`WebhookClient::with_token_file`].
    pub token_file: Option<PathBuf>,
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
    /// The kubeconfig file, when the configuration was read from one
    /// ([`Kubeconfig::load`]; `None` after [`Kubeconfig::parse`]).
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// What is wrong.
    pub fn kind(&self) -> &KubeconfigErrorKind {
        &self.kind
    }

    /// The same error, naming `file` (the `Display` then starts with `<file>: `).
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
    /// The webhook's cache could not be set up (the TokenReview cache finds no system
    /// randomness for its key); the error is the cache's own.
    #[error(transparent)]
    Cache(crate::body::BoxError),
}

/// A kubeconfig as written (`clusters`, `users`, `contexts`, `current-context`), every
/// field optional; only what the webhook needs is kept from it.
#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case", default)]
struct RawConfig {
    clusters: Vec<Named<RawCluster>>,
    users: Vec<Named<RawUser>>,
    contexts: Vec<Named<RawContext>>,
    current_context: String,
}

/// A named entry of a kubeconfig list: `{name, cluster|user|context: ...}`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context")]
    value: T,
}

/// A kubeconfig cluster: where the webhook is and how its certificate is checked.
#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case", default)]
struct RawCluster {
    server: String,
    certificate_authority: Option<PathBuf>,
    certificate_authority_data: Option<String>,
    insecure_skip_tls_verify: bool,
}

/// A kubeconfig user: the credentials the webhook is called with.
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

/// A kubeconfig context: which cluster with which user.
#[derive(Deserialize, Default)]
#[serde(default)]
struct RawContext {
    cluster: String,
    user: String,
}

impl Kubeconfig {
    /// Reads a kubeconfig file; relative paths inside it are relative to its directory.
    ///
    /// # Errors
    ///
    /// A [`KubeconfigError`] naming `path`: the file cannot be read
    /// ([`KubeconfigErrorKind::Read`]), or any error of [`Kubeconfig::parse`].
    ///
    /// ```
    /// use kube_aggregator::webhook::{Kubeconfig, KubeconfigErrorKind};
    ///
    /// let dir = std::env::temp_dir().join(format!("kube-aggregator-kubeconfig-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// std::fs::write(dir.join("token"), "s3cret\n").unwrap();
    /// std::fs::write(dir.join("authz.kubeconfig"), r#"
    /// clusters: [{name: authz, cluster: {server: "https://authz.example:8443/authorize"}}]
    /// users: [{name: apiserver, user: {tokenFile: token}}]
    /// "#).unwrap();
    /// // tokenFile is read relative to the kubeconfig's directory.
    /// let k = Kubeconfig::load(&dir.join("authz.kubeconfig")).unwrap();
    /// assert_eq!(k.token.as_deref(), Some("s3cret"));
    /// // ... and kept, for the client to read again as the token is rotated.
    /// assert_eq!(k.token_file, Some(dir.join("token")));
    ///
    /// let err = Kubeconfig::load(&dir.join("missing.kubeconfig")).unwrap_err();
    /// assert!(matches!(err.kind(), KubeconfigErrorKind::Read(_)));
    /// assert_eq!(err.file(), Some(dir.join("missing.kubeconfig").as_path()));
    /// std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn load(path: &Path) -> Result<Kubeconfig, KubeconfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| KubeconfigError::from(KubeconfigErrorKind::Read(e)).in_file(path))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Kubeconfig::parse(&text, base).map_err(|e| e.in_file(path))
    }

    /// Parses kubeconfig text; the current context's cluster and user, or the first ones.
    /// Files it names are read now, relative to `base`.
    ///
    /// # Errors
    ///
    /// [`KubeconfigErrorKind::Yaml`] for text that is not a kubeconfig,
    /// [`KubeconfigErrorKind::NoCluster`], [`KubeconfigErrorKind::NoServer`],
    /// [`KubeconfigErrorKind::ReadReferenced`] for a named file that cannot be read, and
    /// [`KubeconfigErrorKind::Base64`] for a `*-data` field that is not base64. A user
    /// named by the context but missing is not an error: the webhook is called without
    /// credentials.
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
        let resolve = |p: &PathBuf| {
            if p.is_absolute() {
                p.clone()
            } else {
                base.join(p)
            }
        };
        let read = |p: &PathBuf| {
            let p = resolve(p);
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
            if u.token.is_none() {
                out.token_file = u.token_file.as_ref().map(resolve);
            }
        }
        Ok(out)
    }

    /// The webhook client of the kubeconfig file at `path`: [`Kubeconfig::load`], then
    /// [`Kubeconfig::client`], with every error naming the file.
    #[cfg(feature = "tokio")]
    pub fn load_client(
        path: &Path,
        executor: crate::rt::Executor,
        timer: Timer,
    ) -> Result<WebhookClient, KubeconfigError> {
        let config = Kubeconfig::load(path)?;
        config.client(executor, timer).map_err(|e| e.in_file(path))
    }

    /// An HTTPS webhook client for this configuration: rustls with the kubeconfig's CA
    /// and client certificate, HTTP/2 or HTTP/1.1 by ALPN, pooled. The server's
    /// certificate is verified against the host of `server`; the token, if any, is sent as
    /// a bearer token, re-read from `tokenFile` as client-go does (at most a minute old).
    ///
    /// # Errors
    ///
    /// [`KubeconfigErrorKind::ServerNotUrl`], [`KubeconfigErrorKind::ServerNotHttps`],
    /// [`KubeconfigErrorKind::ServerNoHost`] for a `server` that is not an `https` URL
    /// with a host; [`KubeconfigErrorKind::HalfClientCertificate`],
    /// [`KubeconfigErrorKind::ClientCertificate`] for client credentials that do not load;
    /// [`KubeconfigErrorKind::Transport`] when the CA does not load.
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
        let client = WebhookClient::new(transport, url, timer);
        Ok(match &self.token_file {
            Some(path) => client.with_token_file(path.clone(), self.token.clone()),
            None => client.with_token(self.token.clone()),
        })
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
}
