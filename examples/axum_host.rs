//! An axum application that aggregates an extension API: its own `Router` stays the
//! inner service, and `/apis/widgets.example.io/v1` is an APIService served by an
//! extension server (here in the same process, through `InMemoryTransport`).
//!
//! ```text
//! cargo run --example axum_host                 # serves on 127.0.0.1:8080 until Ctrl-C
//! curl -H 'Authorization: Bearer demo-token' http://127.0.0.1:8080/apis/widgets.example.io/v1/widgets
//! curl -H 'Authorization: Bearer demo-token' http://127.0.0.1:8080/hello
//! cargo run --example axum_host -- --check      # makes those requests itself and exits
//! ```
//!
//! Plain HTTP on loopback keeps the example short; a real host serves TLS
//! (`kube_aggregator::server::serve_tls`) and reaches its extension servers through
//! `RustlsTransport` (see `tests/axum.rs` for both).

#[path = "support/axum_app.rs"]
mod axum_app;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let check = std::env::args().any(|a| a == "--check");
    let addr = if check {
        "127.0.0.1:0"
    } else {
        "127.0.0.1:8080"
    };
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let service = axum_app::stack()?;
    let server = tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await?;
            let service = hyper_util::service::TowerToHyperService::new(service.clone());
            let builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            let conn = builder
                .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                .into_owned();
            tokio::spawn(conn);
        }
        #[allow(unreachable_code)]
        Ok::<(), std::io::Error>(())
    });
    if !check {
        println!("serving on http://{addr}; try:");
        println!("  curl -H 'Authorization: Bearer demo-token' http://{addr}/hello");
        println!(
            "  curl -H 'Authorization: Bearer demo-token' http://{addr}/apis/widgets.example.io/v1/widgets"
        );
        server.await??;
        return Ok(());
    }
    for path in ["/hello", "/apis", "/apis/widgets.example.io/v1/widgets"] {
        let (status, body) = axum_app::get(addr, path, Some("demo-token")).await?;
        println!("GET {path} -> {status}\n{body}");
    }
    Ok(())
}
