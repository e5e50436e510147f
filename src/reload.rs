//! Re-reading certificate and CA files when they change, without a restart, as
//! kube-apiserver's dynamic certificate controllers do
//! ([k8s.io/apiserver `pkg/server/dynamiccertificates`](https://github.com/kubernetes/apiserver/tree/master/pkg/server/dynamiccertificates):
//! the serving certificate, `--client-ca-file`, `--requestheader-client-ca-file`, and the
//! proxy client certificate are all reloaded).
//!
//! [`watch_files`] polls a set of files on the injected [`Timer`] and hands their new
//! contents to a closure once any of them changed. The closure installs them
//! ([`ClientCertificate::set_pem`](crate::transport::ClientCertificate::set_pem),
//! [`X509Authenticator::set_ca_pem`](crate::authn::X509Authenticator::set_ca_pem),
//! [`RequestHeaderAuthenticator::set_ca_pem`](crate::authn::RequestHeaderAuthenticator::set_ca_pem),
//! [`ServingTls::store`](crate::server::ServingTls::store)); when it refuses them (a
//! certificate written before its key, say), the previous good set stays in use, the
//! refusal is logged once, and the files are tried again when they change next.
//! Connections already open keep what they were made with; new ones use the new files.
//!
//! ```
//! use std::time::Duration;
//! use kube_aggregator::reload::watch_files;
//! use kube_aggregator::rt::Timer;
//! use kube_aggregator::transport::ClientCertificate;
//!
//! # fn run(timer: Timer, proxy_cert: ClientCertificate) {
//! let watcher = watch_files(
//!     ["proxy.crt", "proxy.key"],
//!     timer,
//!     Duration::from_secs(10),
//!     move |files: &[Vec<u8>]| proxy_cert.set_pem(&files[0], &files[1]).map_err(|e| e.to_string()),
//! );
//! // Spawn `watcher` on the host's executor: it runs until the process ends.
//! # let _ = watcher;
//! # }
//! ```

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::rt::Timer;

/// Polls `paths` every `interval` (through `timer`) and calls `apply` with all their
/// contents, in order, each time one of them changed since the last call (a change of
/// size, modification time or content). `apply` is not called for the contents the
/// files have when the watch starts: the host loaded those itself. A file that cannot be
/// read is skipped for that round (logged), as is a set `apply` refused (logged once).
///
/// The future never ends; spawn it.
pub fn watch_files<P, F>(
    paths: impl IntoIterator<Item = P>,
    timer: Timer,
    interval: Duration,
    mut apply: F,
) -> impl Future<Output = ()> + Send + 'static
where
    P: Into<PathBuf>,
    F: FnMut(&[Vec<u8>]) -> Result<(), String> + Send + 'static,
{
    let paths: Vec<PathBuf> = paths.into_iter().map(Into::into).collect();
    async move {
        let mut seen = stamps(&paths);
        let mut contents = read_all(&paths);
        loop {
            timer.sleep(interval).await;
            let now = stamps(&paths);
            if now == seen {
                continue;
            }
            seen = now;
            let Some(next) = read_all(&paths) else {
                continue;
            };
            if Some(&next) == contents.as_ref() {
                continue;
            }
            let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            match apply(&next) {
                Ok(()) => tracing::info!(files = ?names, "reloaded"),
                Err(e) => {
                    tracing::error!(files = ?names, error = %e, "not reloaded; the previous contents stay in use")
                }
            }
            // Refused contents are not retried until the files change again.
            contents = Some(next);
        }
    }
}

/// Size and modification time of each file (`None` when it cannot be read).
fn stamps(paths: &[PathBuf]) -> Vec<Option<(u64, Option<SystemTime>)>> {
    paths
        .iter()
        .map(|p| {
            std::fs::metadata(p)
                .ok()
                .map(|m| (m.len(), m.modified().ok()))
        })
        .collect()
}

fn read_all(paths: &[PathBuf]) -> Option<Vec<Vec<u8>>> {
    paths
        .iter()
        .map(|p| match std::fs::read(p) {
            Ok(bytes) => Some(bytes),
            Err(e) => {
                tracing::warn!(file = %p.display(), error = %e, "cannot read; keeping the previous contents");
                None
            }
        })
        .collect()
}
