//! The OpenAPI of the gateway's core API (`v1`: nodes, pods, namespaces), so `kubectl
//! explain nodes`, `explain pods.spec.containers` and the other forms work as against
//! kube-apiserver: `/openapi/v2`, and `api/v1` in the `/openapi/v3` root, which the
//! aggregator merges with its APIServices' documents. Definitions are named as
//! kube-apiserver names them (`io.k8s.api.core.v1.Node`), with the fields the sample
//! objects of [`super::core_api`] carry; descriptions are short forms of k8s.io/api's.

#![allow(unreachable_pub)]

use bytes::Bytes;
use http::HeaderMap;
use http_body_util::Full;
use hyper::Response;
use serde_json::{Map, Value, json};

use super::openapi_doc::{
    self, GroupVersion, META, TIME, apimachinery_definitions, array, quantities, reference, string,
    swagger, with_description,
};

/// The v3 root key of the core API.
pub const V3_KEY: &str = "api/v1";

const GV: GroupVersion = GroupVersion::new("", "v1", "io.k8s.api.core.v1", "core_v1");

/// An object definition (not a kind) with `properties`.
fn fields(description: &str, properties: Value, required: &[&str]) -> Value {
    let mut schema =
        json!({"type": "object", "description": description, "properties": properties});
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    schema
}

fn time(description: &str) -> Value {
    with_description(reference(TIME), description)
}

fn of(kind: &str, description: &str) -> Value {
    with_description(reference(&GV.definition(kind)), description)
}

fn kinds(definitions: &mut Map<String, Value>) {
    let metadata = || with_description(reference(META), "Standard object's metadata.");
    definitions.insert(
        GV.definition("Node"),
        GV.object(
            "Node",
            "Node is a worker node in Kubernetes. Each node will have a unique identifier in the cache (i.e. in etcd).",
            json!({"metadata": metadata(),
                   "spec": of("NodeSpec", "Spec defines the behavior of a node."),
                   "status": of("NodeStatus", "Most recently observed status of the node.")}),
            &[],
        ),
    );
    definitions.insert(
        GV.definition("Pod"),
        GV.object(
            "Pod",
            "Pod is a collection of containers that can run on a host. This resource is created by clients and scheduled onto hosts.",
            json!({"metadata": metadata(),
                   "spec": of("PodSpec", "Specification of the desired behavior of the pod."),
                   "status": of("PodStatus", "Most recently observed status of the pod.")}),
            &[],
        ),
    );
    definitions.insert(
        GV.definition("Namespace"),
        GV.object(
            "Namespace",
            "Namespace provides a scope for Names. Use of multiple namespaces is optional.",
            json!({"metadata": metadata(),
                   "spec": of("NamespaceSpec", "Spec defines the behavior of the Namespace."),
                   "status": of("NamespaceStatus", "Status describes the current status of a Namespace.")}),
            &[],
        ),
    );
    for kind in ["Node", "Pod", "Namespace"] {
        definitions.insert(GV.definition(&format!("{kind}List")), GV.list(kind));
    }
}

fn node_parts(definitions: &mut Map<String, Value>) {
    let strings = |description: &str| array(description, json!({"type": "string"}));
    definitions.insert(
        GV.definition("NodeSpec"),
        fields(
            "NodeSpec describes the attributes that a node is created with.",
            json!({"podCIDR": string("PodCIDR represents the pod IP range assigned to the node."),
                   "podCIDRs": strings("podCIDRs represents the IP ranges assigned to the node for usage by Pods on that node."),
                   "providerID": string("ID of the node assigned by the cloud provider."),
                   "unschedulable": {"type": "boolean", "description": "Unschedulable controls node schedulability of new pods."}}),
            &[],
        ),
    );
    definitions.insert(
        GV.definition("NodeStatus"),
        fields(
            "NodeStatus is information about the current status of a node.",
            json!({"capacity": quantities("Capacity represents the total resources of a node."),
                   "allocatable": quantities("Allocatable represents the resources of a node that are available for scheduling."),
                   "conditions": array("Conditions is an array of current observed node conditions.", reference(&GV.definition("NodeCondition"))),
                   "addresses": array("List of addresses reachable to the node.", reference(&GV.definition("NodeAddress"))),
                   "nodeInfo": of("NodeSystemInfo", "Set of ids/uuids to uniquely identify the node.")}),
            &[],
        ),
    );
    definitions.insert(
        GV.definition("NodeCondition"),
        fields(
            "NodeCondition contains condition information for a node.",
            json!({"type": string("Type of node condition."),
                   "status": string("Status of the condition, one of True, False, Unknown."),
                   "lastHeartbeatTime": time("Last time we got an update on a given condition."),
                   "lastTransitionTime": time("Last time the condition transit from one status to another."),
                   "reason": string("(brief) reason for the condition's last transition."),
                   "message": string("Human readable message indicating details about last transition.")}),
            &["type", "status"],
        ),
    );
    definitions.insert(
        GV.definition("NodeAddress"),
        fields(
            "NodeAddress contains information for the node's address.",
            json!({"type": string("Node address type, one of Hostname, ExternalIP or InternalIP."),
                   "address": string("The node address.")}),
            &["type", "address"],
        ),
    );
    let info = [
        ("machineID", "MachineID reported by the node."),
        ("systemUUID", "SystemUUID reported by the node."),
        ("bootID", "Boot ID reported by the node."),
        (
            "kernelVersion",
            "Kernel Version reported by the node from 'uname -r'.",
        ),
        (
            "osImage",
            "OS Image reported by the node from /etc/os-release.",
        ),
        (
            "containerRuntimeVersion",
            "ContainerRuntime Version reported by the node through runtime remote API.",
        ),
        ("kubeletVersion", "Kubelet Version reported by the node."),
        (
            "kubeProxyVersion",
            "Deprecated: KubeProxy Version reported by the node.",
        ),
        (
            "operatingSystem",
            "The Operating System reported by the node.",
        ),
        ("architecture", "The Architecture reported by the node."),
    ];
    let properties: Map<String, Value> = info
        .iter()
        .map(|(k, d)| ((*k).to_owned(), string(d)))
        .collect();
    let required: Vec<&str> = info.iter().map(|(k, _)| *k).collect();
    definitions.insert(
        GV.definition("NodeSystemInfo"),
        fields(
            "NodeSystemInfo is a set of ids/uuids to uniquely identify the node.",
            Value::Object(properties),
            &required,
        ),
    );
}

fn pod_parts(definitions: &mut Map<String, Value>) {
    definitions.insert(
        GV.definition("PodSpec"),
        fields(
            "PodSpec is a description of a pod.",
            json!({"containers": array("List of containers belonging to the pod.", reference(&GV.definition("Container"))),
                   "nodeName": string("NodeName indicates in which node this pod is scheduled."),
                   "restartPolicy": string("Restart policy for all containers within the pod. One of Always, OnFailure, Never."),
                   "serviceAccountName": string("ServiceAccountName is the name of the ServiceAccount to use to run this pod."),
                   "schedulerName": string("If specified, the pod will be dispatched by specified scheduler.")}),
            &["containers"],
        ),
    );
    definitions.insert(
        GV.definition("Container"),
        fields(
            "A single application container that you want to run within a pod.",
            json!({"name": string("Name of the container specified as a DNS_LABEL."),
                   "image": string("Container image name."),
                   "imagePullPolicy": string("Image pull policy. One of Always, Never, IfNotPresent."),
                   "resources": of("ResourceRequirements", "Compute Resources required by this container.")}),
            &["name"],
        ),
    );
    definitions.insert(
        GV.definition("ResourceRequirements"),
        fields(
            "ResourceRequirements describes the compute resource requirements.",
            json!({"limits": quantities("Limits describes the maximum amount of compute resources allowed."),
                   "requests": quantities("Requests describes the minimum amount of compute resources required.")}),
            &[],
        ),
    );
    definitions.insert(
        GV.definition("PodStatus"),
        fields(
            "PodStatus represents information about the status of a pod.",
            json!({"phase": string("The phase of a Pod: Pending, Running, Succeeded, Failed or Unknown."),
                   "conditions": array("Current service state of pod.", reference(&GV.definition("PodCondition"))),
                   "hostIP": string("hostIP holds the IP address of the host to which the pod is assigned."),
                   "podIP": string("podIP address allocated to the pod."),
                   "startTime": time("RFC 3339 date and time at which the object was acknowledged by the Kubelet."),
                   "qosClass": string("The Quality of Service (QOS) classification assigned to the pod.")}),
            &[],
        ),
    );
    definitions.insert(
        GV.definition("PodCondition"),
        fields(
            "PodCondition contains details for the current condition of this pod.",
            json!({"type": string("Type is the type of the condition."),
                   "status": string("Status is the status of the condition. Can be True, False, Unknown."),
                   "lastTransitionTime": time("Last time the condition transitioned from one status to another.")}),
            &["type", "status"],
        ),
    );
    definitions.insert(
        GV.definition("NamespaceSpec"),
        fields(
            "NamespaceSpec describes the attributes on a Namespace.",
            json!({"finalizers": array("Finalizers is an opaque list of values that must be empty to permanently remove object from storage.", json!({"type": "string"}))}),
            &[],
        ),
    );
    definitions.insert(
        GV.definition("NamespaceStatus"),
        fields(
            "NamespaceStatus is information about the current status of a Namespace.",
            json!({"phase": string("Phase is the current lifecycle phase of the namespace: Active or Terminating.")}),
            &[],
        ),
    );
}

/// The Swagger 2.0 spec of the core API's `v1` as served here.
pub fn v2_spec() -> Value {
    let mut definitions = Map::new();
    kinds(&mut definitions);
    node_parts(&mut definitions);
    pod_parts(&mut definitions);
    apimachinery_definitions(&mut definitions);
    swagger(
        "Kubernetes",
        super::core_api::GIT_VERSION,
        json!({
            "/api/v1/nodes": GV.list_operation("Node", "listCoreV1Node", false),
            "/api/v1/nodes/{name}": GV.get_operation("Node", "readCoreV1Node", false),
            "/api/v1/pods": GV.list_operation("Pod", "listCoreV1PodForAllNamespaces", false),
            "/api/v1/namespaces": GV.list_operation("Namespace", "listCoreV1Namespace", false),
            "/api/v1/namespaces/{name}": GV.get_operation("Namespace", "readCoreV1Namespace", false),
            "/api/v1/namespaces/{namespace}/pods": GV.list_operation("Pod", "listCoreV1NamespacedPod", true),
            "/api/v1/namespaces/{namespace}/pods/{name}": GV.get_operation("Pod", "readCoreV1NamespacedPod", true),
        }),
        definitions,
    )
}

/// Answers `/openapi/v2`, `/openapi/v3` and `/openapi/v3/api/v1`; `None` for any other
/// path.
pub fn handle(
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Option<Response<Full<Bytes>>> {
    openapi_doc::handle(path, query, headers, V3_KEY, v2_spec)
}
