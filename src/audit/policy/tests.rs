//! Upstream's checker vectors (k8s.io/apiserver `pkg/audit/policy/checker_test.go`) and
//! its validation messages.

use super::*;

fn tim() -> UserInfo {
    UserInfo::new("tim@k8s.io", ["humans", "developers"])
}

/// The requests of upstream's test, by name: (user, attributes).
fn request(name: &str) -> (Option<UserInfo>, RequestInfo) {
    let pods = |subresource: &str| RequestInfo {
        is_resource_request: true,
        verb: "get".into(),
        namespace: "default".into(),
        api_version: "v1".into(),
        resource: "pods".into(),
        subresource: subresource.into(),
        name: "busybox".into(),
        path: "/api/v1/namespaces/default/pods/busybox".into(),
        ..RequestInfo::default()
    };
    match name {
        "namespaced" => (Some(tim()), pods("")),
        "subresource" => (Some(tim()), pods("log")),
        "Unauthorized" => (None, pods("")),
        "cluster" => (
            Some(tim()),
            RequestInfo {
                is_resource_request: true,
                verb: "get".into(),
                api_group: "rbac.authorization.k8s.io".into(),
                api_version: "v1beta1".into(),
                resource: "clusterroles".into(),
                name: "edit".into(),
                path: "/apis/rbac.authorization.k8s.io/v1beta1/clusterroles/edit".into(),
                ..RequestInfo::default()
            },
        ),
        "nonResource" => (
            Some(tim()),
            RequestInfo {
                verb: "get".into(),
                path: "/logs/kubelet.log".into(),
                ..RequestInfo::default()
            },
        ),
        other => panic!("no request {other}"),
    }
}

fn rule(level: Level) -> PolicyRule {
    PolicyRule {
        level,
        users: Vec::new(),
        user_groups: Vec::new(),
        verbs: Vec::new(),
        resources: Vec::new(),
        namespaces: Vec::new(),
        non_resource_urls: Vec::new(),
        omit_stages: Vec::new(),
        omit_managed_fields: None,
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

fn resources(group: &str, resources: &[&str], names: &[&str]) -> Vec<GroupResources> {
    vec![GroupResources {
        group: group.into(),
        resources: strings(resources),
        resource_names: strings(names),
    }]
}

/// The rules of upstream's test, by name.
fn named_rule(name: &str) -> PolicyRule {
    let get = |level, res: Vec<GroupResources>| PolicyRule {
        verbs: strings(&["get"]),
        resources: res,
        ..rule(level)
    };
    match name {
        "default" => rule(Level::Metadata),
        "create" => PolicyRule {
            verbs: strings(&["create"]),
            ..rule(Level::Request)
        },
        "tims" => PolicyRule {
            users: strings(&["tim@k8s.io"]),
            ..rule(Level::Metadata)
        },
        "humans" => PolicyRule {
            user_groups: strings(&["humans"]),
            ..rule(Level::Metadata)
        },
        "serviceAccounts" => PolicyRule {
            user_groups: strings(&["system:serviceaccounts"]),
            ..rule(Level::Request)
        },
        "getPods" => get(Level::RequestResponse, resources("", &["pods"], &[])),
        "getPodLogs" => get(Level::Request, resources("", &["pods/log"], &[])),
        "getPodWildcardMatching" => get(Level::Request, resources("", &["*"], &[])),
        "getPodResourceWildcardMatching" => get(Level::Request, resources("", &["*/log"], &[])),
        "getPodSubResourceWildcardMatching" => get(Level::Request, resources("", &["pods/*"], &[])),
        "getClusterRoles" => PolicyRule {
            namespaces: strings(&[""]),
            ..get(
                Level::RequestResponse,
                resources("rbac.authorization.k8s.io", &["clusterroles"], &[]),
            )
        },
        "getLogs" => PolicyRule {
            verbs: strings(&["get"]),
            non_resource_urls: strings(&["/logs*"]),
            ..rule(Level::RequestResponse)
        },
        "getMetrics" => PolicyRule {
            verbs: strings(&["get"]),
            non_resource_urls: strings(&["/metrics"]),
            ..rule(Level::Request)
        },
        "clusterRoleEdit" => PolicyRule {
            resources: resources("rbac.authorization.k8s.io", &["clusterroles"], &["edit"]),
            ..rule(Level::Request)
        },
        "omit RequestReceived" => PolicyRule {
            omit_stages: vec![Stage::RequestReceived],
            ..rule(Level::Request)
        },
        "only audit panic" => PolicyRule {
            omit_stages: vec![
                Stage::RequestReceived,
                Stage::ResponseStarted,
                Stage::ResponseComplete,
            ],
            ..rule(Level::Request)
        },
        other => panic!("no rule {other}"),
    }
}

fn check(req: &str, level: Level, policy_stages: &[Stage], stages: &[Stage], rules: &[&str]) {
    let policy = Policy {
        omit_stages: policy_stages.to_vec(),
        rules: rules.iter().map(|r| named_rule(r)).collect(),
        omit_managed_fields: false,
    };
    let (user, info) = request(req);
    let config = policy.evaluate(user.as_ref(), &info);
    assert_eq!(config.level, level, "request {req}, rules {rules:?}");
    let mut want = stages.to_vec();
    want.sort_unstable();
    want.dedup();
    assert_eq!(config.omit_stages, want, "request {req}, rules {rules:?}");
}

/// Upstream `testAuditLevel`.
fn audit_levels(stages: &[Stage]) {
    use Level::*;
    let s = stages;
    for (req, level, rules) in [
        ("namespaced", Metadata, &["default"][..]),
        ("namespaced", None, &["create"]),
        ("namespaced", Metadata, &["tims"]),
        ("namespaced", Metadata, &["humans"]),
        ("namespaced", None, &["serviceAccounts"]),
        ("namespaced", RequestResponse, &["getPods"]),
        ("namespaced", None, &["getClusterRoles"]),
        ("namespaced", None, &["getLogs"]),
        ("namespaced", None, &["getMetrics"]),
        (
            "namespaced",
            Metadata,
            &["getMetrics", "serviceAccounts", "default"],
        ),
        (
            "namespaced",
            RequestResponse,
            &["getMetrics", "getPods", "default"],
        ),
        ("namespaced", RequestResponse, &["getPodLogs", "getPods"]),
        ("cluster", Metadata, &["default"]),
        ("cluster", None, &["create"]),
        ("cluster", Metadata, &["tims"]),
        ("cluster", Metadata, &["humans"]),
        ("cluster", None, &["serviceAccounts"]),
        ("cluster", None, &["getPods"]),
        ("cluster", RequestResponse, &["getClusterRoles"]),
        ("cluster", Request, &["clusterRoleEdit", "getClusterRoles"]),
        ("cluster", None, &["getLogs"]),
        ("cluster", None, &["getMetrics"]),
        (
            "cluster",
            Metadata,
            &["getMetrics", "serviceAccounts", "default"],
        ),
        (
            "cluster",
            RequestResponse,
            &["getMetrics", "getClusterRoles", "default"],
        ),
        ("cluster", None, &["getPodLogs", "getPods"]),
        ("nonResource", Metadata, &["default"]),
        ("nonResource", None, &["create"]),
        ("nonResource", Metadata, &["tims"]),
        ("nonResource", Metadata, &["humans"]),
        ("nonResource", None, &["serviceAccounts"]),
        ("nonResource", None, &["getPods"]),
        ("nonResource", None, &["getClusterRoles"]),
        ("nonResource", RequestResponse, &["getLogs"]),
        ("nonResource", None, &["getMetrics"]),
        (
            "nonResource",
            Metadata,
            &["getMetrics", "serviceAccounts", "default"],
        ),
        (
            "nonResource",
            RequestResponse,
            &["getLogs", "getClusterRoles", "default"],
        ),
        ("nonResource", None, &["getPodLogs", "getPods"]),
        ("subresource", Request, &["getPodLogs", "getPods"]),
        ("subresource", Request, &["getPodWildcardMatching"]),
        ("subresource", Request, &["getPodResourceWildcardMatching"]),
        (
            "subresource",
            Request,
            &["getPodSubResourceWildcardMatching"],
        ),
        ("Unauthorized", None, &["tims"]),
        ("Unauthorized", Metadata, &["tims", "default"]),
        ("Unauthorized", None, &["humans"]),
        ("Unauthorized", Metadata, &["humans", "default"]),
    ] {
        check(req, level, s, s, rules);
    }
}

#[test]
fn checker() {
    use Stage::*;
    audit_levels(&[]);
    let omit = &["omit RequestReceived", "getPods", "default"][..];
    let panic_only = &["only audit panic", "getPods", "default"][..];
    for req in ["namespaced", "cluster", "nonResource"] {
        check(req, Level::Request, &[], &[RequestReceived], omit);
        check(
            req,
            Level::Request,
            &[],
            &[RequestReceived, ResponseStarted, ResponseComplete],
            panic_only,
        );
    }
}

#[test]
fn checker_with_policy_omit_stages() {
    use Stage::*;
    let policy = [RequestReceived, ResponseStarted];
    audit_levels(&policy);
    for req in ["namespaced", "cluster"] {
        check(
            req,
            Level::Request,
            &policy,
            &policy,
            &["omit RequestReceived", "getPods", "default"],
        );
    }
    check(
        "nonResource",
        Level::Metadata,
        &policy,
        &policy,
        &["default", "omit RequestReceived", "getPods"],
    );
    for req in ["namespaced", "cluster", "nonResource"] {
        check(
            req,
            Level::Request,
            &policy,
            &[RequestReceived, ResponseStarted, ResponseComplete],
            &["only audit panic", "getPods", "default"],
        );
    }
}

#[test]
fn omit_managed_fields_rule_overrides_policy() {
    let info = RequestInfo {
        verb: "get".into(),
        ..RequestInfo::default()
    };
    for (policy_default, rule_value, want) in [
        (false, Option::None, false),
        (true, Option::None, true),
        (true, Some(false), false),
        (false, Some(true), true),
    ] {
        let policy = Policy {
            omit_stages: Vec::new(),
            rules: vec![PolicyRule {
                verbs: strings(&["get"]),
                omit_managed_fields: rule_value,
                ..rule(Level::RequestResponse)
            }],
            omit_managed_fields: policy_default,
        };
        assert_eq!(
            policy.evaluate(Option::None, &info).omit_managed_fields,
            want
        );
    }
}

#[test]
fn files_are_validated_with_upstreams_messages() {
    let err = |text: &str| Policy::from_bytes(text.as_bytes()).unwrap_err().to_string();
    let head = "apiVersion: audit.k8s.io/v1\nkind: Policy\n";
    assert_eq!(
        err(&format!("{head}rules: []\n")),
        "loaded illegal policy with 0 rules"
    );
    assert_eq!(
        err("apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: None}]\n"),
        "unknown group version field audit.k8s.io/v1beta1, Kind=Policy in policy"
    );
    assert!(err("{").starts_with("failed decoding: "), "{}", err("{"));
    assert_eq!(
        err(&format!("{head}rules: [{{}}]\n")),
        "rules[0].level: Required value"
    );
    assert_eq!(
        err(&format!(
            "{head}omitStages: [Sometimes]\nrules:\n- level: Request\n  nonResourceURLs: [healthz, /a*b]\n  namespaces: [default]\n- level: Metadata\n  resources: [{{group: Rbac.Io, resourceNames: [edit]}}]\n"
        )),
        "[omitStages[0]: Invalid value: \"Sometimes\": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic, \
         rules[0].nonResourceURLs[0]: Invalid value: \"healthz\": non-resource URL rules must begin with a '/' character, \
         rules[0].nonResourceURLs[1]: Invalid value: \"/a*b\": non-resource URL wildcards '*' must be the final character of the rule, \
         rules[0].nonResourceURLs: Invalid value: []string{\"healthz\", \"/a*b\"}: rules cannot apply to both regular resources and non-resource URLs, \
         rules[1].resources.group: Invalid value: \"Rbac.Io\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), \
         rules[1].resources.resourceNames: Invalid value: []string{\"edit\"}: using resourceNames requires at least one resource]"
    );
    // JSON is YAML.
    let policy = Policy::from_bytes(
        br#"{"apiVersion":"audit.k8s.io/v1","kind":"Policy","omitManagedFields":true,"rules":[{"level":"Metadata","omitStages":["ResponseStarted"]}]}"#,
    )
    .unwrap();
    assert!(policy.omit_managed_fields);
    assert_eq!(policy.rules[0].omit_stages, [Stage::ResponseStarted]);
}
