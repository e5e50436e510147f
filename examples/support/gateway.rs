//! A standalone gateway in the shape of kube-apiserver: TLS on `--secure-port`, client
//! certificates checked against `--client-ca-file`, the aggregator routing
//! `/apis/<group>/<version>` to extension servers over mTLS with the
//! `--proxy-client-cert-file` identity, APIServices read from `--apiservice-dir`, Services
//! resolved from `--service-endpoints`, and a small core API of its own.

use std::convert::Infallible;
use std::future::Future;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, Request, Response, header};
use kube_aggregator::apiservice::ApiService;
use kube_aggregator::audit::{
    AuditLayer, AuditMetrics, LogConfig, LogSink, Policy, UnionSink, WebhookSink,
};
use kube_aggregator::authn::{
    Anonymous, BearerToken, CacheTtl, ClientCas, RequestHeaderAuthenticator, RequestHeaderConfig,
    TokenFileAuthenticator, TokenReviewAuthenticator, Union, X509Authenticator,
};
use kube_aggregator::authz::{
    AlwaysAllow, AlwaysDeny, PrivilegedGroups, SubjectAccessReviewAuthorizer,
    Union as AuthorizerUnion, WebhookVersion,
};
use kube_aggregator::availability::{
    AvailabilityConfig, AvailabilityController, AvailabilityMetrics, DnsServiceResolver,
    ServiceResolver, StaticServiceResolver, proxy_certificate_warnings,
};
use kube_aggregator::discovery::DiscoveryManager;
use kube_aggregator::registry::Registry;
use kube_aggregator::reload::watch_files;
use kube_aggregator::rt::{Executor, Timer};
use kube_aggregator::server::DynamicServing;
use kube_aggregator::source::{ApiServiceEvent, ApiServiceSource, ManifestDir};
use kube_aggregator::tenant::{TenantEvent, TenantForwarding, Tenants};
#[cfg(feature = "otlp")]
use kube_aggregator::trace::TracingConfiguration;
use kube_aggregator::trace::TracingLayer;
use kube_aggregator::transport::{
    BackendClient, ClientCertificate, InMemoryTransport, RustlsTransport, Transport,
};
use kube_aggregator::webhook::WebhookMetrics;
use kube_aggregator::{Aggregator, Body, server};
use kube_aggregator_kube::kube::Client;
use kube_aggregator_kube::{
    ApiServiceWatch, KubeServiceResolver, LeaderElection, Leadership, StatusWriter,
};
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::net::TcpListener;
use tower::Layer;

use super::core_api;
use super::flags::{FlagError, GatewayOptions, load_service_endpoints};
use super::tenant_dir::{self, TenantDir};

/// A started gateway.
#[derive(Debug)]
pub struct Gateway {
    /// The APIService registry (status included).
    pub registry: Registry,
    /// The tenants of `--tenant-dir`, when given.
    pub tenants: Option<Tenants>,
    /// The address it listens on.
    pub local_addr: std::net::SocketAddr,
    /// Availability metrics.
    pub metrics: Arc<AvailabilityMetrics>,
    /// The aggregated discovery manager (its readiness is `/readyz`'s).
    pub discovery: DiscoveryManager,
}

/// A start-up failure: one line naming the flag or file.
#[derive(Debug)]
pub struct StartError(pub String);

fn read(flag: &str, path: &Path) -> Result<Vec<u8>, StartError> {
    std::fs::read(path)
        .map_err(|e| StartError(format!("--{flag}: cannot read {}: {e}", path.display())))
}

/// Starts the gateway on `listener` (or on `--bind-address:--secure-port` when `None`);
/// it serves until `shutdown` completes.
pub async fn start(
    opts: GatewayOptions,
    listener: Option<TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(Gateway, tokio::task::JoinHandle<()>), StartError> {
    start_with(opts, listener, shutdown, Vec::new()).await
}

/// As [`start`], with extension servers in the same process: each `(server name,
/// service)` serves the APIServices whose Service is `<name>.<namespace>.svc`, through an
/// [`InMemoryTransport`] presenting the `--proxy-client-cert-file` identity (so they
/// authenticate the gateway as over mTLS); every other APIService is reached over mTLS.
pub async fn start_with(
    opts: GatewayOptions,
    listener: Option<TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    in_process: Vec<(String, BackendClient)>,
) -> Result<(Gateway, tokio::task::JoinHandle<()>), StartError> {
    let cert = read("tls-cert-file", &opts.tls_cert_file)?;
    let key = read("tls-private-key-file", &opts.tls_private_key_file)?;
    let executor = Executor::tokio();
    let timer = Timer::tokio();
    // The audit backends start first: the webhook's batching task runs on `executor`.
    let audit = audit(&opts, &executor, &timer)?;
    let (tracing_layer, tracer_provider) = tracing_layer(&opts)?;
    // The webhooks' request metrics, served on `/metrics` with the aggregator's.
    let mut webhook_metrics = Vec::new();
    let (authenticator, cas) = authenticator(&opts, &executor, &timer, &mut webhook_metrics)?;
    let serving = DynamicServing::new(&cert, &key, Some(cas.clone()), opts.enable_http2)
        .map_err(|e| StartError(format!("--tls-cert-file/--tls-private-key-file: {e}")))?;
    let tls = serving.tls();

    let proxy_cert = proxy_certificate(&opts)?;
    let refused = Family::<Vec<(String, String)>, Counter>::default();
    watch_certificates(
        &opts,
        &timer,
        serving,
        cas,
        proxy_cert.clone(),
        refused.clone(),
    );

    let cluster = cluster(&opts).await?;
    let resolver = service_resolver(&opts, cluster.as_ref())?;

    // As kube-apiserver: system:masters is allowed before any configured mode is asked,
    // so a break-glass administrator never waits on a webhook that is down.
    let mut authorizer =
        AuthorizerUnion::new().push("privileged-groups", PrivilegedGroups::system_masters());
    for mode in &opts.authorization_mode {
        authorizer = match mode.as_str() {
            "AlwaysAllow" => authorizer.push(mode.clone(), AlwaysAllow),
            "AlwaysDeny" => authorizer.push(mode.clone(), AlwaysDeny),
            "Webhook" => {
                let Some(path) = &opts.authorization_webhook_config_file else {
                    return Err(StartError("--authorization-webhook-config-file: required with --authorization-mode=Webhook".into()));
                };
                let version: WebhookVersion = opts
                    .authorization_webhook_version
                    .parse()
                    .map_err(|e| StartError(format!("--authorization-webhook-version: {e}")))?;
                let sar = SubjectAccessReviewAuthorizer::from_kubeconfig(
                    path,
                    executor.clone(),
                    timer.clone(),
                )
                .map_err(|e| StartError(format!("--authorization-webhook-config-file: {e}")))?
                .authorized_ttl(opts.authorization_webhook_cache_authorized_ttl)
                .unauthorized_ttl(opts.authorization_webhook_cache_unauthorized_ttl)
                .version(version);
                webhook_metrics.push(sar.metrics().clone());
                authorizer.push(mode.clone(), sar)
            }
            other => {
                return Err(StartError(format!(
                    "--authorization-mode: unsupported mode {other:?}"
                )));
            }
        };
    }

    // kube-apiserver's filter chain around the aggregator, in its order
    // (docs/upstream-behaviour.md §6; `Aggregator::builder` documents each step), and
    // the worker that feeds it: the APIServices of --apiservice-dir, their availability
    // checks, and the discovery and OpenAPI documents fetched off the request path.
    let network = RustlsTransport::new(proxy_cert.clone(), executor.clone(), timer.clone());
    let (transport, resolver): (Arc<dyn Transport>, Arc<dyn ServiceResolver>) =
        if in_process.is_empty() {
            (Arc::new(network), resolver)
        } else {
            let memory = InMemoryTransport::new()
                .client_certificate(proxy_cert)
                .fallback(network);
            for (server_name, service) in in_process {
                memory.insert(server_name, service);
            }
            (
                Arc::new(memory.clone()),
                Arc::new(memory.resolver().or(resolver)),
            )
        };
    let mut builder = Aggregator::builder(transport)
        .resolver(resolver)
        .authenticator(authenticator)
        .authorizer(authorizer)
        .runtime(executor, timer.clone())
        .availability(AvailabilityConfig {
            resync_period: opts.availability_resync_period,
            probe_timeout: opts.discovery_check_timeout,
            soft_failure_threshold: opts.availability_soft_failure_threshold,
            degraded_recheck: opts.availability_degraded_recheck,
            ..AvailabilityConfig::default()
        })
        .outlier_detection(opts.outlier_detection.clone())
        .request_timeout(opts.request_timeout)
        .max_requests_inflight(
            opts.max_requests_inflight,
            opts.max_mutating_requests_inflight,
            opts.max_requests_inflight_per_apiservice,
        );
    let initial = match &opts.apiservice_dir {
        Some(dir) => {
            // Start-up is strict: a bad manifest or an invalid APIService refuses to start.
            // Later edits are applied leniently: bad ones are logged and the last good
            // state stays.
            let initial =
                ManifestDir::load(dir).map_err(|e| StartError(format!("--apiservice-dir: {e}")))?;
            builder = builder.source(ManifestDir::new(
                dir.clone(),
                timer,
                opts.apiservice_dir_poll_interval,
            ));
            Some((dir, initial))
        }
        None => {
            // The cluster's APIServices, as kube-apiserver's aggregator watches them.
            if let Some(client) = &cluster {
                builder = builder.source(ApiServiceWatch::new(client.clone()));
            }
            None
        }
    };
    // Tenants under /clusters/<name>/, one subdirectory of manifests each, checked as
    // strictly at start as --apiservice-dir.
    let tenants = match &opts.tenant_dir {
        Some(dir) => {
            let initial =
                tenant_dir::load(dir).map_err(|e| StartError(format!("--tenant-dir: {e}")))?;
            let forwarding = match opts.tenant_forwarding.as_str() {
                "path-prefix" => TenantForwarding::PathPrefix,
                _ => TenantForwarding::Header,
            };
            builder = builder.tenants(forwarding).tenant_source(TenantDir::new(
                dir.clone(),
                opts.apiservice_dir_poll_interval,
                initial.clone(),
            ));
            Some(initial)
        }
        None => None,
    };

    if let Some(layer) = audit {
        builder = builder.audit_layer(layer);
    }
    builder = builder.tracing(tracing_layer);
    let (aggregator, worker) = builder.build().map_err(|e| StartError(e.to_string()))?;
    if let Some((dir, initial)) = initial {
        aggregator
            .registry()
            .apply(ApiServiceEvent::Resynced(initial))
            .map_err(|e| StartError(format!("--apiservice-dir: {}: {e}", dir.display())))?;
    }
    if let (Some(initial), Some(mounted)) = (tenants, aggregator.tenants()) {
        mounted
            .apply(TenantEvent::Resynced(initial))
            .map_err(|e| StartError(format!("--tenant-dir: {e}")))?;
    }
    tokio::spawn(worker);
    // Where the APIServices come from the cluster, their status goes back to it: written
    // by the replica holding the Lease (--leader-elect), or by this one alone.
    let status = match (&cluster, &opts.apiservice_dir) {
        (Some(client), None) => Some(status_writer(&opts, client, aggregator.registry())?),
        _ => None,
    };

    // The registry `/metrics` encodes: the aggregator's metrics (requests, availability,
    // audit) beside the gateway's own.
    let metrics = aggregator.metrics().clone();
    let mut exposition = prometheus_client::registry::Registry::default();
    aggregator.register_metrics(&mut exposition);
    for webhook in &webhook_metrics {
        webhook.register(&mut exposition);
    }
    exposition.register(
        "certificate_reload_refused",
        "Counter of changed certificate and CA files that were refused (the previous content stays in use), by flag.",
        refused,
    );
    let exposition = Arc::new(exposition);
    let discovery = aggregator.discovery().clone();
    let inner_discovery = discovery.clone();
    let inner = tower::service_fn(move |req: Request<Body>| {
        let exposition = exposition.clone();
        let ready = inner_discovery.has_synced();
        async move { Ok::<_, Infallible>(local(req, &exposition, ready)) }
    });
    let service = aggregator.layer(inner);
    let registry = aggregator.registry().clone();
    let tenants = aggregator.tenants().cloned();

    let listener = match listener {
        Some(l) => l,
        None => TcpListener::bind(opts.listen_addr()).await.map_err(|e| {
            StartError(format!(
                "--secure-port: cannot listen on {}: {e}",
                opts.listen_addr()
            ))
        })?,
    };
    let local_addr = listener
        .local_addr()
        .map_err(|e| StartError(e.to_string()))?;
    tracing::info!(%local_addr, "serving securely");
    let mut serving = server::ServeConfig::default();
    if opts.http2_max_streams_per_connection > 0 {
        serving = serving.http2_max_concurrent_streams(opts.http2_max_streams_per_connection);
    }
    let serve = server::serve_tls_with(listener, tls, service, shutdown, serving);
    let handle = tokio::spawn(async move {
        serve.await;
        // The writer and the candidacy end with the gateway: another replica takes over.
        drop(status);
        // The spans still batched are sent before the gateway ends.
        if let Some(provider) = tracer_provider {
            let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        }
    });
    Ok((
        Gateway {
            registry,
            tenants,
            local_addr,
            metrics,
            discovery,
        },
        handle,
    ))
}

/// The proxy client certificate of `--proxy-client-cert-file`/`--proxy-client-key-file`,
/// or none.
fn proxy_certificate(opts: &GatewayOptions) -> Result<ClientCertificate, StartError> {
    match (&opts.proxy_client_cert_file, &opts.proxy_client_key_file) {
        (Some(c), Some(k)) => ClientCertificate::from_pem(
            &read("proxy-client-cert-file", c)?,
            &read("proxy-client-key-file", k)?,
        )
        .map_err(|e| {
            StartError(format!(
                "--proxy-client-cert-file/--proxy-client-key-file: {e}"
            ))
        }),
        (None, None) => Ok(ClientCertificate::none()),
        _ => Err(StartError(
            "--proxy-client-cert-file and --proxy-client-key-file must be given together".into(),
        )),
    }
}

/// The cluster the gateway watches: `--kubeconfig`, or, in a pod, its service account
/// (in-cluster configuration); none otherwise.
async fn cluster(opts: &GatewayOptions) -> Result<Option<Client>, StartError> {
    use kube_aggregator_kube::kube::Config;
    use kube_aggregator_kube::kube::config::{KubeConfigOptions, Kubeconfig};
    let config = match &opts.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .map_err(|e| StartError(format!("--kubeconfig: {}: {e}", path.display())))?;
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| StartError(format!("--kubeconfig: {}: {e}", path.display())))?
        }
        None if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() => {
            Config::incluster().map_err(|e| StartError(format!("in-cluster configuration: {e}")))?
        }
        None => return Ok(None),
    };
    Client::try_from(config)
        .map(Some)
        .map_err(|e| StartError(format!("Kubernetes client: {e}")))
}

/// The status writer of the cluster's APIServices and, with `--leader-elect`, the
/// candidacy it writes under (both stop when dropped).
fn status_writer(
    opts: &GatewayOptions,
    client: &Client,
    registry: &kube_aggregator::registry::Registry,
) -> Result<(StatusWriter, Option<Leadership>), StartError> {
    if !opts.leader_elect {
        // Always leading: a channel without a sender keeps its value.
        let writer = StatusWriter::spawn(
            client.clone(),
            registry,
            tokio::sync::watch::channel(true).1,
        );
        return Ok((writer, None));
    }
    let namespace = if opts.leader_elect_resource_namespace.is_empty() {
        std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
            .map(|n| n.trim().to_owned())
            .unwrap_or_else(|_| "kube-system".to_owned())
    } else {
        opts.leader_elect_resource_namespace.clone()
    };
    let leadership = LeaderElection::new(
        client.clone(),
        &namespace,
        &opts.leader_elect_resource_name,
        kube_aggregator_kube::default_identity(),
    )
    .timing(opts.leader_elect_timing)
    .spawn()
    .map_err(|e| StartError(format!("--leader-elect: {e}")))?;
    let writer = StatusWriter::spawn(client.clone(), registry, leadership.leading());
    Ok((writer, Some(leadership)))
}

/// Where Services live: `--service-endpoints`; else the cluster's Services and
/// EndpointSlices (the ClusterIP, or a ready endpoint with
/// `--enable-aggregator-routing`); else the cluster's DNS
/// (`<name>.<namespace>.svc.<--cluster-domain>`, through `/etc/resolv.conf`'s name
/// servers).
fn service_resolver(
    opts: &GatewayOptions,
    cluster: Option<&Client>,
) -> Result<Arc<dyn ServiceResolver>, StartError> {
    let Some(path) = &opts.service_endpoints else {
        if let Some(client) = cluster {
            return Ok(Arc::new(if opts.enable_aggregator_routing {
                KubeServiceResolver::endpoint_slices(client.clone())
            } else {
                KubeServiceResolver::cluster_ip(client.clone())
            }));
        }
        let dns = DnsServiceResolver::system()
            .map_err(|e| StartError(format!("no --service-endpoints, and {e}")))?;
        return Ok(Arc::new(dns.cluster_domain(&opts.cluster_domain)));
    };
    let mut resolver = StaticServiceResolver::new();
    for (i, ep) in load_service_endpoints(path)
        .map_err(|e| StartError(format!("--service-endpoints: {e}")))?
        .iter()
        .enumerate()
    {
        resolver
            .insert(&ep.namespace, &ep.name, i32::from(ep.port), &ep.address)
            .map_err(|e| {
                StartError(format!(
                    "--service-endpoints: {}: entry {i}: {e}",
                    path.display()
                ))
            })?;
    }
    Ok(Arc::new(resolver))
}

/// The APIServices of the cluster: the first complete list of a watch (within 30 s).
async fn listed_apiservices(client: &Client) -> Result<Vec<ApiService>, StartError> {
    let mut watch = ApiServiceWatch::new(client.clone());
    let listed = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match watch.next_event().await {
                Some(ApiServiceEvent::Resynced(all)) => return Ok(all),
                Some(_) => continue,
                None => return Err(StartError("the APIService watch ended".into())),
            }
        }
    });
    listed
        .await
        .map_err(|_| StartError("no list of the cluster's APIServices within 30s".into()))?
}

/// The preflight check (`gateway check` with the gateway's usual flags): every
/// APIService of `--apiservice-dir` checked once with the real certificates, as the
/// availability controller checks it, and the proxy client certificate read for the
/// mistakes that make extension servers refuse it. Returns the report, one line per
/// APIService (`OK` or `FAIL`, the cause's name and the message that says what to
/// change) after any warning, and whether every APIService passed.
pub async fn check(opts: &GatewayOptions) -> Result<(String, bool), StartError> {
    use std::fmt::Write as _;
    let timer = Timer::tokio();
    let registry = Registry::new(RustlsTransport::new(
        proxy_certificate(opts)?,
        Executor::tokio(),
        timer.clone(),
    ));
    let cluster = cluster(opts).await?;
    let apiservices = match (&opts.apiservice_dir, &cluster) {
        (Some(dir), _) => {
            ManifestDir::load(dir).map_err(|e| StartError(format!("--apiservice-dir: {e}")))?
        }
        // The cluster's APIServices as its first list gives them.
        (None, Some(client)) => listed_apiservices(client).await?,
        (None, None) => Vec::new(),
    };
    registry
        .apply(ApiServiceEvent::Resynced(apiservices))
        .map_err(|e| StartError(format!("APIServices: {e}")))?;
    let controller = AvailabilityController::new(
        registry,
        service_resolver(opts, cluster.as_ref())?,
        timer,
        AvailabilityConfig {
            probe_timeout: opts.discovery_check_timeout,
            ..AvailabilityConfig::default()
        },
        Arc::new(AvailabilityMetrics::default()),
    );
    let mut report = String::new();
    match &opts.proxy_client_cert_file {
        Some(path) => {
            let pem = read("proxy-client-cert-file", path)?;
            let front_proxy_cas = match &opts.requestheader_client_ca_file {
                Some(path) => Some(read("requestheader-client-ca-file", path)?),
                None => None,
            };
            for w in proxy_certificate_warnings(
                &pem,
                front_proxy_cas.as_deref(),
                std::time::SystemTime::now(),
            ) {
                let _ = writeln!(report, "warning: --proxy-client-cert-file: {w}");
            }
        }
        None => {
            let _ = writeln!(
                report,
                "warning: no --proxy-client-cert-file: extension servers cannot tell the aggregator's requests from anyone's, and refuse the identities it forwards"
            );
        }
    }
    let results = controller.check_once().await;
    let passed = results.iter().filter(|(_, r)| r.is_ok()).count();
    for (name, result) in &results {
        let _ = match result {
            Ok(()) => writeln!(report, "OK    {name}"),
            Err(cause) => writeln!(report, "FAIL  {name}: {}: {cause}", cause.name()),
        };
    }
    let _ = writeln!(report, "{passed} of {} APIServices passed", results.len());
    Ok((report, passed == results.len()))
}

/// Installs the new contents of a watched file (or pair), or says why not.
type ApplyFiles = Box<dyn Fn(&[Vec<u8>]) -> Result<(), String> + Send>;

/// Watches the serving certificate and key, each CA file and the proxy client certificate
/// every `--certificate-reload-interval`, each on its own as kube-apiserver's dynamic
/// certificate controllers do: a changed file is loaded without a restart (new handshakes
/// and new backend connections use it; open ones keep theirs); a file that does not load
/// (a certificate written before its key, garbage in a CA file, a CA bundle that would
/// let user certificates act as the front proxy) is logged with its flag, counted in
/// `certificate_reload_refused_total{flag}`, and only its own last good content stays.
fn watch_certificates(
    opts: &GatewayOptions,
    timer: &Timer,
    serving: DynamicServing,
    cas: ClientCas,
    proxy_cert: ClientCertificate,
    refused: Family<Vec<(String, String)>, Counter>,
) {
    let interval = opts.certificate_reload_interval;
    // Each watcher installs its own file, or counts and reports the refusal.
    let watch = |flag: &'static str, files: Vec<std::path::PathBuf>, apply: ApplyFiles| {
        let refused = refused.clone();
        tokio::spawn(watch_files(
            files,
            timer.clone(),
            interval,
            move |f: &[Vec<u8>]| {
                apply(f).map_err(|e| {
                    refused
                        .get_or_create(&vec![("flag".to_owned(), flag.to_owned())])
                        .inc();
                    format!("{flag}: {e}")
                })
            },
        ));
    };
    let pair_serving = serving.clone();
    watch(
        "--tls-cert-file/--tls-private-key-file",
        vec![
            opts.tls_cert_file.clone(),
            opts.tls_private_key_file.clone(),
        ],
        Box::new(move |f| {
            pair_serving
                .set_pair(&f[0], &f[1])
                .map_err(|e| e.to_string())
        }),
    );
    if let Some(path) = &opts.client_ca_file {
        let (cas, serving) = (cas.clone(), serving.clone());
        watch(
            "--client-ca-file",
            vec![path.clone()],
            Box::new(move |f| {
                cas.set_client_ca_pem(&f[0]).map_err(|e| e.to_string())?;
                // The handshake offers the new CA's name from now on.
                serving.refresh_hints().map_err(|e| e.to_string())
            }),
        );
    }
    if let Some(path) = &opts.requestheader_client_ca_file {
        let (cas, serving) = (cas.clone(), serving.clone());
        watch(
            "--requestheader-client-ca-file",
            vec![path.clone()],
            Box::new(move |f| {
                cas.set_requestheader_ca_pem(&f[0])
                    .map_err(|e| e.to_string())?;
                serving.refresh_hints().map_err(|e| e.to_string())
            }),
        );
    }
    if let (Some(cert), Some(key)) = (
        opts.proxy_client_cert_file.clone(),
        opts.proxy_client_key_file.clone(),
    ) {
        watch(
            "--proxy-client-cert-file/--proxy-client-key-file",
            vec![cert, key],
            Box::new(move |f| proxy_cert.set_pem(&f[0], &f[1]).map_err(|e| e.to_string())),
        );
    }
}

/// The authentication chain in kube-apiserver's order (docs/upstream-behaviour.md §7.1): request-header,
/// x509, static tokens, the TokenReview webhook, all under fail-on-error, then anonymous.
/// Also returns the client CAs, which are reloaded.
/// The authenticators the flags ask for; a TokenReview webhook's metrics go to `metrics`.
fn authenticator(
    opts: &GatewayOptions,
    executor: &Executor,
    timer: &Timer,
    metrics: &mut Vec<Arc<WebhookMetrics>>,
) -> Result<(Union, ClientCas), StartError> {
    let mut union = Union::new();
    let x509 = match &opts.client_ca_file {
        Some(path) => {
            let pem = read("client-ca-file", path)?;
            let x509 = X509Authenticator::from_pem(&pem)
                .map_err(|e| StartError(format!("--client-ca-file: {}: {e}", path.display())))?;
            Some(x509)
        }
        None => None,
    };
    let mut front_proxy = None;
    if let Some(path) = &opts.requestheader_client_ca_file {
        let pem = read("requestheader-client-ca-file", path)?;
        let config = RequestHeaderConfig {
            username_headers: opts.requestheader_username_headers.clone(),
            uid_headers: opts.requestheader_uid_headers.clone(),
            group_headers: opts.requestheader_group_headers.clone(),
            extra_header_prefixes: opts.requestheader_extra_headers_prefix.clone(),
        };
        let authenticator = RequestHeaderAuthenticator::from_pem(&pem, config)
            .map_err(|e| {
                StartError(format!(
                    "--requestheader-client-ca-file: {}: {e}",
                    path.display()
                ))
            })?
            .with_allowed_names(opts.requestheader_allowed_names.iter().cloned());
        union = union.push(authenticator.clone());
        front_proxy = Some(authenticator);
    }
    // A CA trusted for both user certificates and the front proxy, with no allowed names,
    // would let any user assert any identity (known failure B06): refused at start-up
    // here, and on every reload by `ClientCas`.
    let cas = ClientCas::new(x509.clone(), front_proxy)
        .map_err(|e| StartError(format!("--requestheader-allowed-names: {e}")))?;
    if let Some(x509) = x509 {
        union = union.push(x509);
    }
    if let Some(path) = &opts.token_auth_file {
        let tokens = TokenFileAuthenticator::from_file(path)
            .map_err(|e| StartError(format!("--token-auth-file: {e}")))?;
        union = union.push(BearerToken::new(tokens));
    }
    if let Some(path) = &opts.authentication_token_webhook_config_file {
        let ttl = CacheTtl::both(opts.authentication_token_webhook_cache_ttl);
        let webhook = TokenReviewAuthenticator::from_kubeconfig(
            path,
            executor.clone(),
            timer.clone(),
            ttl,
        )
        .map_err(|e| StartError(format!("--authentication-token-webhook-config-file: {e}")))?;
        metrics.push(webhook.metrics().clone());
        union = union.push(BearerToken::new(webhook));
    }
    if opts.anonymous_auth {
        union = union.with_anonymous(Anonymous::new());
    }
    Ok((union, cas))
}

/// The gateway's own handlers: `/metrics`, `/readyz` (which waits for the discovery
/// manager's first pass, as kube-apiserver's `apiservice-discovery-controller` post-start
/// hook), then the core API (health included).
fn local(
    req: Request<Body>,
    exposition: &prometheus_client::registry::Registry,
    discovery_synced: bool,
) -> Response<Body> {
    let (parts, _body) = req.into_parts();
    if !discovery_synced && matches!(parts.uri.path(), "/readyz" | "/readyz/") {
        let body = "[+]ping ok\n[-]poststarthook/apiservice-discovery-controller failed: reason withheld\nreadyz check failed";
        return kube_aggregator::status::plain_text_error(
            http::StatusCode::INTERNAL_SERVER_ERROR,
            body,
        );
    }
    if parts.uri.path() == "/metrics" {
        // kube-apiserver's format: Prometheus text 0.0.4 (see `AvailabilityMetrics`).
        let mut text = String::new();
        let _ = prometheus_text::encode(&mut text, exposition);
        let mut res = Response::new(Body::full(text));
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(prometheus_text::CONTENT_TYPE),
        );
        return res;
    }
    core_api::handle(&parts).map(Body::new)
}

/// `main` of the gateway example: parses flags, starts, serves until Ctrl-C.
///
/// `gateway check <flags>` runs the preflight check instead ([`check`]): it prints the
/// report and exits 0 when every APIService passed, 1 when one failed, 2 when the flags
/// or files are wrong.
pub fn main_from_args(args: impl Iterator<Item = String>) -> ExitCode {
    let mut args = args.peekable();
    let checking = args.next_if(|a| a == "check").is_some();
    let opts = match GatewayOptions::parse(args) {
        Ok(o) => o,
        Err(FlagError::Help) => {
            print!("{}", super::flags::usage());
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("gateway: {e}\nRun 'gateway --help' for usage.");
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    init_logging(opts.v);
    // On one CPU (a container limited to one, or `taskset`), a work-stealing pool has
    // nobody to steal from: the single-threaded scheduler does the same work without
    // cross-thread wake-ups. `TOKIO_WORKER_THREADS` still sizes the pool otherwise.
    let one_cpu = std::thread::available_parallelism().is_ok_and(|n| n.get() == 1);
    let mut builder = if one_cpu {
        let mut builder = tokio::runtime::Builder::new_current_thread();
        // --yield-before-park: before the runtime sleeps, let whatever else is runnable
        // on this CPU run first (say, a backend pinned beside the gateway). Without it
        // the gateway sleeps between short bursts, and the kernel's scheduler then lets
        // each wake-up preempt that process (about once per ten requests in one trace);
        // after a yield it is still runnable, so the packets that arrive meanwhile do
        // not wake it and it takes them in one go when the other process sleeps. Alone
        // on the CPU the yield returns at once, for 0.6-2.5% more CPU per request, so it
        // is off unless asked for. Figures: benches/load/README.md, "yielding before the
        // runtime sleeps".
        if opts.yield_before_park {
            builder.on_thread_park(std::thread::yield_now);
        }
        builder
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("gateway: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    if checking {
        return rt.block_on(async move {
            match check(&opts).await {
                Ok((report, ok)) => {
                    print!("{report}");
                    ExitCode::from(if ok { 0 } else { 1 })
                }
                Err(StartError(line)) => {
                    eprintln!("gateway check: {line}");
                    ExitCode::from(2)
                }
            }
        });
    }
    rt.block_on(async move {
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
            tracing::info!("shutting down");
        };
        match start(opts, None, shutdown).await {
            Ok((_, handle)) => {
                let _ = handle.await;
                ExitCode::SUCCESS
            }
            Err(StartError(line)) => {
                eprintln!("gateway: {line}");
                ExitCode::from(2)
            }
        }
    })
}

/// Logging to stderr; `--v` as kube-apiserver's verbosity (0 info, 1–4 debug, 5+ trace),
/// overridden by `RUST_LOG`.
pub fn init_logging(v: u8) {
    let level = match v {
        0 => "info",
        1..=4 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    use std::io::IsTerminal as _;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// The tracer provider of `--tracing-config-file` (kube-apiserver's: OTLP over gRPC,
/// `service.name` `apiserver`), and the layer tracing with it.
#[cfg(feature = "otlp")]
fn tracing_layer(
    opts: &GatewayOptions,
) -> Result<
    (
        TracingLayer,
        Option<opentelemetry_sdk::trace::SdkTracerProvider>,
    ),
    StartError,
> {
    use opentelemetry::trace::TracerProvider as _;

    let Some(path) = &opts.tracing_config_file else {
        return Ok((TracingLayer::off(), None));
    };
    let config = TracingConfiguration::from_file(path)
        .map_err(|e| StartError(format!("--tracing-config-file: {e}")))?;
    let instance = format!("kube-aggregator-{}", std::process::id());
    let provider = config
        .tracer_provider("apiserver", &instance)
        .map_err(|e| StartError(format!("--tracing-config-file: {e}")))?;
    tracing::info!(
        endpoint = config.endpoint(),
        sampling_rate_per_million = config.sampling_rate_per_million.unwrap_or(0),
        "tracing requests"
    );
    let layer = TracingLayer::new(provider.tracer("k8s.io/kube-aggregator"));
    Ok((layer, Some(provider)))
}

/// Without the `otlp` feature nothing can export traces: `--tracing-config-file` is
/// refused rather than ignored.
#[cfg(not(feature = "otlp"))]
fn tracing_layer(opts: &GatewayOptions) -> Result<(TracingLayer, Option<Never>), StartError> {
    match &opts.tracing_config_file {
        None => Ok((TracingLayer::off(), None)),
        Some(_) => Err(StartError(
            "--tracing-config-file: this gateway was built without the otlp feature (cargo build --features otlp)".into(),
        )),
    }
}

/// No tracer provider: what the gateway keeps without the `otlp` feature.
#[cfg(not(feature = "otlp"))]
enum Never {}

#[cfg(not(feature = "otlp"))]
impl Never {
    fn shutdown(self) {}
}

/// The audit policy and the backends of `--audit-policy-file`, `--audit-log-*` and
/// `--audit-webhook-*`, as kube-apiserver pairs them: nothing is audited without a
/// policy and a backend; with both backends, every event goes to each.
fn audit(
    opts: &GatewayOptions,
    executor: &Executor,
    timer: &Timer,
) -> Result<Option<AuditLayer>, StartError> {
    let backends = opts.audit_log_path.is_some() || opts.audit_webhook_config_file.is_some();
    let Some(path) = &opts.audit_policy_file else {
        if backends {
            tracing::info!("No audit policy file provided, no events will be recorded");
        }
        return Ok(None);
    };
    let policy =
        Policy::from_file(path).map_err(|e| StartError(format!("--audit-policy-file: {e}")))?;
    if !backends {
        tracing::warn!(
            "--audit-policy-file is set but no audit backend (--audit-log-path, --audit-webhook-config-file): no events will be recorded"
        );
        return Ok(None);
    }
    let metrics = Arc::new(AuditMetrics::default());
    let mut sinks = UnionSink::new();
    if let Some(path) = &opts.audit_log_path {
        let format = opts
            .audit_log_format
            .parse()
            .map_err(|e| StartError(format!("--audit-log-format: {e}")))?;
        let config = LogConfig {
            path: path.clone(),
            max_size: opts.audit_log_maxsize.saturating_mul(1024 * 1024),
            max_backups: opts.audit_log_maxbackup,
            max_age_days: opts.audit_log_maxage,
            format,
        };
        let log = LogSink::open_counted(config, metrics.clone())
            .map_err(|e| StartError(format!("--audit-log-path: {e}")))?;
        sinks = sinks.push(log);
    }
    if let Some(path) = &opts.audit_webhook_config_file {
        let webhook = WebhookSink::from_kubeconfig(
            path,
            &opts.audit_webhook,
            executor.clone(),
            timer.clone(),
            metrics.clone(),
        )
        .map_err(|e| StartError(format!("--audit-webhook-config-file: {e}")))?;
        sinks = sinks.push(webhook);
    }
    Ok(Some(AuditLayer::new(policy, sinks).with_metrics(metrics)))
}
