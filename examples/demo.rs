//! The main job: `kubectl` against a real TLS gateway that embeds the aggregator, which
//! routes to three sample extension servers: `metrics.k8s.io` (metrics-server, over
//! mTLS), `custom.metrics.k8s.io` and `external.metrics.k8s.io` (a custom-metrics
//! adapter, in the gateway's own process through the in-memory transport, or over
//! loopback mTLS with `--custom-metrics-over-mtls`) and `servicecatalog.example.io` (a
//! CRUD + watch API with storage of its own, over mTLS); and two tenants under
//! `/clusters/team-a` and `/clusters/team-b`, each with APIServices of its own.
//!
//! ```text
//! cargo run --example demo [-- --dir target/demo] [--custom-metrics-over-mtls]
//! ```

#[path = "support/mod.rs"]
pub mod support;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage: demo [--dir DIR] [--custom-metrics-over-mtls]
  --dir DIR                    where the PKI, manifests and kubeconfig go (default target/demo)
  --custom-metrics-over-mtls   run the custom-metrics adapter on a loopback port behind mTLS
                               instead of in the gateway's process";

fn main() -> ExitCode {
    let mut dir = PathBuf::from("target/demo");
    let mut over_mtls = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--dir" => match args.next() {
                Some(d) => dir = PathBuf::from(d),
                None => return usage("flag needs an argument: --dir"),
            },
            s if s.starts_with("--dir=") => dir = PathBuf::from(&s["--dir=".len()..]),
            "--custom-metrics-over-mtls" => over_mtls = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => return usage(&format!("unknown flag: {other}")),
        }
    }
    support::gateway::init_logging(0);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("demo: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(async move {
        let options = support::demo::DemoOptions {
            custom_metrics_over_mtls: over_mtls,
            ..support::demo::DemoOptions::default()
        };
        let started = support::demo::start_with_options(&dir, Duration::from_secs(30), options);
        let demo = match started.await {
            Ok(d) => d,
            Err(e) => {
                eprintln!("demo: {e}");
                return ExitCode::from(1);
            }
        };
        let kc = demo.kubeconfig.display().to_string();
        println!("KUBECONFIG={kc}");
        println!();
        println!(
            "{} is Available. Try, in another terminal:",
            support::demo::APISERVICE
        );
        println!("  export KUBECONFIG={kc}");
        println!("  kubectl get apiservices");
        println!("  kubectl api-versions");
        println!("  kubectl top nodes");
        println!("  kubectl top pods -A");
        println!("  kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes");
        println!("  kubectl get nodes");
        println!("  kubectl --user demo-viewer top nodes          # Forbidden by the policy");
        println!("  kubectl --user demo-token top pods -n kube-system   # a bearer-token user");
        println!("  kubectl --as=bob --as-group=team top nodes    # demo-admin impersonating bob");
        println!("  kubectl --user demo-viewer --as=bob get nodes # Forbidden: viewers may not impersonate");
        println!("  kubectl auth can-i list nodes.metrics.k8s.io --user demo-viewer");
        println!("  kubectl auth can-i --list");
        println!("  kubectl auth whoami --as=bob --as-group=team");
        println!();
        if demo.custom_metrics_over_mtls {
            println!("The custom-metrics adapter (what an HPA reads), behind loopback mTLS:");
        } else {
            println!("The custom-metrics adapter (what an HPA reads), in this process (--custom-metrics-over-mtls puts it behind loopback mTLS):");
        }
        println!("  kubectl get --raw '/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_requests_per_second?labelSelector=app%3Dfrontend'");
        println!("  kubectl get --raw '/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/deployments.apps/frontend/http_requests_per_second'");
        println!("  kubectl get --raw '/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/metrics/queue_messages_ready'");
        println!("  kubectl get --raw '/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready?labelSelector=queue%3Dorders'");
        println!();
        println!("The service-catalog CRUD server (persisted in {}):", demo.kubeconfig.with_file_name("servicecatalog.json").display());
        println!("  kubectl apply -f - <<'EOF'");
        println!("  apiVersion: servicecatalog.example.io/v1beta1");
        println!("  kind: ServiceInstance");
        println!("  metadata: {{name: db, namespace: default}}");
        println!("  spec: {{clusterServiceClassExternalName: postgres, clusterServicePlanExternalName: small}}");
        println!("  EOF");
        println!("  kubectl get serviceinstances -w            # in another terminal, then:");
        println!("  kubectl patch serviceinstance db --type=merge -p '{{\"spec\":{{\"clusterServicePlanExternalName\":\"large\"}}}}'");
        println!("  kubectl explain serviceinstances.spec");
        println!("  kubectl delete serviceinstance db");
        println!();
        let server = format!("https://{}", demo.gateway.local_addr);
        println!("Two tenants under /clusters/<name>, each with its own APIServices, discovery and availability:");
        println!("  kubectl --server {server}/clusters/team-a api-resources   # metrics.k8s.io, external.metrics.k8s.io (custom metrics' names hold a '/', which api-resources does not list)");
        println!("  kubectl --server {server}/clusters/team-b api-resources   # servicecatalog.example.io");
        println!("  kubectl --server {server}/clusters/team-a get apiservices");
        println!("  kubectl --server {server}/clusters/team-a top nodes");
        println!("  kubectl get --raw '/clusters/team-a/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/metrics/queue_messages_ready'");
        println!("      # --raw takes the path as it is, tenant prefix included; --server's path does not apply");
        println!("  kubectl --context team-b get serviceinstances -A");
        println!("  kubectl --context team-b --user demo-viewer get serviceinstances -A   # allowed in team-b only");
        println!("  kubectl --user demo-viewer get serviceinstances -A                    # Forbidden outside it");
        println!("  kubectl get --raw /clusters/team-c/apis          # NotFound: clusters \"team-c\" not found");
        println!("  (tenants are the subdirectories of {}; edit them while it runs)", demo.kubeconfig.with_file_name("tenants").display());
        println!();
        println!("Serving until Ctrl-C.");
        let _ = tokio::signal::ctrl_c().await;
        println!("Shutting down.");
        demo.shutdown().await;
        ExitCode::SUCCESS
    })
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("demo: {msg}\n{USAGE}");
    ExitCode::from(2)
}
