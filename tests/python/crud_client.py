"""The Python `kubernetes` client against the service catalog through the gateway.

Lists, creates and watches ServiceInstances with CustomObjectsApi, as a Python operator
would. Run by tests/python_client.rs with the demo's kubeconfig; prints one line per
check and exits non-zero on the first failure (or when the package is missing).

    python3 tests/python/crud_client.py KUBECONFIG NAMESPACE
"""

import sys
import threading

try:
    from kubernetes import client, config, watch
except ImportError as e:  # the test must fail, not skip
    print(f"the kubernetes package is missing: {e} (pip install kubernetes)", file=sys.stderr)
    sys.exit(3)

GROUP, VERSION, PLURAL = "servicecatalog.example.io", "v1beta1", "serviceinstances"


def instance(name, plan):
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ServiceInstance",
        "metadata": {"name": name, "labels": {"owner": "python"}},
        "spec": {"clusterServiceClassExternalName": "redis", "clusterServicePlanExternalName": plan},
    }


def main():
    kubeconfig, namespace = sys.argv[1], sys.argv[2]
    config.load_kube_config(config_file=kubeconfig)
    api = client.CustomObjectsApi()

    listed = api.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    assert listed["kind"] == "ServiceInstanceList", listed
    before = len(listed["items"])
    rv = listed["metadata"]["resourceVersion"]
    print(f"list: {before} items at resourceVersion {rv}")

    created = api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, instance("cache", "small"))
    assert created["metadata"]["uid"] and created["metadata"]["generation"] == 1, created
    print(f"create: {created['metadata']['name']} uid {created['metadata']['uid']}")

    # Watch from the list's resourceVersion: the create is replayed, then a write made
    # after the watch started arrives.
    seen = []
    w = watch.Watch()

    def later():
        patch = {"spec": {"clusterServicePlanExternalName": "large"}}
        api.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "cache", patch)

    timer = None
    for event in w.stream(api.list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL,
                          resource_version=rv, label_selector="owner=python", timeout_seconds=20):
        obj = event["object"]
        seen.append((event["type"], obj["spec"]["clusterServicePlanExternalName"]))
        print(f"watch: {event['type']} {obj['metadata']['name']} {obj['spec']['clusterServicePlanExternalName']}")
        if len(seen) == 1:
            timer = threading.Timer(0.2, later)
            timer.start()
        if len(seen) == 2:
            w.stop()
    assert seen == [("ADDED", "small"), ("MODIFIED", "large")], seen

    listed = api.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, label_selector="owner=python")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["cache"], listed
    assert listed["items"][0]["metadata"]["generation"] == 2, listed
    print("list with labelSelector: cache, generation 2")

    try:
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, instance("cache", "small"))
        raise AssertionError("a second create succeeded")
    except client.exceptions.ApiException as e:
        assert e.status == 409, e
        print(f"create again: {e.status} {e.reason}")

    api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "cache")
    print("delete: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
