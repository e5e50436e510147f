#![allow(unreachable_pub)]
//! A small SubjectAccessReview webhook for the demo, in the shape of an authorization
//! webhook kube-apiserver's `--authorization-mode=Webhook` calls: HTTPS, one `POST` per
//! review, the review echoed back with its `status` filled in.
//!
//! The demo policy ([`decide`]):
//! - members of `system:masters` may do anything;
//! - every authenticated user may `get` the discovery and health paths, as the
//!   `system:discovery` and `system:public-info-viewer` ClusterRoles allow, so kubectl
//!   reaches the request it actually wants to make;
//! - every authenticated user may `create` the self reviews
//!   (`selfsubjectaccessreviews`, `selfsubjectrulesreviews`, `selfsubjectreviews`), as
//!   the `system:basic-user` ClusterRole allows, so `kubectl auth can-i` and `kubectl auth
//!   whoami` work for everyone;
//! - `demo-viewer` may `get`, `list` and `watch` `nodes` and `pods` in the core group,
//!   and nothing in `metrics.k8s.io`, so `kubectl --user demo-viewer top nodes` is
//!   Forbidden with kube-apiserver's wording;
//! - members of `team` may read `nodes` and `pods` in the core group and in
//!   `metrics.k8s.io`: `kubectl --as=bob --as-group=team top nodes` works for an
//!   administrator impersonating them;
//! - `demo-viewer` may read anything in the tenant `team-b`, which the review names in
//!   `spec.extra["authorization.kcp.io/cluster-name"]` (kcp's key): `kubectl --context
//!   team-b --user demo-viewer get serviceinstances -A` works, the same outside is
//!   Forbidden;
//! - only `system:masters` may `impersonate` (demo-admin may, demo-viewer may not);
//! - anything else: no opinion, which the gateway answers 403 (denials carry no reason,
//!   as RBAC's do, so the Forbidden message has no `: <reason>` suffix).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use base64::Engine as _;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use kube_aggregator::authz::{
    SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use kube_aggregator::{Body, server};
use tokio::net::TcpListener;

/// The demo's unprivileged user.
pub const DEMO_VIEWER: &str = "demo-viewer";

/// The group an administrator impersonates in the demo (`--as-group=team`).
pub const DEMO_TEAM: &str = "team";

/// The tenant in which `demo-viewer` may read everything.
pub const DEMO_VIEWER_TENANT: &str = "team-b";

/// Largest review body read.
const MAX_BODY: usize = 1 << 20;

/// Non-resource paths every authenticated user may `get` (upstream `system:discovery`
/// and `system:public-info-viewer`); a trailing `*` matches any suffix.
const PUBLIC_PATHS: &[&str] = &[
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/openapi",
    "/openapi/*",
    "/version",
    "/version/",
    "/healthz",
    "/livez",
    "/readyz",
];

/// The demo policy's answer for `spec`: `(allowed, reason)`. Not allowed means no opinion.
pub fn decide(spec: &SubjectAccessReviewSpec) -> (bool, String) {
    let in_group = |g: &str| spec.groups.iter().any(|x| x == g);
    if in_group("system:masters") {
        return (true, "system:masters may do anything".into());
    }
    if let Some(n) = &spec.non_resource_attributes {
        let public = PUBLIC_PATHS.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => n.path.starts_with(prefix),
            None => n.path == *p,
        });
        if public && n.verb == "get" && in_group("system:authenticated") {
            return (true, "discovery is open to authenticated users".into());
        }
        return (false, String::new());
    }
    if let Some(r) = &spec.resource_attributes {
        let self_review = r.verb == "create"
            && r.subresource.is_empty()
            && matches!(
                (r.group.as_str(), r.resource.as_str()),
                (
                    "authorization.k8s.io",
                    "selfsubjectaccessreviews" | "selfsubjectrulesreviews"
                ) | ("authentication.k8s.io", "selfsubjectreviews")
            );
        if self_review && in_group("system:authenticated") {
            return (true, "every user may review itself".into());
        }
        let read = matches!(r.verb.as_str(), "get" | "list" | "watch");
        let tenant = spec
            .extra
            .get(kube_aggregator::tenant::TENANT_EXTRA_KEY)
            .and_then(|v| v.first());
        if spec.user == DEMO_VIEWER && read && tenant.is_some_and(|t| t == DEMO_VIEWER_TENANT) {
            return (true, "demo-viewer may read anything in team-b".into());
        }
        let nodes_or_pods =
            matches!(r.resource.as_str(), "nodes" | "pods") && r.subresource.is_empty();
        if spec.user == DEMO_VIEWER && read && nodes_or_pods && r.group.is_empty() {
            return (true, "demo-viewer may read nodes and pods".into());
        }
        if in_group(DEMO_TEAM)
            && read
            && nodes_or_pods
            && matches!(r.group.as_str(), "" | "metrics.k8s.io")
        {
            return (true, "team may read nodes, pods and their metrics".into());
        }
    }
    (false, String::new())
}

/// A serving failure: the TLS configuration.
#[derive(Debug)]
pub struct PolicyError(pub String);

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Serves the demo policy on `listener` over TLS (`cert_pem`, `key_pem`) until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    cert_pem: &[u8],
    key_pem: &[u8],
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), PolicyError> {
    serve_with(listener, cert_pem, key_pem, policy_status, shutdown).await
}

fn policy_status(review: &SubjectAccessReview) -> SubjectAccessReviewStatus {
    let (allowed, reason) = decide(&review.spec);
    let mut status = SubjectAccessReviewStatus::default();
    status.allowed = allowed;
    if allowed {
        status.reason = reason;
    }
    status
}

/// Serves any rule the same way: each `POST`ed SubjectAccessReview is answered with
/// `rule(review)` as its status. A body that is not a review gets 400.
pub async fn serve_with(
    listener: TcpListener,
    cert_pem: &[u8],
    key_pem: &[u8],
    rule: impl Fn(&SubjectAccessReview) -> SubjectAccessReviewStatus + Send + Sync + 'static,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), PolicyError> {
    // No client CA: this webhook does not authenticate its caller.
    let tls = server::server_config(cert_pem, key_pem, b"", true)
        .map_err(|e| PolicyError(format!("policy webhook TLS: {e}")))?;
    let rule = Arc::new(rule);
    let service = tower::service_fn(move |req: Request<Incoming>| {
        let rule = rule.clone();
        async move { Ok::<_, Infallible>(answer(req, &*rule).await) }
    });
    server::serve_tls(listener, tls, service, shutdown).await;
    Ok(())
}

async fn answer(
    req: Request<Incoming>,
    rule: &(dyn Fn(&SubjectAccessReview) -> SubjectAccessReviewStatus + Send + Sync),
) -> Response<Body> {
    if req.method() != Method::POST {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "only POST".into());
    }
    let bytes = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return reply(StatusCode::BAD_REQUEST, format!("reading the review: {e}")),
    };
    let mut review: SubjectAccessReview = match serde_json::from_slice(&bytes) {
        Ok(r) => r,
        Err(e) => {
            return reply(
                StatusCode::BAD_REQUEST,
                format!("not a SubjectAccessReview: {e}"),
            );
        }
    };
    review.status = rule(&review);
    match serde_json::to_vec(&review) {
        Ok(body) => {
            let mut res = Response::new(Body::full(body));
            res.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            res
        }
        Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

fn reply(status: StatusCode, text: String) -> Response<Body> {
    let mut res = Response::new(Body::full(text));
    *res.status_mut() = status;
    res
}

/// A webhook for tests on 127.0.0.1 that records the spec of each review it is sent and
/// answers by `rule`: [`serve_with`] on a port of its own, serving `cert_pem`/`key_pem`
/// (a certificate for `127.0.0.1` that `ca_pem` signs).
#[derive(Debug)]
pub struct RecordingWebhook {
    /// Its `--authorization-webhook-config-file` content.
    pub kubeconfig: String,
    port: u16,
    reviews: Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
}

impl RecordingWebhook {
    /// Starts the webhook; it runs until the runtime stops.
    pub async fn start(
        ca_pem: &str,
        cert_pem: &str,
        key_pem: &str,
        rule: impl Fn(&serde_json::Value) -> SubjectAccessReviewStatus + Send + Sync + 'static,
    ) -> RecordingWebhook {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind webhook");
        let addr = listener.local_addr().expect("webhook address");
        let reviews = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = reviews.clone();
        let record = move |review: &SubjectAccessReview| {
            assert_eq!(review.kind, "SubjectAccessReview");
            assert_eq!(review.api_version, "authorization.k8s.io/v1");
            let spec = serde_json::to_value(&review.spec).expect("spec serializes");
            seen.lock().unwrap().push(spec.clone());
            rule(&spec)
        };
        let (cert_pem, key_pem) = (cert_pem.to_owned(), key_pem.to_owned());
        tokio::spawn(async move {
            let pending = std::future::pending();
            serve_with(
                listener,
                cert_pem.as_bytes(),
                key_pem.as_bytes(),
                record,
                pending,
            )
            .await
            .expect("webhook TLS configuration");
        });
        let server = format!("https://{addr}/authorize");
        RecordingWebhook {
            kubeconfig: webhook_kubeconfig(&server, ca_pem.as_bytes()),
            port: addr.port(),
            reviews,
        }
    }

    /// The specs received so far, oldest first; clears the record.
    pub fn take(&self) -> Vec<serde_json::Value> {
        std::mem::take(&mut *self.reviews.lock().unwrap())
    }

    /// How many reviews were received since the last [`RecordingWebhook::take`].
    pub fn count(&self) -> usize {
        self.reviews.lock().unwrap().len()
    }

    /// Writes the kubeconfig to a file in the temporary directory named after `name`, this
    /// process and the webhook's port, as `--authorization-webhook-config-file` wants; its
    /// path.
    pub fn config_file(&self, name: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!(
            "kube-aggregator-authz-{}-{}-{name}.kubeconfig",
            std::process::id(),
            self.port
        ));
        std::fs::write(&path, &self.kubeconfig).expect("write kubeconfig");
        path
    }
}

/// The `--authorization-webhook-config-file` for a webhook at `server` (an `https://` URL)
/// whose serving certificate `ca_pem` signs.
pub fn webhook_kubeconfig(server: &str, ca_pem: &[u8]) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: demo-policy\n  \
           cluster:\n    \
             server: {server}\n    \
             certificate-authority-data: {ca}\n\
         users:\n\
         - name: gateway\n  \
           user: {{}}\n\
         contexts:\n\
         - name: webhook\n  \
           context:\n    \
             cluster: demo-policy\n    \
             user: gateway\n\
         current-context: webhook\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> SubjectAccessReviewSpec {
        serde_json::from_value(v).expect("a valid spec")
    }

    fn resource(
        user: &str,
        groups: &[&str],
        verb: &str,
        group: &str,
        resource: &str,
    ) -> SubjectAccessReviewSpec {
        spec(json!({
            "user": user, "groups": groups,
            "resourceAttributes": {"verb": verb, "group": group, "version": "v1", "resource": resource}
        }))
    }

    #[test]
    fn demo_policy() {
        let viewer = ["system:authenticated"];
        let cases = [
            (
                resource(
                    "admin",
                    &["system:masters", "system:authenticated"],
                    "delete",
                    "metrics.k8s.io",
                    "nodes",
                ),
                true,
            ),
            (resource(DEMO_VIEWER, &viewer, "list", "", "nodes"), true),
            (resource(DEMO_VIEWER, &viewer, "watch", "", "pods"), true),
            (resource(DEMO_VIEWER, &viewer, "get", "", "pods"), true),
            (resource(DEMO_VIEWER, &viewer, "delete", "", "pods"), false),
            (resource(DEMO_VIEWER, &viewer, "list", "", "secrets"), false),
            (
                resource(DEMO_VIEWER, &viewer, "list", "metrics.k8s.io", "nodes"),
                false,
            ),
            (
                resource(DEMO_VIEWER, &viewer, "list", "apps", "pods"),
                false,
            ),
            (resource("someone", &viewer, "list", "", "nodes"), false),
            // Self reviews for everyone; reading metrics for the team; impersonation
            // only for system:masters.
            (
                resource(
                    DEMO_VIEWER,
                    &viewer,
                    "create",
                    "authorization.k8s.io",
                    "selfsubjectaccessreviews",
                ),
                true,
            ),
            (
                resource(
                    "x",
                    &viewer,
                    "create",
                    "authentication.k8s.io",
                    "selfsubjectreviews",
                ),
                true,
            ),
            (
                resource(
                    "x",
                    &["system:unauthenticated"],
                    "create",
                    "authentication.k8s.io",
                    "selfsubjectreviews",
                ),
                false,
            ),
            (
                resource(
                    "bob",
                    &["team", "system:authenticated"],
                    "list",
                    "metrics.k8s.io",
                    "nodes",
                ),
                true,
            ),
            (
                resource(
                    "bob",
                    &["team", "system:authenticated"],
                    "delete",
                    "metrics.k8s.io",
                    "nodes",
                ),
                false,
            ),
            (
                resource(DEMO_VIEWER, &viewer, "impersonate", "", "users"),
                false,
            ),
            // In team-b, as the review's extra says, demo-viewer reads anything.
            (
                spec(json!({"user": DEMO_VIEWER, "groups": viewer,
                    "extra": {"authorization.kcp.io/cluster-name": ["team-b"]},
                    "resourceAttributes": {"verb": "list", "group": "servicecatalog.example.io", "resource": "serviceinstances"}})),
                true,
            ),
            (
                spec(json!({"user": DEMO_VIEWER, "groups": viewer,
                    "extra": {"authorization.kcp.io/cluster-name": ["team-a"]},
                    "resourceAttributes": {"verb": "list", "group": "servicecatalog.example.io", "resource": "serviceinstances"}})),
                false,
            ),
            (
                spec(json!({"user": DEMO_VIEWER, "groups": viewer,
                    "extra": {"authorization.kcp.io/cluster-name": ["team-b"]},
                    "resourceAttributes": {"verb": "delete", "group": "servicecatalog.example.io", "resource": "serviceinstances"}})),
                false,
            ),
            (
                resource("admin", &["system:masters"], "impersonate", "", "users"),
                true,
            ),
            (
                spec(json!({"user": DEMO_VIEWER, "groups": viewer,
                    "resourceAttributes": {"verb": "get", "resource": "pods", "subresource": "log", "name": "p"}})),
                false,
            ),
            (
                spec(
                    json!({"user": DEMO_VIEWER, "groups": viewer, "nonResourceAttributes": {"path": "/apis/metrics.k8s.io/v1beta1", "verb": "get"}}),
                ),
                true,
            ),
            (
                spec(
                    json!({"user": DEMO_VIEWER, "groups": viewer, "nonResourceAttributes": {"path": "/version", "verb": "get"}}),
                ),
                true,
            ),
            (
                spec(
                    json!({"user": DEMO_VIEWER, "groups": viewer, "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}),
                ),
                false,
            ),
            (
                spec(
                    json!({"user": DEMO_VIEWER, "groups": viewer, "nonResourceAttributes": {"path": "/apis", "verb": "post"}}),
                ),
                false,
            ),
            (
                spec(
                    json!({"user": "system:anonymous", "groups": ["system:unauthenticated"], "nonResourceAttributes": {"path": "/apis", "verb": "get"}}),
                ),
                false,
            ),
        ];
        for (s, allowed) in cases {
            let (got, reason) = decide(&s);
            assert_eq!(got, allowed, "{s:?}");
            assert_eq!(
                reason.is_empty(),
                !allowed,
                "denials carry no reason, as RBAC's"
            );
        }
    }

    #[test]
    fn kubeconfig_is_readable_by_the_gateway() {
        let text = webhook_kubeconfig("https://127.0.0.1:9443/authorize", b"CA-PEM");
        let k = kube_aggregator::webhook::Kubeconfig::parse(&text, std::path::Path::new("."))
            .expect("parses");
        assert_eq!(k.server, "https://127.0.0.1:9443/authorize");
        assert_eq!(k.ca_pem.as_deref(), Some(b"CA-PEM".as_slice()));
    }
}
