//! The main job: `kubectl` against a real TLS gateway that embeds the aggregator, which
//! proxies over mTLS to three sample extension servers: `metrics.k8s.io` (metrics-server),
//! `custom.metrics.k8s.io` and `external.metrics.k8s.io` (a custom-metrics adapter) and
//! `servicecatalog.example.io` (a CRUD + watch API with storage of its own).
//!
//! ```text
//! cargo run --example demo [-- --dir target/demo]
//! ```

#[path = "support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let mut dir = PathBuf::from("target/demo");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--dir" => match args.next() {
                Some(d) => dir = PathBuf::from(d),
                None => return usage("flag needs an argument: --dir"),
            },
            s if s.starts_with("--dir=") => dir = PathBuf::from(&s["--dir=".len()..]),
            "-h" | "--help" => {
                println!("usage: demo [--dir DIR]   (default target/demo)");
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
        let demo = match support::demo::start(&dir, Duration::from_secs(30)).await {
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
        println!("The custom-metrics adapter (what an HPA reads):");
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
        println!("Serving until Ctrl-C.");
        let _ = tokio::signal::ctrl_c().await;
        println!("Shutting down.");
        demo.shutdown().await;
        ExitCode::SUCCESS
    })
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("demo: {msg}\nusage: demo [--dir DIR]");
    ExitCode::from(2)
}
