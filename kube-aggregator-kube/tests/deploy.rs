//! `examples/deploy/`: every object is a valid object of its kind (it decodes as its
//! `k8s-openapi` type and nothing of it is lost on the way), and the RBAC rules grant
//! exactly what the crate's clients do against the scripted API server: every request
//! they make is allowed, and no rule grants what no request needs.

pub mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use kube_aggregator::apiservice::{ConditionStatus, ServiceReference};
use kube_aggregator::availability::ServiceResolver;
use kube_aggregator::registry::Registry;
use kube_aggregator::transport::InMemoryTransport;
use kube_aggregator_kube::{
    ApiServiceWatch, KubeServiceResolver, LeaderElection, LeaseTiming, StatusWriter,
};
use serde_json::Value;
use support::ScriptedApiServer;

/// The gateway's namespace in the manifests.
const NAMESPACE: &str = "kube-aggregator";

fn deploy_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/deploy")
}

/// Every object of every manifest, with the file it is in.
fn objects() -> Vec<(String, Value)> {
    let mut files: Vec<_> = std::fs::read_dir(deploy_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no manifests in {}",
        deploy_dir().display()
    );
    let mut objects = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(document)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            if !value.is_null() {
                objects.push((file.display().to_string(), value));
            }
        }
    }
    objects
}

/// Decodes `value` as `T` and encodes it again: what the type does not know is lost,
/// and the two differ.
fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(file: &str, value: &Value) -> T {
    let typed: T = serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("{file}: {} does not decode: {e}", value["kind"]));
    let again = serde_json::to_value(&typed).unwrap();
    assert_eq!(
        &again, value,
        "{file}: {} loses fields as its type",
        value["kind"]
    );
    typed
}

#[test]
fn every_object_decodes_as_its_kind_with_nothing_lost() {
    let mut kinds = BTreeSet::new();
    for (file, value) in objects() {
        let kind = value["kind"].as_str().unwrap_or_default().to_owned();
        match kind.as_str() {
            "Namespace" => drop(round_trip::<Namespace>(&file, &value)),
            "ServiceAccount" => drop(round_trip::<ServiceAccount>(&file, &value)),
            "ClusterRole" => drop(round_trip::<ClusterRole>(&file, &value)),
            "ClusterRoleBinding" => drop(round_trip::<ClusterRoleBinding>(&file, &value)),
            "Role" => drop(round_trip::<Role>(&file, &value)),
            "RoleBinding" => drop(round_trip::<RoleBinding>(&file, &value)),
            "ConfigMap" => drop(round_trip::<ConfigMap>(&file, &value)),
            "Service" => drop(round_trip::<Service>(&file, &value)),
            "PodDisruptionBudget" => drop(round_trip::<PodDisruptionBudget>(&file, &value)),
            "Deployment" => {
                let deployment = round_trip::<Deployment>(&file, &value);
                let spec = deployment.spec.unwrap();
                assert_eq!(spec.replicas, Some(2), "{file}: two replicas");
                let pod = spec.template.spec.unwrap();
                assert_eq!(pod.service_account_name.as_deref(), Some("kube-aggregator"));
            }
            other => panic!("{file}: unexpected kind {other:?}"),
        }
        kinds.insert(kind);
    }
    for kind in [
        "Deployment",
        "ServiceAccount",
        "ClusterRole",
        "Role",
        "Service",
        "PodDisruptionBudget",
    ] {
        assert!(kinds.contains(kind), "no {kind} in examples/deploy/");
    }
}

/// What one request needs: API group, resource (with `/subresource`), verb, and where
/// (`*` for the whole cluster, else the namespace).
type Need = (String, String, String, String);

/// The RBAC attributes of `request` (`METHOD path?query`), as kube-apiserver's
/// RequestInfo resolves them (k8s.io/apiserver `pkg/endpoints/request/requestinfo.go`).
fn need(request: &str) -> Need {
    let (method, target) = request.split_once(' ').unwrap();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match parts[..] {
        ["api", "v1", ref rest @ ..] => (String::new(), rest.to_vec()),
        ["apis", group, _version, ref rest @ ..] => (group.to_owned(), rest.to_vec()),
        _ => panic!("not a resource request: {request}"),
    };
    let (scope, rest) = match rest[..] {
        ["namespaces", namespace, ref rest @ ..] if !rest.is_empty() => {
            (namespace.to_owned(), rest.to_vec())
        }
        _ => ("*".to_owned(), rest),
    };
    let resource = match rest[..] {
        [resource] | [resource, _] => resource.to_owned(),
        [resource, _, subresource] => format!("{resource}/{subresource}"),
        _ => panic!("not a resource request: {request}"),
    };
    let watching = query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    let verb = match (method, rest.len()) {
        ("GET", 1) if watching => "watch",
        ("GET", 1) => "list",
        ("GET", _) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", _) => "delete",
        _ => panic!("unexpected method: {request}"),
    };
    (group, resource, verb.to_owned(), scope)
}

/// What the rules grant, each group × resource × verb, in `scope`.
fn grants(rules: &[PolicyRule], scope: &str) -> BTreeSet<Need> {
    let mut granted = BTreeSet::new();
    for rule in rules {
        assert!(rule.resource_names.is_none() && rule.non_resource_urls.is_none());
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    assert!(
                        group != "*" && resource != "*" && verb != "*",
                        "a wildcard grants too much"
                    );
                    granted.insert((
                        group.clone(),
                        resource.clone(),
                        verb.clone(),
                        scope.to_owned(),
                    ));
                }
            }
        }
    }
    granted
}

/// The rules of the manifests' ClusterRole (for the cluster) and Roles (each for its
/// namespace), only those bound to the gateway's service account.
fn granted() -> BTreeSet<Need> {
    let objects = objects();
    let bound = |kind: &str, name: &str| {
        objects.iter().any(|(_, o)| {
            let binding = matches!(
                o["kind"].as_str(),
                Some("ClusterRoleBinding" | "RoleBinding")
            );
            binding
                && o["roleRef"]["kind"] == kind
                && o["roleRef"]["name"] == name
                && o["subjects"].as_array().is_some_and(|s| {
                    s.iter().any(|s| {
                        s["kind"] == "ServiceAccount"
                            && s["name"] == "kube-aggregator"
                            && s["namespace"] == NAMESPACE
                    })
                })
        })
    };
    let mut granted = BTreeSet::new();
    for (file, value) in &objects {
        let name = value["metadata"]["name"].as_str().unwrap_or_default();
        match value["kind"].as_str() {
            Some("ClusterRole") if bound("ClusterRole", name) => {
                let role: ClusterRole = round_trip(file, value);
                granted.extend(grants(&role.rules.unwrap_or_default(), "*"));
            }
            Some("Role") if bound("Role", name) => {
                let role: Role = round_trip(file, value);
                let namespace = role.metadata.namespace.clone().unwrap();
                granted.extend(grants(&role.rules.unwrap_or_default(), &namespace));
            }
            _ => {}
        }
    }
    granted
}

#[tokio::test]
async fn the_rbac_rules_grant_exactly_what_the_clients_do() {
    let server = ScriptedApiServer::start().await;
    server.apply(
        "metrics.k8s.io",
        "v1beta1",
        ("kube-system", "metrics-server"),
    );
    server.service(
        "kube-system",
        "metrics-server",
        "10.96.0.10",
        &[(443, "https")],
    );
    server.endpoint_slice(
        "kube-system",
        "metrics-server-x1",
        "metrics-server",
        ("https", 10250),
        &[("10.244.0.5", true)],
    );

    // Everything the gateway runs in a cluster: the APIService watch, both resolvers,
    // the leader election in its namespace, the status writer.
    let registry = Registry::new(InMemoryTransport::new());
    let feed = tokio::spawn(registry.clone().run(ApiServiceWatch::new(server.client())));
    let service = ServiceReference {
        namespace: "kube-system".to_owned(),
        name: "metrics-server".to_owned(),
        port: Some(443),
    };
    for resolver in [
        KubeServiceResolver::cluster_ip(server.client()),
        KubeServiceResolver::endpoint_slices(server.client()),
    ] {
        resolver.resolve(&service).await.unwrap();
    }
    let leadership =
        LeaderElection::new(server.client(), NAMESPACE, "kube-aggregator", "replica-0")
            .timing(LeaseTiming {
                lease_duration: Duration::from_secs(2),
                renew_deadline: Duration::from_secs(1),
                retry_period: Duration::from_millis(100),
            })
            .spawn()
            .unwrap();
    let writer = StatusWriter::spawn(server.client(), &registry, leadership.leading());
    let start = Instant::now();
    while registry.snapshot().get("v1beta1.metrics.k8s.io").is_none() || !leadership.is_leader() {
        assert!(start.elapsed() < Duration::from_secs(3), "not started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    registry.set_available_condition(
        "v1beta1.metrics.k8s.io",
        ConditionStatus::True,
        "Passed",
        "all checks passed",
    );
    while writer.writes() == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "no status written"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Renewals too.
    tokio::time::sleep(Duration::from_millis(300)).await;
    feed.abort();

    let used: BTreeSet<Need> = server.requests().iter().map(|r| need(r)).collect();
    let granted = granted();
    let allowed = |n: &Need| {
        granted.contains(n)
            || granted.contains(&(n.0.clone(), n.1.clone(), n.2.clone(), "*".to_owned()))
    };
    let refused: Vec<&Need> = used.iter().filter(|n| !allowed(n)).collect();
    assert!(
        refused.is_empty(),
        "requests the RBAC rules refuse: {refused:?}"
    );
    let unused: Vec<&Need> = granted.iter().filter(|g| !used.contains(*g)).collect();
    assert!(unused.is_empty(), "rules no request needs: {unused:?}");
}
