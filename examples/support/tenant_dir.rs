//! `--tenant-dir`: the gateway's tenants from a directory, one subdirectory per tenant
//! holding that tenant's APIService manifests (`tenants/team-a/*.yaml` is tenant
//! `team-a`, served under `/clusters/team-a/`). Not upstream: kcp keeps its workspaces in
//! its own storage; this is the gateway's stand-in for a watch of them, as
//! `--apiservice-dir` stands in for a watch of APIServices.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube_aggregator::source::ManifestDir;
use kube_aggregator::tenant::{TenantEvent, TenantSource, TenantSpec};

/// Every tenant under `dir`, by subdirectory name (sorted); files directly in `dir` are
/// ignored. Errors: `dir` or a subdirectory cannot be read, or a manifest does not parse
/// (the message names the file).
pub fn load(dir: &Path) -> Result<Vec<TenantSpec>, String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: cannot read directory: {e}", dir.display()))?;
    let mut tenants: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    tenants.sort();
    tenants
        .iter()
        .map(|path| {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let apiservices = ManifestDir::load(path).map_err(|e| e.to_string())?;
            Ok(TenantSpec::new(name, apiservices))
        })
        .collect()
}

/// A [`TenantSource`] that re-reads the directory every `interval` and sends the whole
/// set when it changed; a directory that cannot be read is logged and keeps the last
/// good set.
#[derive(Debug)]
pub struct TenantDir {
    dir: PathBuf,
    interval: Duration,
    last: Vec<TenantSpec>,
}

impl TenantDir {
    /// Follows `dir`, whose contents at start (already applied by the caller) are `initial`.
    pub fn new(dir: PathBuf, interval: Duration, initial: Vec<TenantSpec>) -> TenantDir {
        TenantDir {
            dir,
            interval,
            last: initial,
        }
    }
}

impl TenantSource for TenantDir {
    async fn next_event(&mut self) -> Option<TenantEvent> {
        loop {
            tokio::time::sleep(self.interval).await;
            match load(&self.dir) {
                Ok(tenants) if tenants != self.last => {
                    self.last = tenants.clone();
                    return Some(TenantEvent::Resynced(tenants));
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "--tenant-dir: keeping the last good tenants"),
            }
        }
    }
}
