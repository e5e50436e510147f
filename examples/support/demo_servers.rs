//! The demo's other extension servers: the custom-metrics adapter and the service-catalog
//! CRUD server, each with a serving certificate of its own CA (its APIServices'
//! caBundle) and trusting the demo's front-proxy CA, registered as APIServices the way
//! prometheus-adapter's and service-catalog's manifests register them.

use std::net::SocketAddr;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::crud::{Crud, CrudConfig};
use super::custom_metrics::Adapter;
use super::demo::ExtraApiService;
use super::extension_server::ServingConfig;
use super::pki::Ca;

/// The APIServices of the adapter.
pub const METRICS_APISERVICES: [&str; 3] = [
    "v1beta2.custom.metrics.k8s.io",
    "v1beta1.custom.metrics.k8s.io",
    "v1beta1.external.metrics.k8s.io",
];
/// The in-process adapter's name: its Service's `<name>.<namespace>.svc`.
pub const ADAPTER_SERVER_NAME: &str = "custom-metrics-apiserver.custom-metrics.svc";
/// The APIService of the CRUD server.
pub const CATALOG_APISERVICE: &str = "v1beta1.servicecatalog.example.io";

/// The two servers, ready to serve, and their APIServices.
#[derive(Debug)]
pub struct DemoServers {
    /// The custom-metrics adapter.
    pub adapter: Adapter,
    /// Its TLS files and front-proxy trust.
    pub adapter_serving: ServingConfig,
    /// The CRUD server.
    pub crud: Crud,
    /// Its TLS files and front-proxy trust.
    pub crud_serving: ServingConfig,
    /// Their APIService manifests and Service endpoints.
    pub apiservices: Vec<ExtraApiService>,
}

fn apiservice(
    name: &str,
    group: &str,
    version: &str,
    namespace: &str,
    service: &str,
    ca: &Ca,
    priority: (u32, u32),
) -> String {
    format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {name}\nspec:\n  service:\n    namespace: {namespace}\n    name: {service}\n    port: 443\n  group: {group}\n  version: {version}\n  caBundle: {}\n  groupPriorityMinimum: {}\n  versionPriority: {}\n",
        STANDARD.encode(&ca.cert_pem),
        priority.0,
        priority.1
    )
}

fn endpoint(namespace: &str, service: &str, addr: SocketAddr) -> String {
    format!("- namespace: {namespace}\n  name: {service}\n  port: 443\n  address: \"{addr}\"\n")
}

/// Writes both servers' certificates under `dir` (`custom-metrics.{crt,key}`,
/// `servicecatalog.{crt,key}`) and builds them; `storage_file` persists the catalog.
pub fn prepare(
    dir: &Path,
    adapter_addr: SocketAddr,
    crud_addr: SocketAddr,
    storage_file: Option<&Path>,
) -> Result<DemoServers, String> {
    let write = |name: &str, pem: &str| {
        std::fs::write(dir.join(name), pem).map_err(|e| format!("cannot write {name}: {e}"))
    };
    let serving =
        |prefix: &str, namespace: &str, service: &str| -> Result<(Ca, ServingConfig), String> {
            let ca = Ca::new(&format!("{prefix}-ca"));
            let host = format!("{service}.{namespace}.svc");
            let leaf = ca.server(&host, &[&host, "127.0.0.1"]);
            write(&format!("{prefix}.crt"), &leaf.cert_pem)?;
            write(&format!("{prefix}.key"), &leaf.key_pem)?;
            Ok((
                ca,
                ServingConfig {
                    tls_cert_file: dir.join(format!("{prefix}.crt")),
                    tls_private_key_file: dir.join(format!("{prefix}.key")),
                    requestheader_client_ca_file: dir.join("front-proxy-ca.crt"),
                    requestheader_allowed_names: vec!["front-proxy-client".into()],
                },
            ))
        };
    let (metrics_ca, adapter_serving) = serving(
        "custom-metrics",
        "custom-metrics",
        "custom-metrics-apiserver",
    )?;
    let (catalog_ca, crud_serving) =
        serving("servicecatalog", "catalog", "servicecatalog-apiserver")?;
    let mut apiservices = Vec::new();
    for (name, group, version, priority) in [
        (
            METRICS_APISERVICES[0],
            "custom.metrics.k8s.io",
            "v1beta2",
            (100, 200),
        ),
        (
            METRICS_APISERVICES[1],
            "custom.metrics.k8s.io",
            "v1beta1",
            (100, 100),
        ),
        (
            METRICS_APISERVICES[2],
            "external.metrics.k8s.io",
            "v1beta1",
            (100, 100),
        ),
    ] {
        apiservices.push(ExtraApiService {
            file: format!("{name}.yaml"),
            manifest: apiservice(
                name,
                group,
                version,
                "custom-metrics",
                "custom-metrics-apiserver",
                &metrics_ca,
                priority,
            ),
            // One Service behind all three: listed once in the endpoints file.
            endpoint: if version == "v1beta2" {
                endpoint("custom-metrics", "custom-metrics-apiserver", adapter_addr)
            } else {
                String::new()
            },
        });
    }
    apiservices.push(ExtraApiService {
        file: format!("{CATALOG_APISERVICE}.yaml"),
        manifest: apiservice(
            CATALOG_APISERVICE,
            "servicecatalog.example.io",
            "v1beta1",
            "catalog",
            "servicecatalog-apiserver",
            &catalog_ca,
            (10000, 20),
        ),
        endpoint: endpoint("catalog", "servicecatalog-apiserver", crud_addr),
    });
    let config = CrudConfig {
        storage_file: storage_file.map(Path::to_path_buf),
        ..CrudConfig::default()
    };
    let crud = Crud::open(&config).map_err(|e| e.to_string())?;
    Ok(DemoServers {
        adapter: Adapter::new(),
        adapter_serving,
        crud,
        crud_serving,
        apiservices,
    })
}
