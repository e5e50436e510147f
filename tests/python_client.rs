//! The Python `kubernetes` client (`CustomObjectsApi`: list, create, watch, patch) against
//! the service-catalog CRUD server through the demo's TLS gateway, by running
//! `tests/python/crud_client.py`.
//!
//! Fails (never skips) when `python3` or its `kubernetes` package is missing: `.ci/run`
//! installs the package (`pip install kubernetes`).

#[path = "../examples/support/mod.rs"]
mod support;

use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_lists_creates_and_watches_through_the_gateway() {
    let dir =
        std::env::temp_dir().join(format!("kube-aggregator-e2e-python-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let demo = support::demo::start(&dir, Duration::from_secs(30))
        .await
        .expect("the demo starts");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/crud_client.py");
    let out = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::process::Command::new("python3")
            .arg(script)
            .arg(&demo.kubeconfig)
            .arg("default")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python client finished within 90 s")
    .unwrap_or_else(|e| {
        panic!("cannot run python3 (this test needs it and `pip install kubernetes`): {e}")
    });
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
