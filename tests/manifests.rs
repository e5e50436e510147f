//! APIService validation at the registry and the manifest-directory source (docs/upstream-behaviour.md
//! §1.2; kube-aggregator `pkg/apis/apiregistration/validation/validation.go`).
//!
//! An invalid APIService is rejected whole with the apiserver's 422 message and the last
//! good state stays; a manifest that does not parse keeps its file's last good content.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kube_aggregator::apiservice::ApiService;
use kube_aggregator::registry::{Registry, RoutingTable};
use kube_aggregator::rt::Timer;
use kube_aggregator::source::{ApiServiceEvent, ApiServiceSource, ManifestDir};
use kube_aggregator::transport::{BackendClient, BackendTarget, Transport, TransportError};
use serde_json::json;

/// No backend is ever called here; routes only need to exist.
struct NoTransport;

impl Transport for NoTransport {
    fn client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        Err(TransportError::new(format!(
            "{}: these tests reach no backends",
            target.server_name
        )))
    }
}

fn apiservice(value: serde_json::Value) -> ApiService {
    serde_json::from_value(value).expect("APIService JSON")
}

/// A valid remote APIService `<version>.<group>` with the given priorities.
fn remote(version: &str, group: &str, group_priority: i32, version_priority: i32) -> ApiService {
    apiservice(json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": format!("{version}.{group}")},
        "spec": {
            "service": {"namespace": "extensions", "name": "api"},
            "group": group,
            "version": version,
            "insecureSkipTLSVerify": true,
            "groupPriorityMinimum": group_priority,
            "versionPriority": version_priority
        }
    }))
}

/// Every APIService of the snapshot, status included, by name.
fn contents(table: &RoutingTable) -> Vec<ApiService> {
    table.routes().map(|r| r.apiservice.clone()).collect()
}

fn names(list: &[ApiService]) -> Vec<&str> {
    list.iter().map(ApiService::name).collect()
}

const PREFIX: &str = "APIService.apiregistration.k8s.io";

#[test]
fn invalid_apiservices_are_rejected_with_upstream_messages_and_change_nothing() {
    let good = remote("v1", "widgets.example.io", 1000, 15);
    let edit = |patch: &dyn Fn(&mut serde_json::Value)| {
        let mut v = serde_json::to_value(&good).expect("APIService to JSON");
        patch(&mut v);
        apiservice(v)
    };
    let cases: Vec<(&str, ApiService, String)> = vec![
        (
            "name is not version.group",
            edit(&|v| v["metadata"]["name"] = json!("v1.gadgets.example.io")),
            format!(
                r#"{PREFIX} "v1.gadgets.example.io" is invalid: metadata.name: Invalid value: "v1.gadgets.example.io": must be `spec.version+"."+spec.group`: "v1.widgets.example.io""#
            ),
        ),
        (
            "groupPriorityMinimum 0, with an otherwise valid spec change",
            edit(&|v| {
                v["spec"]["groupPriorityMinimum"] = json!(0);
                v["spec"]["service"]["name"] = json!("moved");
            }),
            format!(
                r#"{PREFIX} "v1.widgets.example.io" is invalid: spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000"#
            ),
        ),
        (
            "groupPriorityMinimum 20001",
            edit(&|v| v["spec"]["groupPriorityMinimum"] = json!(20001)),
            format!(
                r#"{PREFIX} "v1.widgets.example.io" is invalid: spec.groupPriorityMinimum: Invalid value: 20001: must be positive and less than 20000"#
            ),
        ),
        (
            "versionPriority 1001",
            edit(&|v| v["spec"]["versionPriority"] = json!(1001)),
            format!(
                r#"{PREFIX} "v1.widgets.example.io" is invalid: spec.versionPriority: Invalid value: 1001: must be positive and less than 1000"#
            ),
        ),
        (
            "both priorities 0: every problem, in upstream order",
            edit(&|v| {
                v["spec"]["groupPriorityMinimum"] = json!(0);
                v["spec"]["versionPriority"] = json!(0);
            }),
            format!(
                r#"{PREFIX} "v1.widgets.example.io" is invalid: [spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000, spec.versionPriority: Invalid value: 0: must be positive and less than 1000]"#
            ),
        ),
        (
            "local with a caBundle",
            edit(&|v| {
                let spec = v["spec"].as_object_mut().expect("spec object");
                spec.remove("service");
                spec.remove("insecureSkipTLSVerify");
                // base64 of "hello": five bytes
                spec.insert("caBundle".into(), json!("aGVsbG8="));
            }),
            format!(
                r#"{PREFIX} "v1.widgets.example.io" is invalid: spec.caBundle: Invalid value: "5 bytes": local APIServices may not have a caBundle"#
            ),
        ),
        (
            "local with insecureSkipTLSVerify",
            edit(&|v| {
                v["spec"]
                    .as_object_mut()
                    .expect("spec object")
                    .remove("service");
            }),
            format!(
                r#"{PREFIX} "v1.widgets.example.io" is invalid: spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify"#
            ),
        ),
        (
            "insecureSkipTLSVerify with a caBundle",
            edit(&|v| v["spec"]["caBundle"] = json!("aGVsbG8=")),
            format!(
                r#"{PREFIX} "v1.widgets.example.io" is invalid: spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present"#
            ),
        ),
        (
            "service without a namespace",
            edit(&|v| {
                v["spec"]["service"]
                    .as_object_mut()
                    .expect("service object")
                    .remove("namespace");
            }),
            format!(
                r#"{PREFIX} "v1.widgets.example.io" is invalid: spec.service.namespace: Required value"#
            ),
        ),
        (
            "service port 0",
            edit(&|v| v["spec"]["service"]["port"] = json!(0)),
            format!(
                r#"{PREFIX} "v1.widgets.example.io" is invalid: spec.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive"#
            ),
        ),
        (
            "empty group with a version other than v1",
            apiservice(json!({
                "metadata": {"name": "v2."},
                "spec": {"version": "v2", "groupPriorityMinimum": 1, "versionPriority": 1}
            })),
            format!(
                r#"{PREFIX} "v2." is invalid: spec.group: Required value: only v1 may have an empty group and it better be legacy kube"#
            ),
        ),
    ];

    // Each case runs on its own registry holding the good version, and every mismatch is
    // collected, so one wrongly accepted case neither hides nor taints the others.
    let mut failures = Vec::new();
    for (case, svc, message) in cases {
        let registry = Registry::new(NoTransport);
        registry
            .apply(ApiServiceEvent::Applied(good.clone()))
            .expect("valid APIService");
        let before = contents(&registry.snapshot());
        match registry.apply(ApiServiceEvent::Applied(svc.clone())) {
            Ok(()) => failures.push(format!("{case}: accepted, expected {message:?}")),
            Err(err) => {
                if err.to_string() != message {
                    failures.push(format!(
                        "{case}: got {:?}, expected {message:?}",
                        err.to_string()
                    ));
                }
                if err.rejected.len() != 1 || err.rejected[0].name != svc.name() {
                    failures.push(format!("{case}: rejected {:?}", err.rejected));
                }
            }
        }
        if contents(&registry.snapshot()) != before {
            failures.push(format!("{case}: the snapshot changed"));
        }
        // The last good version still routes.
        let table = registry.snapshot();
        let service = table
            .lookup("widgets.example.io", "v1")
            .and_then(|r| r.apiservice.spec.service.clone());
        if service.map(|s| s.name) != Some("api".to_owned()) {
            failures.push(format!(
                "{case}: v1.widgets.example.io no longer routes to extensions/api"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The v1 JSON name is `insecureSkipTLSVerify` (types.go `json:"insecureSkipTLSVerify,omitempty"`),
/// which serde's camelCase does not produce from `insecure_skip_tls_verify`.
#[test]
fn insecure_skip_tls_verify_uses_the_upstream_field_name() {
    let dir = TempDir::new("insecure");
    dir.write(
        "metrics.yaml",
        MULTI_DOC_YAML.split_once("---\n").expect("two documents").0,
    );
    let loaded = ManifestDir::load(dir.path()).expect("valid manifest");
    assert_eq!(names(&loaded), ["v1beta1.metrics.k8s.io"]);
    assert!(
        loaded[0].spec.insecure_skip_tls_verify,
        "`insecureSkipTLSVerify: true` in a manifest was read as false"
    );
    let svc = remote("v1", "widgets.example.io", 1000, 15);
    assert!(
        svc.spec.insecure_skip_tls_verify,
        "JSON `insecureSkipTLSVerify: true` was read as false"
    );
    let written = serde_json::to_value(&svc).expect("APIService to JSON");
    assert_eq!(
        written["spec"]["insecureSkipTLSVerify"],
        json!(true),
        "{written}"
    );
}

#[test]
fn a_resync_applies_the_valid_apiservices_and_rejects_only_the_invalid_one() {
    let registry = Registry::new(NoTransport);
    registry
        .apply(ApiServiceEvent::Resynced(vec![
            remote("v1", "a.example.io", 1000, 15),
            remote("v1", "b.example.io", 1000, 15),
            remote("v1", "gone.example.io", 1000, 15),
        ]))
        .expect("valid resync");

    let mut bad_b = remote("v1", "b.example.io", 1000, 15);
    bad_b.spec.version_priority = 1001;
    let err = registry
        .apply(ApiServiceEvent::Resynced(vec![
            remote("v1", "a.example.io", 1000, 20),
            bad_b,
            remote("v1", "c.example.io", 1000, 15),
        ]))
        .expect_err("one invalid APIService");
    assert_eq!(
        err.to_string(),
        format!(
            r#"{PREFIX} "v1.b.example.io" is invalid: spec.versionPriority: Invalid value: 1001: must be positive and less than 1000"#
        )
    );
    assert_eq!(err.rejected.len(), 1, "{err:?}");

    let table = registry.snapshot();
    let all = contents(&table);
    // Not listed: deleted. Invalid: the previous version stays. Valid: applied.
    assert_eq!(
        names(&all),
        ["v1.a.example.io", "v1.b.example.io", "v1.c.example.io"]
    );
    let priority = |name: &str| table.get(name).map(|r| r.apiservice.spec.version_priority);
    assert_eq!(priority("v1.a.example.io"), Some(20));
    assert_eq!(priority("v1.b.example.io"), Some(15));
    assert_eq!(priority("v1.c.example.io"), Some(15));
    assert!(table.lookup("gone.example.io", "v1").is_none());
}

// ---- The manifest directory -----------------------------------------------------------

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kube-aggregator-manifests-{}-{tag}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    /// Writes through a rename, as editors and ConfigMap mounts do, so a poll never reads
    /// half a file.
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let tmp = self.0.join(format!(".{name}.tmp"));
        let path = self.0.join(name);
        std::fs::write(&tmp, text).expect("write manifest");
        std::fs::rename(&tmp, &path).expect("rename manifest");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const MULTI_DOC_YAML: &str = r#"apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.metrics.k8s.io
spec:
  service:
    namespace: kube-system
    name: metrics-server
  group: metrics.k8s.io
  version: v1beta1
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 100
  versionPriority: 100
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1.widgets.example.io
spec:
  group: widgets.example.io
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: 15
---
"#;

fn list_json(items: &[ApiService]) -> String {
    serde_json::to_string_pretty(&json!({"apiVersion": "v1", "kind": "List", "items": items}))
        .expect("List JSON")
}

fn local(version: &str, group: &str) -> ApiService {
    apiservice(json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": format!("{version}.{group}")},
        "spec": {"group": group, "version": version, "groupPriorityMinimum": 1000, "versionPriority": 10}
    }))
}

/// The registry's APIServices once `name` is among them (within 5 s).
async fn once_applied(registry: &Registry, name: &str) -> Vec<ApiService> {
    eventually(registry, name, |t| t.get(name).is_some()).await
}

async fn eventually(
    registry: &Registry,
    what: &str,
    check: impl Fn(&RoutingTable) -> bool,
) -> Vec<ApiService> {
    let limit = Duration::from_secs(5);
    let deadline = Instant::now() + limit;
    loop {
        let table = registry.snapshot_owned();
        if check(&table) {
            return contents(&table);
        }
        if Instant::now() >= deadline {
            panic!(
                "{what}: not within {limit:?}; registry holds {:?}",
                names(&contents(&table))
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifest_dir_follows_edits_and_keeps_the_last_good_content_of_a_broken_file() {
    let dir = TempDir::new("follow");
    let yaml = dir.write("a.yaml", MULTI_DOC_YAML);
    let json_list = vec![
        local("v1alpha1", "widgets.example.io"),
        remote("v2", "gadgets.example.io", 2000, 15),
    ];
    dir.write("b.json", &list_json(&json_list));
    dir.write("notes.txt", "not a manifest: {{{");

    // Start-up: everything, files in name order, documents in file order.
    let loaded = ManifestDir::load(dir.path()).expect("valid manifests");
    let expected = [
        "v1beta1.metrics.k8s.io",
        "v1.widgets.example.io",
        "v1alpha1.widgets.example.io",
        "v2.gadgets.example.io",
    ];
    assert_eq!(names(&loaded), expected);
    let interval = Duration::from_millis(50);
    let mut first = ManifestDir::new(dir.path(), Timer::tokio(), interval);
    let event = tokio::time::timeout(Duration::from_secs(5), first.next_event())
        .await
        .expect("the initial event is immediate");
    match event {
        Some(ApiServiceEvent::Resynced(all)) => {
            assert_eq!(names(&all), expected);
            assert_eq!(all, loaded);
        }
        other => panic!("expected the initial Resynced, got {other:?}"),
    }
    drop(first);

    let registry = Registry::new(NoTransport);
    let source = ManifestDir::new(dir.path(), Timer::tokio(), interval);
    let task = tokio::spawn(registry.clone().run(source));
    eventually(&registry, "the initial four APIServices", |t| t.len() == 4).await;

    // A broken edit to a.yaml, and, after it, a valid addition to b.json: once the
    // addition shows, the directory was rescanned with a.yaml broken.
    dir.write(
        "a.yaml",
        &MULTI_DOC_YAML.replace("groupPriorityMinimum: 1000", "groupPriorityMinimum: lots"),
    );
    let mut grown = json_list.clone();
    grown.push(remote("v3", "gadgets.example.io", 2000, 20));
    dir.write("b.json", &list_json(&grown));
    let after = once_applied(&registry, "v3.gadgets.example.io").await;
    assert_eq!(
        names(&after),
        [
            "v1.widgets.example.io",
            "v1alpha1.widgets.example.io",
            "v1beta1.metrics.k8s.io",
            "v2.gadgets.example.io",
            "v3.gadgets.example.io"
        ]
    );
    {
        let table = registry.snapshot();
        assert!(table.lookup("metrics.k8s.io", "v1beta1").is_some());
        let widgets = table
            .lookup("widgets.example.io", "v1")
            .expect("the last good v1.widgets.example.io still routes");
        assert_eq!(widgets.apiservice.spec.group_priority_minimum, 1000);
    }
    let err = ManifestDir::load(dir.path()).expect_err("a.yaml does not parse");
    assert_eq!(err.file, yaml);
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("{}: document 1: ", yaml.display())),
        "{text}"
    );
    assert!(text.contains("spec.groupPriorityMinimum"), "{text}");

    // Fixed, with changes: the metrics document dropped, a priority raised.
    let fixed = MULTI_DOC_YAML
        .split_once("---\n")
        .map(|(_, rest)| rest.replace("versionPriority: 15", "versionPriority: 20"))
        .expect("two documents");
    dir.write("a.yaml", &fixed);
    eventually(&registry, "the fixed a.yaml applied", |t| {
        t.get("v1beta1.metrics.k8s.io").is_none()
            && t.get("v1.widgets.example.io")
                .is_some_and(|r| r.apiservice.spec.version_priority == 20)
    })
    .await;
    assert!(ManifestDir::load(dir.path()).is_ok());

    std::fs::remove_file(dir.path().join("b.json")).expect("remove b.json");
    let left = eventually(&registry, "b.json's APIServices removed", |t| t.len() == 1).await;
    assert_eq!(names(&left), ["v1.widgets.example.io"]);
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifest_dir_with_an_invalid_apiservice_applies_the_rest() {
    let dir = TempDir::new("invalid");
    let mut invalid = remote("v1", "bad.example.io", 1000, 15);
    invalid.spec.version_priority = 1001;
    dir.write(
        "list.json",
        &list_json(&[
            remote("v1", "good.example.io", 1000, 15),
            invalid,
            local("v1", "local.example.io"),
        ]),
    );
    // The strict start-up load refuses it, naming the file and where in it; the polling
    // source applies the rest.
    let err = ManifestDir::load(dir.path()).expect_err("the invalid APIService is refused");
    assert_eq!(err.file, dir.path().join("list.json"));
    assert!(
        err.detail.starts_with("document 0: items[1]: ") && err.detail.contains("versionPriority"),
        "{err}"
    );
    let registry = Registry::new(NoTransport);
    let source = ManifestDir::new(dir.path(), Timer::tokio(), Duration::from_millis(50));
    let task = tokio::spawn(registry.clone().run(source));
    let applied = eventually(&registry, "the two valid APIServices", |t| t.len() == 2).await;
    assert_eq!(
        names(&applied),
        ["v1.good.example.io", "v1.local.example.io"]
    );
    // A file written later is applied by a later poll; by then the invalid one has had
    // every chance to arrive, and has not.
    dir.write(
        "zz-later.json",
        &list_json(&[remote("v1", "later.example.io", 1000, 15)]),
    );
    let applied = once_applied(&registry, "v1.later.example.io").await;
    assert_eq!(
        names(&applied),
        [
            "v1.good.example.io",
            "v1.later.example.io",
            "v1.local.example.io"
        ]
    );
    task.abort();
}
