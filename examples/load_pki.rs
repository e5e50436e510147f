//! The PKI and configuration files for the load run in `benches/load/`, and the
//! SubjectAccessReview webhook the gateway consults there.
//!
//! ```text
//! load_pki write DIR --backend-port 4443 --policy-port 9443
//! load_pki serve-policy DIR --policy-port 9443
//! ```
//!
//! `write` creates `DIR` (and `DIR/apiservices`) and writes, all PEM unless noted:
//! - `ca.crt`: the cluster CA. It signs `gateway.crt`/`gateway.key` (serving certificate for
//!   127.0.0.1 and localhost, used by the gateway and by nginx), `admin.crt`/`admin.key`
//!   (client certificate CN `load-user`, O `team`) and `policy.crt`/`policy.key`
//!   (the webhook's serving certificate);
//! - `front-proxy-ca.crt` and `front-proxy-client.crt`/`.key` (CN `front-proxy-client`): the
//!   identity a proxy presents to the backend; `front-proxy-client-1.crt`/`.key` to
//!   `front-proxy-client-5`: further certificates of the same name and CA, which the soak
//!   (`benches/load/soak.sh`) rotates in;
//! - `service-ca.crt` and `metrics-server.crt`/`.key` for `metrics-server.kube-system.svc`
//!   and 127.0.0.1: the backend's serving certificate;
//! - `apiservices/metrics.k8s.io.yaml`: the `v1beta1.metrics.k8s.io` APIService with
//!   `service-ca.crt` as its `caBundle`;
//! - `service-endpoints.yaml`: `kube-system/metrics-server:443` → `127.0.0.1:<backend-port>`;
//! - `authz-webhook.kubeconfig`: the webhook at `https://127.0.0.1:<policy-port>/authorize`.
//!
//! `serve-policy` serves the demo policy (`system:masters` may do anything) with
//! `policy.crt`/`policy.key` on 127.0.0.1 until interrupted or terminated.
//!
//! Errors: a usage error exits 2, a file that cannot be written or a port that cannot be
//! bound exits 1; each prints one line naming the flag, file or address.

#[path = "support/mod.rs"]
pub mod support;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use support::policy;

/// The user every proxied request of the load run is made as.
const USER: &str = "load-user";
/// Its group: the demo policy lets it read nodes and pods and their metrics. Not
/// `system:masters`, which the gateway allows before any webhook is asked: the measured
/// path must include SubjectAccessReview authorization, whose webhook answers once per
/// distinct request shape and whose cache in the gateway answers the rest.
const GROUP: &str = support::policy::DEMO_TEAM;

const USAGE: &str = "usage: load_pki write DIR --backend-port PORT --policy-port PORT\n       load_pki serve-policy DIR --policy-port PORT";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(msg)) => {
            eprintln!("load_pki: {msg}\n{USAGE}");
            ExitCode::from(2)
        }
        Err(Failure::Runtime(msg)) => {
            eprintln!("load_pki: {msg}");
            ExitCode::from(1)
        }
    }
}

enum Failure {
    Usage(String),
    Runtime(String),
}

struct Args {
    dir: PathBuf,
    backend_port: Option<u16>,
    policy_port: Option<u16>,
}

fn parse(args: &[String]) -> Result<Args, Failure> {
    let dir = args
        .first()
        .filter(|a| !a.starts_with("--"))
        .ok_or_else(|| Failure::Usage("missing DIR".into()))?;
    let mut parsed = Args {
        dir: PathBuf::from(dir),
        backend_port: None,
        policy_port: None,
    };
    let mut rest = args[1..].iter();
    while let Some(flag) = rest.next() {
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (flag.as_str(), None),
        };
        let value = match inline {
            Some(v) => v,
            None => rest
                .next()
                .cloned()
                .ok_or_else(|| Failure::Usage(format!("flag needs an argument: {name}")))?,
        };
        let port = |v: &str| {
            v.parse::<u16>()
                .map_err(|_| Failure::Usage(format!("{name}: {v:?} is not a port number")))
        };
        match name {
            "--backend-port" => parsed.backend_port = Some(port(&value)?),
            "--policy-port" => parsed.policy_port = Some(port(&value)?),
            other => return Err(Failure::Usage(format!("unknown flag: {other}"))),
        }
    }
    Ok(parsed)
}

fn run(args: Vec<String>) -> Result<(), Failure> {
    let Some((command, rest)) = args.split_first() else {
        return Err(Failure::Usage("missing command".into()));
    };
    let parsed = parse(rest)?;
    let policy_port = parsed
        .policy_port
        .ok_or_else(|| Failure::Usage("--policy-port is required".into()))?;
    match command.as_str() {
        "write" => {
            let backend_port = parsed
                .backend_port
                .ok_or_else(|| Failure::Usage("--backend-port is required".into()))?;
            write_all(&parsed.dir, backend_port, policy_port).map_err(Failure::Runtime)
        }
        "serve-policy" => serve_policy(&parsed.dir, policy_port).map_err(Failure::Runtime),
        other => Err(Failure::Usage(format!("unknown command {other:?}"))),
    }
}

/// How many further front-proxy client certificates `write` makes for rotations.
const PROXY_ROTATIONS: usize = 5;

fn write_all(dir: &Path, backend_port: u16, policy_port: u16) -> Result<(), String> {
    let files = support::demo::write_cluster_files(
        dir,
        "load",
        (USER, &[GROUP]),
        &format!("127.0.0.1:{backend_port}"),
        &format!("127.0.0.1:{policy_port}"),
    )?;
    for n in 1..=PROXY_ROTATIONS {
        let leaf = files.front_proxy_ca.client("front-proxy-client", &[]);
        for (ext, pem) in [("crt", &leaf.cert_pem), ("key", &leaf.key_pem)] {
            let path = dir.join(format!("front-proxy-client-{n}.{ext}"));
            std::fs::write(&path, pem)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

fn serve_policy(dir: &Path, port: u16) -> Result<(), String> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let (cert, key) = (read("policy.crt")?, read("policy.key")?);
    // One thread: the gateway caches every answer, so the webhook sees a handful of
    // requests per run and must not compete with the measured servers for the core.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async move {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("--policy-port: cannot listen on {addr}: {e}"))?;
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        policy::serve(listener, &cert, &key, shutdown)
            .await
            .map_err(|e| e.to_string())
    })
}
