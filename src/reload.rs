//! Re-reading certificate and CA files when they change, without a restart, as
//! kube-apiserver's dynamic certificate controllers do
//! ([k8s.io/apiserver `pkg/server/dynamiccertificates`](https://github.com/kubernetes/apiserver/tree/master/pkg/server/dynamiccertificates):
//! the serving certificate, `--client-ca-file`, `--requestheader-client-ca-file`, and the
//! proxy client certificate are all reloaded).
//!
//! [`watch_files`] polls a set of files on the injected [`Timer`] and hands their new
//! contents to a closure once any of them changed. Watch each file on its own (a
//! certificate and its key as one pair), as upstream gives each its own controller, so
//! that a file that does not load holds back only itself. The closure installs them
//! ([`ClientCertificate::set_pem`](crate::transport::ClientCertificate::set_pem) for the
//! proxy client pair, [`ClientCas`](crate::authn::ClientCas) for `--client-ca-file` and
//! `--requestheader-client-ca-file`, which refuses a bundle that would let user
//! certificates act as the front proxy, and `server::DynamicServing` for the serving pair
//! and the CA names its handshake offers); when it refuses them (a certificate written
//! before its key, say), the previous good content stays in use, the refusal is logged
//! once, and the files are tried again when they change next. Connections already open
//! keep what they were made with; new ones use the new files.
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
//!
//! Floor 1 of the import order (docs/architecture.md): uses `rt`; used by no other room.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use crate::rt::Timer;

/// Polls `paths` every `interval` (through `timer`) and calls `apply` with all their
/// contents, in order, each time the bytes of one of them changed since the last call.
/// The bytes themselves are compared, every interval, as upstream's dynamic file
/// controllers re-read their files (`FileRefreshDuration`): a file replaced by one of the
/// same size and modification time (`tar x`, `cp -p`, `rsync -t`, reproducible builds)
/// is seen too. `apply` is not called for the contents the files have when the watch
/// starts: the host loaded those itself. A file that cannot be read is skipped for that
/// round (logged once per distinct error), as is a set `apply` refused (logged once).
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
        let mut unreadable = None;
        let mut contents = read_all(&paths, &mut unreadable);
        loop {
            timer.sleep(interval).await;
            let Some(next) = read_all(&paths, &mut unreadable) else {
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

/// The bytes of every file, or `None` when one cannot be read; the error is logged when
/// it differs from `unreadable`, the last one logged (so a missing file is named once,
/// not every interval).
fn read_all(paths: &[PathBuf], unreadable: &mut Option<String>) -> Option<Vec<Vec<u8>>> {
    let read: Result<Vec<Vec<u8>>, String> = paths
        .iter()
        .map(|p| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display())))
        .collect();
    match read {
        Ok(contents) => {
            *unreadable = None;
            Some(contents)
        }
        Err(e) => {
            if unreadable.as_ref() != Some(&e) {
                tracing::warn!(error = %e, "cannot read; keeping the previous contents");
                *unreadable = Some(e);
            }
            None
        }
    }
}
