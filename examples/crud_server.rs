//! A CRUD + watch extension API server shaped like the Kubernetes service-catalog:
//! `servicecatalog.example.io/v1beta1` with a namespaced `ServiceInstance` and a
//! cluster-scoped `ClusterServiceBroker`, kube-apiserver's REST semantics (resourceVersions,
//! 409s, watches with bookmarks, `Table`s, strict field validation, OpenAPI v3), in memory
//! or persisted to a JSON file.
//!
//! ```text
//! cargo run --example crud_server -- --secure-port 7443 \
//!     --tls-cert-file serving.crt --tls-private-key-file serving.key \
//!     --requestheader-client-ca-file front-proxy-ca.crt \
//!     --requestheader-allowed-names front-proxy-client \
//!     [--storage-file servicecatalog.json] [--bookmark-interval 60]
//! ```
//!
//! The logic is in `examples/support/crud/`; `cargo run --example demo` runs it behind the
//! gateway.

#[path = "support/mod.rs"]
pub mod support;

fn main() -> std::process::ExitCode {
    support::crud::main_from_args(std::env::args().skip(1))
}
