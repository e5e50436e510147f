//! What every sample extension API server here shares: TLS serving with the aggregator
//! authenticated as a front proxy, metrics-server-style flags, and the response helpers.
//!
//! Authentication is k8s.io/apiserver's delegating chain cut down to what a server behind
//! the aggregator needs (docs/upstream-behaviour.md §7.1, §7.3): the crate's
//! [`RequestHeaderAuthenticator`] believes `X-Remote-User`, `X-Remote-Group` and
//! `X-Remote-Extra-*` only on a connection whose client certificate chains to the
//! request-header CA and names one of the allowed CNs; the probe paths are open to
//! `system:anonymous`; anything else gets upstream's 401. Authorization was done by the
//! aggregator's authorizer before the request was proxied; a production server would ask
//! kube-apiserver again with a SubjectAccessReview (`system:auth-delegator`).

#![allow(unreachable_pub)]

use std::convert::Infallible;
use std::fmt::Display;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body::Frame;
use hyper::body::Incoming;
use kube_aggregator::authn::{
    Anonymous, AuthenticationLayer, RequestHeaderAuthenticator, RequestHeaderConfig, Union,
};
use kube_aggregator::transport::BackendClient;
use kube_aggregator::{Body, server};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tower::Layer;

/// The error type of start-up failures.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Paths answered `ok` to anyone, as a generic apiserver does for the kubelet's probes.
pub const PROBES: [&str; 3] = ["/healthz", "/readyz", "/livez"];

/// Where a server finds its TLS material and whom it accepts as a front proxy
/// (metrics-server's and prometheus-adapter's flag names).
#[derive(Debug, Clone)]
pub struct ServingConfig {
    /// `--tls-cert-file`: PEM serving certificate chain, leaf first.
    pub tls_cert_file: PathBuf,
    /// `--tls-private-key-file`: its PEM private key.
    pub tls_private_key_file: PathBuf,
    /// `--requestheader-client-ca-file`: the CAs that sign front-proxy certificates.
    pub requestheader_client_ca_file: PathBuf,
    /// `--requestheader-allowed-names`: accepted front-proxy CNs; empty accepts any.
    pub requestheader_allowed_names: Vec<String>,
}

/// Serves `handler` over TLS (HTTP/1.1 and HTTP/2) behind the front-proxy authenticator
/// until `shutdown` resolves. The handler sees the authenticated `UserInfo` in the
/// request's extensions. Errors: a certificate, key or CA file that cannot be read or used.
pub async fn serve<H, F>(
    config: &ServingConfig,
    listener: TcpListener,
    handler: H,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), BoxError>
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let (tls, authn) = prepare(config)?;
    let service = AuthenticationLayer::new(authn).layer(with_probes(handler));
    server::serve_tls(listener, tls, service, shutdown).await;
    Ok(())
}

/// The same server in process: `handler` behind the same front-proxy authenticator, as
/// the tower service an [`InMemoryTransport`](kube_aggregator::transport::InMemoryTransport)
/// hands requests to (register it under `<service>.<namespace>.svc`). The serving
/// certificate is not used; the request-header CA and allowed names are, against the peer
/// chain the transport presents (its `client_certificate`). Errors: as [`serve`].
pub fn in_process<H, F>(config: &ServingConfig, handler: H) -> Result<BackendClient, BoxError>
where
    H: Fn(Request<Body>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let (_, authn) = prepare(config)?;
    let service = AuthenticationLayer::new(authn).layer(with_probes(handler));
    Ok(BackendClient::new(
        tower::ServiceBuilder::new()
            .map_err(|e: Infallible| -> BoxError { match e {} })
            .service(service),
    ))
}

/// `handler` as a tower service, with the kubelet's probe paths ([`PROBES`]) answered
/// `ok` before it is asked.
fn with_probes<B, H, F>(
    handler: H,
) -> impl tower::Service<Request<B>, Response = Response<Body>, Error = Infallible, Future: Send>
+ Clone
+ Send
+ Sync
+ 'static
where
    B: Send + 'static,
    H: Fn(Request<B>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    tower::service_fn(move |req: Request<B>| {
        let handler = handler.clone();
        async move {
            if PROBES.contains(&req.uri().path()) {
                return Ok::<_, Infallible>(text(StatusCode::OK, "ok"));
            }
            Ok(handler(req).await)
        }
    })
}

/// The serving TLS configuration (ALPN h2 and http/1.1, client certificates requested
/// for the authenticator to verify) and the authenticator: the front proxy by request
/// header, anonymous on the probe paths only. Errors: a file that cannot be read or used,
/// named with what it was for.
pub fn prepare(config: &ServingConfig) -> Result<(Arc<rustls::ServerConfig>, Union), BoxError> {
    let read = |path: &Path, what: &str| std::fs::read(path).map_err(|e| file_error(what, path, e));
    let cert = read(&config.tls_cert_file, "serving certificate")?;
    let key = read(&config.tls_private_key_file, "serving key")?;
    let ca_file = &config.requestheader_client_ca_file;
    let ca = read(ca_file, "request-header CA")?;
    // The handshake only asks for a certificate; the authenticator verifies it, so a
    // certificate from another CA gets 401 rather than an opaque TLS alert.
    let tls = server::server_config(&cert, &key, &ca, true)
        .map_err(|e| file_error("serving certificate", &config.tls_cert_file, e))?;
    let front_proxy = RequestHeaderAuthenticator::from_pem(&ca, RequestHeaderConfig::default())
        .map_err(|e| file_error("request-header CA", ca_file, e))?
        .with_allowed_names(config.requestheader_allowed_names.iter().cloned());
    let authn = Union::new()
        .push(front_proxy)
        .with_anonymous(Anonymous::for_paths(PROBES));
    Ok((tls, authn))
}

fn file_error(what: &str, path: &Path, err: impl Display) -> BoxError {
    format!("{what} {}: {err}", path.display()).into()
}

// ---- Flags ---------------------------------------------------------------------------

/// The flags [`parse_flags`] reads itself.
const SERVING_FLAGS: [&str; 6] = [
    "bind-address",
    "secure-port",
    "tls-cert-file",
    "tls-private-key-file",
    "requestheader-client-ca-file",
    "requestheader-allowed-names",
];

/// The address to bind, the serving configuration, and the caller's own flags as
/// `(name, value)`.
pub type ParsedFlags = (SocketAddr, ServingConfig, Vec<(String, String)>);

/// The serving flags of a generic apiserver, as `--flag=value` or `--flag value`:
/// `--bind-address` (127.0.0.1), `--secure-port` (`default_port`), `--tls-cert-file`,
/// `--tls-private-key-file`, `--requestheader-client-ca-file` (required) and
/// `--requestheader-allowed-names` (comma-separated). `extra` names further flags the
/// caller reads from the returned map.
pub fn parse_flags(
    mut args: impl Iterator<Item = String>,
    default_port: u16,
    extra: &[&str],
) -> Result<ParsedFlags, String> {
    let (mut bind, mut port) = (IpAddr::from([127, 0, 0, 1]), default_port);
    let (mut cert, mut key, mut ca, mut names) = (None, None, None, Vec::new());
    let mut rest = Vec::new();
    while let Some(arg) = args.next() {
        let Some(flag) = arg.strip_prefix("--") else {
            return Err(format!("unexpected argument {arg:?}"));
        };
        let (flag, inline) = flag
            .split_once('=')
            .map_or((flag, None), |(f, v)| (f, Some(v)));
        if !SERVING_FLAGS.contains(&flag) && !extra.contains(&flag) {
            return Err(format!("unknown flag --{flag}"));
        }
        let value = match inline {
            Some(value) => value.to_owned(),
            None => args.next().ok_or(format!("flag --{flag} needs a value"))?,
        };
        let invalid = |e: &dyn Display| format!("invalid value {value:?} for --{flag}: {e}");
        match flag {
            "bind-address" => bind = value.parse().map_err(|e| invalid(&e))?,
            "secure-port" => port = value.parse().map_err(|e| invalid(&e))?,
            "tls-cert-file" => cert = Some(PathBuf::from(value)),
            "tls-private-key-file" => key = Some(PathBuf::from(value)),
            "requestheader-client-ca-file" => ca = Some(PathBuf::from(value)),
            "requestheader-allowed-names" => {
                let listed = value.split(',').map(str::trim).filter(|n| !n.is_empty());
                names = listed.map(str::to_owned).collect();
            }
            f if extra.contains(&f) => rest.push((f.to_owned(), value)),
            _ => return Err(format!("unknown flag --{flag}")),
        }
    }
    let required = |path: Option<PathBuf>, flag: &str| {
        path.ok_or_else(|| format!("missing required flag --{flag}"))
    };
    let config = ServingConfig {
        tls_cert_file: required(cert, "tls-cert-file")?,
        tls_private_key_file: required(key, "tls-private-key-file")?,
        requestheader_client_ca_file: required(ca, "requestheader-client-ca-file")?,
        requestheader_allowed_names: names,
    };
    Ok((SocketAddr::new(bind, port), config, rest))
}

/// Logs to stderr filtered by `RUST_LOG` (default `info`), runs `serve` on a new tokio
/// runtime until Ctrl-C; exit code 1 when it fails (the error on one line of stderr).
pub fn run_until_ctrl_c<F>(
    name: &str,
    serve: impl FnOnce(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) -> F,
) -> std::process::ExitCode
where
    F: Future<Output = Result<(), BoxError>>,
{
    let filter = tracing_subscriber::EnvFilter::try_from_default_env();
    let filter = filter.unwrap_or_else(|_| "info".into());
    let subscriber = tracing_subscriber::fmt().with_env_filter(filter);
    subscriber.with_writer(std::io::stderr).try_init().ok();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("{name}: starting the tokio runtime: {err}");
            return std::process::ExitCode::from(1);
        }
    };
    let ctrl_c = Box::pin(async {
        // Without a signal handler, serve until killed rather than stopping at once.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
        tracing::info!("shutting down");
    });
    match runtime.block_on(serve(ctrl_c)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{name}: {err}");
            std::process::ExitCode::from(1)
        }
    }
}

// ---- Responses -----------------------------------------------------------------------

/// A response with `body` and `Content-Type: content_type`.
pub fn respond(code: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut res = Response::new(Body::full(body.into()));
    *res.status_mut() = code;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        res.headers_mut().insert(CONTENT_TYPE, v);
    }
    res
}

/// `value` as `application/json`, with the trailing newline Go's `json.Encoder` writes.
pub fn json(code: StatusCode, value: &Value) -> Response<Body> {
    let mut body = serde_json::to_vec(value).unwrap_or_default();
    body.push(b'\n');
    respond(code, "application/json", body)
}

/// Plain text, as Go's `http.Error` writes it (no newline added here).
pub fn text(code: StatusCode, body: &'static str) -> Response<Body> {
    respond(code, "text/plain; charset=utf-8", body)
}

/// The first value of query parameter `key`, decoded.
pub fn query_param(query: Option<&str>, key: &str) -> Option<String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// Seconds-precision RFC 3339 in UTC, the form of `metav1.Time`.
pub fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time.max(UNIX_EPOCH)).to_string()
}

/// Parses what [`rfc3339`] writes (`YYYY-MM-DDTHH:MM:SSZ`).
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    (s.len() == 20).then(|| humantime::parse_rfc3339(s).ok())?
}

/// A response body fed frame by frame from a channel; it ends when the sender is dropped.
/// A watch stream is one of these: each event is sent as soon as it happens.
pub fn channel_body(mut rx: mpsc::Receiver<Bytes>) -> Body {
    let frames = futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|b| b.map(|b| Ok::<_, Infallible>(Frame::data(b))))
    });
    Body::new(http_body_util::StreamBody::new(frames))
}
