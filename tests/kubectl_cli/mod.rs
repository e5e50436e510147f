//! Running the real `kubectl` from the end-to-end tests: one command at a time, with its
//! own `--kubeconfig` and discovery `--cache-dir`, bounded at 60 s, and a table reader.
//! Every function panics with kubectl's output when a command that must succeed fails,
//! and with the reason when `kubectl` is not on `PATH` (these tests fail, never skip).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one kubectl command may take before the test fails.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `kubectl args...` against `kubeconfig` with its discovery cache in `cache`;
/// returns (exit status was success, stdout, stderr). The server has 20 s to answer each
/// request (`--request-timeout=20s`).
pub async fn run_kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> (bool, String, String) {
    let out = tokio::time::timeout(
        COMMAND_TIMEOUT,
        tokio::process::Command::new("kubectl")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--cache-dir={}", cache.display()))
            .arg("--request-timeout=20s")
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish within 60 s"))
    .unwrap_or_else(|e| panic!("cannot run kubectl (the end-to-end test needs it on PATH): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), stdout, stderr)
}

/// [`run_kubectl`] for a command that must succeed: its stdout.
pub async fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> String {
    let (ok, stdout, stderr) = run_kubectl(kubeconfig, cache, args).await;
    assert!(
        ok,
        "kubectl {args:?} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout
}

/// A kubeconfig and the discovery cache its commands share.
#[derive(Debug, Clone)]
pub struct Kubectl {
    /// The kubeconfig file.
    pub kubeconfig: PathBuf,
    /// kubectl's discovery and HTTP cache directory.
    pub cache: PathBuf,
}

impl Kubectl {
    /// `kubeconfig`, with the cache in `kube-cache` beside it.
    pub fn beside(kubeconfig: &Path) -> Kubectl {
        Kubectl {
            kubeconfig: kubeconfig.to_owned(),
            cache: kubeconfig.with_file_name("kube-cache"),
        }
    }

    /// [`run_kubectl`] with this kubeconfig and cache.
    pub async fn run(&self, args: &[&str]) -> (bool, String, String) {
        run_kubectl(&self.kubeconfig, &self.cache, args).await
    }

    /// [`kubectl`] with this kubeconfig and cache.
    pub async fn ok(&self, args: &[&str]) -> String {
        kubectl(&self.kubeconfig, &self.cache, args).await
    }

    /// Runs `kubectl args...`, which must fail with `message` in its stderr.
    pub async fn fails_with(&self, args: &[&str], message: &str) {
        let (ok, stdout, stderr) = self.run(args).await;
        assert!(!ok, "kubectl {args:?} succeeded: {stdout}");
        assert!(stderr.contains(message), "{message:?} not in {stderr}");
    }
}

/// An empty directory of this test process under the system's temp directory, named
/// after `name` (whatever an earlier run with the same pid left there is removed).
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("kube-aggregator-e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The demo started in `dir` with `options`, its APIServices `Available` within 30 s,
/// and a kubectl beside it; panics with the reason when it does not start.
pub async fn start_demo(
    dir: &Path,
    options: crate::support::demo::DemoOptions<'_>,
) -> (crate::support::demo::Demo, Kubectl) {
    let demo = crate::support::demo::start_with_options(dir, Duration::from_secs(30), options)
        .await
        .unwrap_or_else(|e| panic!("the demo starts in {}: {e}", dir.display()));
    let kubectl = Kubectl::beside(&demo.kubeconfig);
    (demo, kubectl)
}

/// The string at the JSON pointer `pointer` in each of `list`'s `items`, in order; panics
/// with the list when one is missing.
pub fn item_strings<'a>(list: &'a serde_json::Value, pointer: &str) -> Vec<&'a str> {
    let items = list["items"].as_array();
    let items = items.unwrap_or_else(|| panic!("no items in {list}"));
    let at = |i: &'a serde_json::Value| i.pointer(pointer).and_then(|v| v.as_str());
    let found = items
        .iter()
        .map(|i| at(i).unwrap_or_else(|| panic!("no {pointer} in {i}")));
    found.collect()
}

/// A kubectl table as rows of whitespace-separated cells, blank lines dropped.
pub fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .filter(|r: &Vec<String>| !r.is_empty())
        .collect()
}
