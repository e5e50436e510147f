//! A custom-metrics adapter in the shape of prometheus-adapter: `custom.metrics.k8s.io`
//! (`v1beta2`, `v1beta1`) and `external.metrics.k8s.io/v1beta1` behind the aggregator,
//! answering what a HorizontalPodAutoscaler asks for.
//!
//! [`api`] has the paths and documents, [`series`] the in-memory series (a scraper takes
//! a new sample every [`AdapterConfig::scrape_interval`]). The aggregator is authenticated
//! as a front proxy ([`crate::support::extension_server`]); every request and the exact
//! bytes answered are kept in a short log ([`Adapter::log`]), what `--v=8` would show.

pub mod api;
pub mod series;

use std::collections::VecDeque;
use std::future::Future;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use kube_aggregator::Body;
use kube_aggregator::authn::{ConnectionInfo, UserInfo};
use kube_aggregator::discovery::{Negotiated, etag_of, negotiate};
use kube_aggregator::transport::BackendClient;
use percent_encoding::percent_decode_str;
use tokio::net::TcpListener;

use crate::support::api_status::method_not_supported;
use crate::support::extension_server::{self, BoxError, ServingConfig, json};
use series::Series;

/// One exchange as the adapter saw it.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The authenticated user (the end user, from `X-Remote-User`).
    pub user: String,
    /// The front proxy's address: `None` in process (no socket between them).
    pub remote_addr: Option<std::net::SocketAddr>,
    /// The tenant the aggregator named in `X-Kubernetes-Cluster`, empty for none.
    pub cluster: String,
    /// The request method.
    pub method: Method,
    /// The request target exactly as received: escaped path and raw query.
    pub target: String,
    /// The status answered.
    pub status: StatusCode,
    /// The body answered, byte for byte.
    pub body: Bytes,
}

/// How many exchanges [`Adapter::log`] keeps.
pub const LOG_SIZE: usize = 512;

/// The adapter's state: its series and its recent exchanges.
#[derive(Debug, Clone)]
pub struct Adapter {
    series: Series,
    log: Arc<Mutex<VecDeque<Exchange>>>,
}

/// Serving options besides TLS and front-proxy trust.
#[derive(Debug, Clone)]
pub struct AdapterConfig {
    /// How often every series gets a new sample (prometheus-adapter relists every
    /// `--metrics-relist-interval`, 10 m; Prometheus scrapes every 15 s or so).
    pub scrape_interval: Duration,
}

impl Default for AdapterConfig {
    fn default() -> Self {
        AdapterConfig {
            scrape_interval: Duration::from_secs(15),
        }
    }
}

impl Adapter {
    /// An adapter over the sample series.
    pub fn new() -> Adapter {
        Adapter {
            series: Series::sample_data(),
            log: Arc::default(),
        }
    }

    /// The series answered from.
    pub fn series(&self) -> &Series {
        &self.series
    }

    /// The most recent exchanges, oldest first.
    pub fn log(&self) -> Vec<Exchange> {
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// Serves until `shutdown` resolves, scraping every `config.scrape_interval`.
    pub async fn serve(
        self,
        serving: &ServingConfig,
        config: AdapterConfig,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), BoxError> {
        let scraper = self.scrape_every(config.scrape_interval);
        let adapter = self;
        let handler = move |req: Request<Incoming>| {
            let adapter = adapter.clone();
            async move { adapter.handle(req).await }
        };
        let result = extension_server::serve(serving, listener, handler, shutdown).await;
        scraper.abort();
        result
    }

    /// The adapter as an in-process backend, behind the same front-proxy authentication
    /// ([`extension_server::in_process`]); the scraper runs until the returned task is
    /// aborted.
    pub fn in_process(
        &self,
        serving: &ServingConfig,
        config: AdapterConfig,
    ) -> Result<(BackendClient, tokio::task::JoinHandle<()>), BoxError> {
        let adapter = self.clone();
        let service = extension_server::in_process(serving, move |req: Request<Body>| {
            let adapter = adapter.clone();
            async move { adapter.handle(req).await }
        })?;
        Ok((service, self.scrape_every(config.scrape_interval)))
    }

    /// A new sample of every series each `interval`.
    fn scrape_every(&self, interval: Duration) -> tokio::task::JoinHandle<()> {
        let series = self.series.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(interval);
            every.tick().await;
            loop {
                every.tick().await;
                series.scrape(SystemTime::now());
            }
        })
    }

    async fn handle<B>(&self, req: Request<B>) -> Response<Body> {
        let user = req
            .extensions()
            .get::<UserInfo>()
            .map(|u| u.name.clone())
            .unwrap_or_default();
        let remote_addr = req
            .extensions()
            .get::<ConnectionInfo>()
            .and_then(|c| c.remote_addr);
        let cluster = req
            .headers()
            .get("x-kubernetes-cluster")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let method = req.method().clone();
        let target = req
            .uri()
            .path_and_query()
            .map_or("/", |pq| pq.as_str())
            .to_owned();
        let response = answer(&self.series, &req);
        // Collect the (small, complete) body so the log holds what was sent.
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        tracing::debug!(%user, %method, %target, status = %parts.status, "custom metrics request");
        {
            let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
            if log.len() == LOG_SIZE {
                log.pop_front();
            }
            log.push_back(Exchange {
                user,
                remote_addr,
                cluster,
                method,
                target,
                status: parts.status,
                body: body.clone(),
            });
        }
        Response::from_parts(parts, Body::full(body))
    }
}

impl Default for Adapter {
    fn default() -> Self {
        Adapter::new()
    }
}

/// Routes one authenticated request.
fn answer<B>(series: &Series, req: &Request<B>) -> Response<Body> {
    let path = req.uri().path();
    if req.method() != Method::GET {
        return method_not_supported("", "", req.method().as_str());
    }
    if path == "/apis" {
        let accept = req
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok());
        return match negotiate(accept) {
            Negotiated::Aggregated(v) => {
                let mut body = serde_json::to_vec(&api::aggregated(series, v.api_version()))
                    .unwrap_or_default();
                body.push(b'\n');
                let mut res =
                    extension_server::respond(StatusCode::OK, v.content_type(), body.clone());
                res.headers_mut().insert(header::ETAG, etag_of(&body));
                res.headers_mut()
                    .insert(header::VARY, http::HeaderValue::from_static("Accept"));
                res
            }
            _ => json(StatusCode::OK, &api::group_list()),
        };
    }
    // Segments percent-decoded, as Go's router sees `URL.Path`: `%2A` is `*`, `%7C` is `|`.
    let decoded: Vec<String> = path
        .trim_start_matches('/')
        .split('/')
        .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
    api::handle(series, &segments, req.uri().query()).unwrap_or_else(api::not_found)
}

/// Runs the adapter from command-line flags until Ctrl-C: the generic serving flags of
/// [`extension_server::parse_flags`] (default port 6443) and `--scrape-interval` (seconds).
pub fn main_from_args(args: impl Iterator<Item = String>) -> ExitCode {
    let (addr, serving, extra) =
        match extension_server::parse_flags(args, 6443, &["scrape-interval"]) {
            Ok(parsed) => parsed,
            Err(err) => {
                eprintln!("custom_metrics_server: {err}");
                return ExitCode::from(2);
            }
        };
    let mut config = AdapterConfig::default();
    for (flag, value) in extra {
        match value.parse::<u64>() {
            Ok(secs) if flag == "scrape-interval" && secs > 0 => {
                config.scrape_interval = Duration::from_secs(secs)
            }
            _ => {
                eprintln!("custom_metrics_server: invalid value {value:?} for --{flag}");
                return ExitCode::from(2);
            }
        }
    }
    extension_server::run_until_ctrl_c("custom_metrics_server", move |ctrl_c| async move {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| format!("binding {addr}: {e}"))?;
        tracing::info!(
            "custom.metrics.k8s.io and external.metrics.k8s.io serving on https://{addr}"
        );
        Adapter::new()
            .serve(&serving, config, listener, ctrl_c)
            .await
    })
}
