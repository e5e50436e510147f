//! The Python `kubernetes` client (`CustomObjectsApi`: list, create, watch, patch) against
//! the service-catalog CRUD server through the demo's TLS gateway, by running
//! `tests/python/crud_client.py`.
//!
//! Provisions its own client: the `python3` on `PATH` when it can import `kubernetes`,
//! otherwise a virtual environment under the target directory (`target/tmp/python-venv`)
//! with `kubernetes` installed from PyPI, made once and reused. Fails (never skips) with
//! what is missing when neither works (no `python3`, no `venv` module, no registry).

#[path = "../examples/support/mod.rs"]
pub mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Where the virtual environment lives: under the target directory, so `cargo clean`
/// removes it and nothing outside the build is touched.
const VENV: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/python-venv");

/// True when `python` runs and imports `kubernetes`.
fn imports_kubernetes(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import kubernetes"])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Runs `command`, or says what failed with its output.
fn run(what: &str, command: &mut Command) -> Result<(), String> {
    let out = command
        .output()
        .map_err(|e| format!("{what}: cannot run {command:?}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what}: {command:?} failed ({})\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// A Python interpreter that imports `kubernetes`: `python3` itself if it does, else the
/// reused virtual environment, else a new one. The new one is built beside its final
/// place and renamed into it, so a build that failed or was interrupted is never taken
/// for a finished one.
fn python_with_kubernetes() -> Result<PathBuf, String> {
    let system = PathBuf::from("python3");
    if imports_kubernetes(&system) {
        return Ok(system);
    }
    let venv = Path::new(VENV);
    let python = venv.join("bin").join("python3");
    if imports_kubernetes(&python) {
        return Ok(python);
    }
    let building = venv.with_extension(format!("building-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    run(
        "creating a virtual environment (python3 with its venv module is needed)",
        Command::new("python3").arg("-m").arg("venv").arg(&building),
    )?;
    run(
        "installing the kubernetes package from PyPI into the virtual environment",
        Command::new(building.join("bin").join("python3")).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "kubernetes",
        ]),
    )?;
    let _ = std::fs::remove_dir_all(venv);
    if let Err(e) = std::fs::rename(&building, venv) {
        let _ = std::fs::remove_dir_all(&building);
        return Err(format!("moving {building:?} to {venv:?}: {e}"));
    }
    // A virtual environment records its own path: check it works where it now is.
    if imports_kubernetes(&python) {
        Ok(python)
    } else {
        Err(format!(
            "{python:?} cannot import kubernetes after installing it"
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_lists_creates_and_watches_through_the_gateway() {
    let python = tokio::task::spawn_blocking(python_with_kubernetes)
        .await
        .expect("provisioning ran")
        .unwrap_or_else(|e| panic!("no Python with the kubernetes package: {e}"));
    let dir =
        std::env::temp_dir().join(format!("kube-aggregator-e2e-python-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let demo = support::demo::start(&dir, Duration::from_secs(30))
        .await
        .expect("the demo starts");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/crud_client.py");
    let out = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::process::Command::new(&python)
            .arg(script)
            .arg(&demo.kubeconfig)
            .arg("default")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python client finished within 90 s")
    .unwrap_or_else(|e| panic!("cannot run {python:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Python client failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for line in [
        "list: 0 items",
        "watch: ADDED cache small",
        "watch: MODIFIED cache large",
        "list with labelSelector: cache, generation 2",
        "create again: 409 Conflict",
        "delete: ok",
    ] {
        assert!(stdout.contains(line), "{line:?} missing:\n{stdout}");
    }
    // What the client really sent: JSON, a watch from the list's resourceVersion.
    let log = demo.crud.log();
    let watch = log
        .iter()
        .find(|s| s.target.contains("watch="))
        .expect("a watch request");
    assert!(
        watch.target.contains("labelSelector=owner%3Dpython"),
        "{watch:?}"
    );
    assert!(watch.accept.contains("application/json"), "{watch:?}");
    assert!(
        demo.crud
            .store()
            .get(&support::crud::store::Key {
                resource: "serviceinstances".into(),
                namespace: "default".into(),
                name: "cache".into(),
            })
            .is_none()
    );
    demo.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
