//! The demo: a PKI, the sample metrics server, the custom-metrics adapter (in process by
//! default, over loopback mTLS on request), the service-catalog server and the gateway on
//! free loopback ports with two tenants, and a kubeconfig for `kubectl`. Also used by the
//! end-to-end tests.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::flags::GatewayOptions;
use super::gateway::{self, Gateway};
use super::metrics_server::{self, MetricsServerConfig};
use super::pki::{Ca, Leaf};
use super::policy;
use super::{custom_metrics, demo_servers};

/// The APIService the demo registers.
pub const APISERVICE: &str = "v1beta1.metrics.k8s.io";

/// The demo's tenants, under `/clusters/<name>`, and the APIServices each has: team-a
/// the metrics APIs (metrics-server's and the adapter's), team-b the service catalog.
pub const TENANTS: [(&str, &[&str]); 2] = [
    (
        "team-a",
        &[
            APISERVICE,
            super::demo_servers::METRICS_APISERVICES[0],
            super::demo_servers::METRICS_APISERVICES[1],
            super::demo_servers::METRICS_APISERVICES[2],
        ],
    ),
    ("team-b", &[super::demo_servers::CATALOG_APISERVICE]),
];

/// The demo's audit policy: who did what, for every request but the health checks; what
/// was asked of the access reviews (`kubectl auth can-i`), and what `kubectl auth whoami`
/// was told.
pub const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
rules:
# Probes are not worth a line.
- level: None
  nonResourceURLs: [/healthz*, /livez*, /readyz*]
- level: Request
  resources: [{group: authorization.k8s.io}]
- level: RequestResponse
  resources: [{group: authentication.k8s.io}]
- level: Metadata
";

/// How the demo runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct DemoOptions<'a> {
    /// The custom-metrics adapter on a loopback port behind mTLS, instead of in the
    /// gateway's process through the in-memory transport.
    pub custom_metrics_over_mtls: bool,
    /// More APIServices beside the demo's.
    pub extra: &'a [ExtraApiService],
    /// More gateway flags, after the demo's (a flag given twice takes its last value).
    pub extra_args: &'a [String],
}

/// A running demo.
#[derive(Debug)]
pub struct Demo {
    /// Absolute path of the kubeconfig.
    pub kubeconfig: PathBuf,
    /// The gateway.
    pub gateway: Gateway,
    /// The metrics server's address.
    pub metrics_addr: std::net::SocketAddr,
    /// The custom-metrics adapter (its series and request log).
    pub adapter: custom_metrics::Adapter,
    /// The service-catalog CRUD server (its store).
    pub crud: super::crud::Crud,
    /// True when the adapter runs behind loopback mTLS, false when in process.
    pub custom_metrics_over_mtls: bool,
    /// The gateway's command-line flags.
    pub gateway_args: Vec<String>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Demo {
    /// Stops both servers and waits for them.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

fn write(path: &Path, contents: &str) -> Result<(), String> {
    std::fs::write(path, contents).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// What [`write_cluster_files`] generated and keeps in memory for the caller.
#[derive(Debug)]
pub struct ClusterFiles {
    /// Signs users' client certificates and the serving certificates.
    pub cluster_ca: Ca,
    /// The admin user's client certificate.
    pub admin: Leaf,
    /// The policy webhook's serving certificate.
    pub policy: Leaf,
    /// Signs the front proxy's client certificate (the aggregator's identity towards
    /// extension servers).
    pub front_proxy_ca: Ca,
}

/// Writes the PKI and configuration a gateway in front of the sample metrics server needs,
/// under `dir` (created): three trust domains as in a cluster (users and serving
/// certificates; the front proxy, the aggregator's identity towards extension servers;
/// the extension server's serving certificate, given to the APIService as caBundle), the
/// `v1beta1.metrics.k8s.io` APIService manifest, the service-endpoints file pointing at
/// `metrics_addr`, and the SubjectAccessReview webhook kubeconfig for `policy_addr`.
/// Files: `ca.crt`, `front-proxy-ca.crt`, `service-ca.crt`, `gateway.{crt,key}`,
/// `admin.{crt,key}`, `policy.{crt,key}`, `front-proxy-client.{crt,key}`,
/// `metrics-server.{crt,key}`, `apiservices/metrics.k8s.io.yaml`,
/// `service-endpoints.yaml`, `authz-webhook.kubeconfig`.
pub fn write_cluster_files(
    dir: &Path,
    name_prefix: &str,
    admin: (&str, &[&str]),
    metrics_addr: &str,
    policy_addr: &str,
) -> Result<ClusterFiles, String> {
    std::fs::create_dir_all(dir.join("apiservices"))
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let p = |name: &str| dir.join(name);
    let cluster_ca = Ca::new(&format!("{name_prefix}-ca"));
    let front_proxy_ca = Ca::new(&format!("{name_prefix}-front-proxy-ca"));
    let service_ca = Ca::new(&format!("{name_prefix}-service-ca"));
    let serving = cluster_ca.server(
        &format!("{name_prefix}-gateway"),
        &["127.0.0.1", "localhost"],
    );
    let admin = cluster_ca.client(admin.0, admin.1);
    let policy_serving = cluster_ca.server(&format!("{name_prefix}-policy"), &["127.0.0.1"]);
    let proxy_client = front_proxy_ca.client("front-proxy-client", &[]);
    let metrics_serving = service_ca.server(
        "metrics-server.kube-system.svc",
        &["metrics-server.kube-system.svc", "127.0.0.1"],
    );
    for (name, pem) in [
        ("ca.crt", &cluster_ca.cert_pem),
        ("front-proxy-ca.crt", &front_proxy_ca.cert_pem),
        ("service-ca.crt", &service_ca.cert_pem),
        ("gateway.crt", &serving.cert_pem),
        ("gateway.key", &serving.key_pem),
        ("admin.crt", &admin.cert_pem),
        ("admin.key", &admin.key_pem),
        ("policy.crt", &policy_serving.cert_pem),
        ("policy.key", &policy_serving.key_pem),
        ("front-proxy-client.crt", &proxy_client.cert_pem),
        ("front-proxy-client.key", &proxy_client.key_pem),
        ("metrics-server.crt", &metrics_serving.cert_pem),
        ("metrics-server.key", &metrics_serving.key_pem),
    ] {
        write(&p(name), pem)?;
    }
    write(
        &p("apiservices/metrics.k8s.io.yaml"),
        &format!(
            "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {APISERVICE}\n  labels:\n    k8s-app: metrics-server\nspec:\n  service:\n    namespace: kube-system\n    name: metrics-server\n    port: 443\n  group: metrics.k8s.io\n  version: v1beta1\n  caBundle: {}\n  groupPriorityMinimum: 100\n  versionPriority: 100\n",
            STANDARD.encode(&service_ca.cert_pem)
        ),
    )?;
    write(
        &p("service-endpoints.yaml"),
        &format!(
            "- namespace: kube-system\n  name: metrics-server\n  port: 443\n  address: \"{metrics_addr}\"\n"
        ),
    )?;
    write(
        &p("authz-webhook.kubeconfig"),
        &policy::webhook_kubeconfig(
            &format!("https://{policy_addr}/authorize"),
            cluster_ca.cert_pem.as_bytes(),
        ),
    )?;
    Ok(ClusterFiles {
        cluster_ca,
        admin,
        policy: policy_serving,
        front_proxy_ca,
    })
}

/// One more APIService for [`start_with`]: its manifest (YAML) and where its Service is.
#[derive(Debug)]
pub struct ExtraApiService {
    /// File name under `apiservices/`.
    pub file: String,
    /// The APIService manifest.
    pub manifest: String,
    /// A `service-endpoints.yaml` entry for its Service (YAML list item).
    pub endpoint: String,
}

/// Generates everything under `dir` and starts the servers, the adapter in process;
/// returns once every APIService (the tenants' included) is `Available` (or fails after
/// `ready_timeout`).
pub async fn start(dir: &Path, ready_timeout: Duration) -> Result<Demo, String> {
    start_with_options(dir, ready_timeout, DemoOptions::default()).await
}

/// As [`start`], with `extra` APIServices registered beside the demo's.
pub async fn start_with(
    dir: &Path,
    ready_timeout: Duration,
    extra: &[ExtraApiService],
) -> Result<Demo, String> {
    start_with_options(
        dir,
        ready_timeout,
        DemoOptions {
            extra,
            ..DemoOptions::default()
        },
    )
    .await
}

/// As [`start`], as `options` say.
pub async fn start_with_options(
    dir: &Path,
    ready_timeout: Duration,
    options: DemoOptions<'_>,
) -> Result<Demo, String> {
    let extra = options.extra;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let p = |name: &str| dir.join(name);

    let listen = || async {
        TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("cannot listen: {e}"))
    };
    let (metrics_listener, policy_listener, gateway_listener) =
        (listen().await?, listen().await?, listen().await?);
    let (adapter_listener, crud_listener) = (listen().await?, listen().await?);
    let metrics_addr = metrics_listener.local_addr().map_err(|e| e.to_string())?;
    let policy_addr = policy_listener.local_addr().map_err(|e| e.to_string())?;
    let gateway_addr = gateway_listener.local_addr().map_err(|e| e.to_string())?;

    let files = write_cluster_files(
        &dir,
        "kube-aggregator-demo",
        ("demo-admin", &["system:masters"]),
        &metrics_addr.to_string(),
        &policy_addr.to_string(),
    )?;
    let (cluster_ca, admin, policy_serving) = (&files.cluster_ca, &files.admin, &files.policy);
    let servers = demo_servers::prepare(
        &dir,
        adapter_listener.local_addr().map_err(|e| e.to_string())?,
        crud_listener.local_addr().map_err(|e| e.to_string())?,
        Some(&p("servicecatalog.json")),
    )?;
    {
        let mut endpoints = std::fs::read_to_string(p("service-endpoints.yaml"))
            .map_err(|e| format!("cannot read service-endpoints.yaml: {e}"))?;
        for x in servers.apiservices.iter().chain(extra) {
            write(&p(&format!("apiservices/{}", x.file)), &x.manifest)?;
            endpoints.push_str(&x.endpoint);
        }
        write(&p("service-endpoints.yaml"), &endpoints)?;
        // The tenants: each a directory of the same manifests (the same extension
        // servers), served under /clusters/<name>/.
        let _ = std::fs::remove_dir_all(p("tenants"));
        for (tenant, names) in TENANTS {
            let tenant_dir = p("tenants").join(tenant);
            std::fs::create_dir_all(&tenant_dir)
                .map_err(|e| format!("cannot create {}: {e}", tenant_dir.display()))?;
            for name in names {
                let manifest = if *name == APISERVICE {
                    std::fs::read_to_string(p("apiservices/metrics.k8s.io.yaml"))
                } else {
                    std::fs::read_to_string(p(&format!("apiservices/{name}.yaml")))
                }
                .map_err(|e| format!("cannot read the manifest of {name}: {e}"))?;
                write(&tenant_dir.join(format!("{name}.yaml")), &manifest)?;
            }
        }
    }
    // An unprivileged user: the demo policy lets it read core nodes and pods only.
    let viewer = cluster_ca.client("demo-viewer", &[]);
    write(&p("viewer.crt"), &viewer.cert_pem)?;
    write(&p("viewer.key"), &viewer.key_pem)?;

    // A bearer-token user, as with --token-auth-file on kube-apiserver.
    let token = random_token();
    write(
        &p("tokens.csv"),
        &format!("{token},demo-token-user,demo-token-uid,\"system:masters\"\n"),
    )?;

    let b64 = |s: &str| STANDARD.encode(s);
    write(
        &p("kubeconfig"),
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: demo\n  cluster:\n    server: https://{gateway_addr}\n    certificate-authority-data: {ca}\n- name: team-a\n  cluster:\n    server: https://{gateway_addr}/clusters/team-a\n    certificate-authority-data: {ca}\n- name: team-b\n  cluster:\n    server: https://{gateway_addr}/clusters/team-b\n    certificate-authority-data: {ca}\nusers:\n- name: demo-admin\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n- name: demo-viewer\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n- name: demo-token\n  user:\n    token: {}\ncontexts:\n- name: demo\n  context:\n    cluster: demo\n    user: demo-admin\n- name: team-a\n  context:\n    cluster: team-a\n    user: demo-admin\n- name: team-b\n  context:\n    cluster: team-b\n    user: demo-admin\ncurrent-context: demo\n",
            b64(&admin.cert_pem),
            b64(&admin.key_pem),
            b64(&viewer.cert_pem),
            b64(&viewer.key_pem),
            token,
            ca = b64(&cluster_ca.cert_pem),
        ),
    )?;

    let (stop, stopped) = watch::channel(false);
    let until_stopped = move || {
        let mut rx = stopped.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let mut tasks = Vec::new();
    let config = MetricsServerConfig {
        tls_cert_file: p("metrics-server.crt"),
        tls_private_key_file: p("metrics-server.key"),
        requestheader_client_ca_file: p("front-proxy-ca.crt"),
        requestheader_allowed_names: vec!["front-proxy-client".into()],
    };
    let (policy_cert, policy_key) = (
        policy_serving.cert_pem.clone(),
        policy_serving.key_pem.clone(),
    );
    let policy_shutdown = until_stopped();
    tasks.push(tokio::spawn(async move {
        if let Err(e) = policy::serve(
            policy_listener,
            policy_cert.as_bytes(),
            policy_key.as_bytes(),
            policy_shutdown,
        )
        .await
        {
            tracing::error!(error = %e, "policy webhook failed");
        }
    }));
    let (adapter, adapter_serving) = (servers.adapter.clone(), servers.adapter_serving.clone());
    let mut in_process = Vec::new();
    if options.custom_metrics_over_mtls {
        let adapter_shutdown = until_stopped();
        tasks.push(tokio::spawn(async move {
            let config = custom_metrics::AdapterConfig::default();
            if let Err(e) = adapter
                .serve(&adapter_serving, config, adapter_listener, adapter_shutdown)
                .await
            {
                tracing::error!(error = %e, "custom-metrics adapter failed");
            }
        }));
    } else {
        // In the gateway's process: the same handler behind the same front-proxy
        // authentication, reached through the in-memory transport instead of a socket.
        drop(adapter_listener);
        let (service, scraper) = adapter
            .in_process(&adapter_serving, custom_metrics::AdapterConfig::default())
            .map_err(|e| format!("custom-metrics adapter: {e}"))?;
        let scraper_stop = until_stopped();
        tasks.push(tokio::spawn(async move {
            scraper_stop.await;
            scraper.abort();
        }));
        in_process.push((demo_servers::ADAPTER_SERVER_NAME.to_owned(), service));
    }
    let (crud, crud_serving) = (servers.crud.clone(), servers.crud_serving.clone());
    let crud_shutdown = until_stopped();
    tasks.push(tokio::spawn(async move {
        if let Err(e) = crud
            .serve(&crud_serving, crud_listener, crud_shutdown)
            .await
        {
            tracing::error!(error = %e, "servicecatalog server failed");
        }
    }));
    let metrics_shutdown = until_stopped();
    tasks.push(tokio::spawn(async move {
        if let Err(e) = metrics_server::serve(config, metrics_listener, metrics_shutdown).await {
            tracing::error!(error = %e, "metrics server failed");
        }
    }));

    // Every request but the health checks is audited at Metadata level into audit.log.
    write(&p("audit-policy.yaml"), AUDIT_POLICY)?;

    // The gateway gets its configuration as command-line flags, exactly as a user would
    // start it, so the demo exercises the real flag parsing.
    let arg = |flag: &str, path: &str| format!("--{flag}={}", p(path).display());
    let mut args = vec![
        "--bind-address=127.0.0.1".to_string(),
        format!("--secure-port={}", gateway_addr.port()),
        arg("tls-cert-file", "gateway.crt"),
        arg("tls-private-key-file", "gateway.key"),
        arg("client-ca-file", "ca.crt"),
        arg("token-auth-file", "tokens.csv"),
        arg("proxy-client-cert-file", "front-proxy-client.crt"),
        arg("proxy-client-key-file", "front-proxy-client.key"),
        arg("apiservice-dir", "apiservices"),
        arg("tenant-dir", "tenants"),
        arg("service-endpoints", "service-endpoints.yaml"),
        "--authorization-mode=Webhook".to_string(),
        arg(
            "authorization-webhook-config-file",
            "authz-webhook.kubeconfig",
        ),
        "--authorization-webhook-version=v1".to_string(),
        "--availability-resync-period=10s".to_string(),
        arg("audit-policy-file", "audit-policy.yaml"),
        arg("audit-log-path", "audit.log"),
    ];
    args.extend(options.extra_args.iter().cloned());
    let opts = GatewayOptions::parse(args.clone()).map_err(|e| e.to_string())?;
    let (gateway, handle) =
        gateway::start_with(opts, Some(gateway_listener), until_stopped(), in_process)
            .await
            .map_err(|e| e.0)?;
    tasks.push(handle);

    let deadline = tokio::time::Instant::now() + ready_timeout;
    let own = std::iter::once(APISERVICE)
        .chain(demo_servers::METRICS_APISERVICES)
        .chain([demo_servers::CATALOG_APISERVICE]);
    let tenants = gateway.tenants.clone();
    let registries = std::iter::once((String::new(), gateway.registry.clone(), own.collect()))
        .chain(TENANTS.iter().filter_map(|(tenant, names)| {
            let registry = tenants.as_ref()?.registry(tenant)?;
            Some((format!("/clusters/{tenant}: "), registry, names.to_vec()))
        }));
    for (tenant, registry, names) in registries {
        for name in names {
            wait_available(&registry, name, deadline, ready_timeout)
                .await
                .map_err(|e| format!("{tenant}{e}"))
                .inspect_err(|_| {
                    let _ = stop.send(true);
                })?;
        }
    }
    Ok(Demo {
        kubeconfig: p("kubeconfig"),
        gateway,
        metrics_addr,
        adapter: servers.adapter,
        crud: servers.crud,
        custom_metrics_over_mtls: options.custom_metrics_over_mtls,
        gateway_args: args,
        stop,
        tasks,
    })
}

/// Waits until APIService `name` is Available, or fails at `deadline` with its condition.
async fn wait_available(
    registry: &kube_aggregator::Registry,
    name: &str,
    deadline: tokio::time::Instant,
    ready_timeout: Duration,
) -> Result<(), String> {
    loop {
        let table = registry.snapshot();
        let route = table.get(name);
        if route.is_some_and(|r| r.is_available()) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            let why = route
                .and_then(|r| r.apiservice.available_condition().cloned())
                .map_or_else(
                    || "no condition yet".to_owned(),
                    |c| format!("{}: {}", c.reason, c.message),
                );
            return Err(format!(
                "{name} did not become Available within {ready_timeout:?} ({why})"
            ));
        }
        drop(table);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// 32 random bytes, hex: a bearer token nobody can guess.
fn random_token() -> String {
    use ring::rand::{SecureRandom, SystemRandom};
    let mut bytes = [0u8; 32];
    SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system random source works");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
