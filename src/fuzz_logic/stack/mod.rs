//! One arbitrary request through the whole stack.

mod fixture;

use fixture::*;
pub use fixture::{StackHeader, StackInput};

use crate::fuzz_logic::*;

/// Sends one arbitrary request through the stack of `Aggregator::builder`:
/// kube-apiserver's chain with authentication by a token file then anonymous, a recording
/// policy for impersonation, authorization and the self reviews, and the aggregator (four APIServices:
/// `metrics.k8s.io` on an in-memory backend, `down.example.com` whose backend exists but
/// whose `Available` is False, `missing.example.com` with no backend, `local.example.com`
/// served by the host) over [`crate::transport::InMemoryTransport`].
///
/// Checks that nothing panics and a response comes for every request without waiting on
/// anything; that the backend of an unavailable APIService is never called; that the
/// backend is called at most once, only for `metrics.k8s.io`, only after the policy
/// allowed, and sees the allowed user's identity exactly (`X-Remote-User`, one
/// `X-Remote-Group` per group in order, `X-Remote-Uid`, `X-Remote-Extra-*` the
/// impersonated extras and nothing more), or nothing at all when the identity cannot be
/// written whole as header values (then 503 as Go's transport refuses it), no
/// `Authorization`, `Proxy-Authorization` or `Impersonate-*`, and the request's body
/// unchanged; that a request the policy did not allow gets 403 without reaching the
/// backend; and that every error answered by the stack itself is either a `Status` with a
/// message whose `code` is the HTTP status, or Go's `http.Error` plain text where upstream
/// answers with it (the proxy handler's 503/404, `InternalError`).
///
/// Returns the response's status (`None` when the input is no request).
pub fn fuzz_stack(input: &StackInput<'_>) -> Option<StatusCode> {
    use std::sync::{Arc, Mutex, PoisonError};

    use tower::{Layer, ServiceExt};

    use crate::authn::{Anonymous, BearerToken, ConnectionInfo, Union};
    use crate::availability::StaticServiceResolver;
    use crate::transport::InMemoryTransport;
    use crate::{Aggregator, apiservice::ConditionStatus};

    let prefix =
        STACK_TARGET_PREFIXES[usize::from(input.target_prefix) % STACK_TARGET_PREFIXES.len()];
    let Ok(uri) = Uri::try_from(format!("{prefix}{}", input.target)) else {
        return None;
    };
    let method = Method::from_bytes(METHODS[usize::from(input.method) % METHODS.len()].as_bytes())
        .unwrap_or(Method::GET);

    // The extension servers and the table.
    let metrics_seen = Arc::new(Mutex::new(Vec::new()));
    let down_seen = Arc::new(Mutex::new(Vec::new()));
    let transport = InMemoryTransport::new();
    transport.insert(
        "metrics-server.kube-system.svc",
        recording_backend(metrics_seen.clone()),
    );
    transport.insert("down.default.svc", recording_backend(down_seen.clone()));
    let services = vec![
        {
            let mut s = stack_apiservice("metrics.k8s.io", Some(("kube-system", "metrics-server")));
            s.metadata.name = "v1beta1.metrics.k8s.io".to_owned();
            s.spec.version = "v1beta1".to_owned();
            s
        },
        stack_apiservice("down.example.com", Some(("default", "down"))),
        stack_apiservice("missing.example.com", Some(("default", "missing"))),
        stack_apiservice("local.example.com", None),
    ];
    let mut resolver = StaticServiceResolver::new();
    for (ns, name, addr) in [
        ("kube-system", "metrics-server", "10.0.0.5:4443"),
        ("default", "down", "10.0.0.9:443"),
        ("default", "missing", "10.0.0.10:443"),
    ] {
        if let Err(e) = resolver.insert(ns, name, 443, addr) {
            panic!("resolver: {e}");
        }
    }

    // Authentication and authorization.
    let tokens = match TokenFileAuthenticator::from_csv(STACK_TOKENS) {
        Ok(t) => t,
        Err(e) => panic!("the target's token file: {e}"),
    };
    let authn = Union::new()
        .push(BearerToken::new(tokens))
        .with_anonymous(Anonymous::new());
    let decisions: DecisionLog = Arc::new(Mutex::new(Vec::new()));
    let policy = RecordingPolicy(decisions.clone());
    // kube-apiserver's chain, as `Aggregator::builder` assembles it. The stopped clock
    // never ends a deadline, so the timeout layer is on the path without deciding
    // anything; its time never passes the worker's start-up grace either, so the worker
    // is kept (not run: the conditions are set by hand below, and its probes would call
    // the backends) and the stack routes as with a running one.
    let (aggregator, _worker) = Aggregator::builder(transport)
        .resolver(resolver)
        .authenticator(authn)
        .authorizer(policy)
        .runtime(NoExecutor::executor(), StoppedClock::new().timer())
        .max_requests_inflight(400, 200, 100)
        .build()
        .unwrap_or_else(|e| panic!("the target's stack: {e}"));
    if let Err(e) = aggregator
        .registry()
        .apply(ApiServiceEvent::Resynced(services))
    {
        panic!("the target's APIServices were rejected: {e}");
    }
    for name in ["v1beta1.metrics.k8s.io", "v1.missing.example.com"] {
        aggregator.registry().set_available_condition(
            name,
            crate::apiservice::ConditionStatus::True,
            "Passed",
            "all checks passed",
        );
    }
    aggregator.registry().set_available_condition(
        "v1.down.example.com",
        ConditionStatus::False,
        "FailedDiscoveryCheck",
        "failing or missing response from https://10.0.0.9:443/apis/down.example.com/v1",
    );
    let stack = aggregator.layer(tower::service_fn(stack_host));

    // The request.
    let mut req = Request::new(if input.body.is_empty() {
        Body::empty()
    } else {
        Body::full(Bytes::copy_from_slice(input.body))
    });
    *req.method_mut() = method.clone();
    *req.uri_mut() = uri;
    for h in &input.headers {
        let name = h.header_name();
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(h.value),
        ) else {
            continue;
        };
        req.headers_mut().append(name, value);
    }
    let credential = STACK_CREDENTIALS[usize::from(input.credential) % STACK_CREDENTIALS.len()];
    if !credential.is_empty() {
        req.headers_mut().append(
            http::header::AUTHORIZATION,
            HeaderValue::from_static(credential),
        );
    }
    let sent_authorization = req.headers().contains_key(http::header::AUTHORIZATION);
    // What the client asked to impersonate, read as the impersonation filter reads it.
    let asked = crate::impersonation::requested(req.headers());
    req.extensions_mut().insert(ConnectionInfo {
        remote_addr: Some(std::net::SocketAddr::from(([192, 0, 2, 7], 40000))),
        ..ConnectionInfo::default()
    });

    let response = match run_ready(stack.oneshot(req), "the stack") {
        Ok(r) => r,
        Err(never) => match never {},
    };
    let (parts, body) = response.into_parts();
    let body = match run_ready(http_body_util::BodyExt::collect(body), "the response body") {
        Ok(b) => b.to_bytes(),
        Err(e) => panic!("the response body failed: {e}"),
    };
    let status = parts.status;

    let decisions = decisions.lock().unwrap_or_else(PoisonError::into_inner);
    let down_seen = down_seen.lock().unwrap_or_else(PoisonError::into_inner);
    assert!(
        down_seen.is_empty(),
        "the backend of an unavailable APIService was called"
    );
    let seen = metrics_seen.lock().unwrap_or_else(PoisonError::into_inner);
    assert!(
        seen.len() <= 1,
        "one request reached the backend {} times",
        seen.len()
    );
    // The impersonation checks come first, then at most one decision on the request.
    let checks = decisions
        .iter()
        .take_while(|(a, _)| a.verb == "impersonate" && a.is_resource_request)
        .count();
    let (impersonation_checks, decisions) = decisions.split_at(checks);
    assert!(
        decisions.len() <= 1,
        "one request was authorized {} times",
        decisions.len()
    );
    let impersonated = match &asked {
        Ok(items) if !items.is_empty() => Some(items.as_slice()),
        _ => None,
    };
    if let Some(items) = impersonated {
        // No impersonated identity without every check having allowed it: a decision on
        // the request means every item was asked about, in order, and allowed.
        if let Some((attrs, _)) = decisions.first() {
            assert_eq!(
                impersonation_checks.len(),
                items.len(),
                "{} impersonation checks for {items:?}",
                impersonation_checks.len()
            );
            for ((check, decision), item) in impersonation_checks.iter().zip(items) {
                let want = item.attributes(&check.user);
                assert_eq!(
                    (
                        &check.resource,
                        &check.name,
                        &check.subresource,
                        &check.namespace
                    ),
                    (
                        &want.resource,
                        &want.name,
                        &want.subresource,
                        &want.namespace
                    ),
                    "checked out of order"
                );
                assert_eq!(
                    *decision,
                    Decision::Allow,
                    "{item:?} was not allowed, yet the request went on"
                );
            }
            assert_eq!(
                attrs.user,
                crate::impersonation::impersonated_user(items),
                "the request was authorized as someone else"
            );
        }
    } else {
        assert!(
            impersonation_checks.is_empty(),
            "impersonation checks without impersonation headers"
        );
    }

    // Who the stack believed the caller was, if it got as far as authorization.
    if let (Some((Attributes { user, .. }, _)), None) = (decisions.first(), impersonated) {
        if !sent_authorization {
            assert_eq!(
                user.name,
                crate::authn::SYSTEM_ANONYMOUS,
                "no credential, yet {user:?}"
            );
        }
        if credential == "Bearer admin-token" && req_had_single_authorization(&input.headers) {
            assert_eq!(user.name, "admin", "the admin token authenticated {user:?}");
        }
    }

    if let Some(seen) = seen.first() {
        let Some((attrs, decision)) = decisions.first() else {
            panic!(
                "a request reached the backend without authorization: {} {}",
                seen.method, seen.uri
            );
        };
        let user = &attrs.user;
        // What was authorized names the APIService's own group and version: a resource
        // in metrics.k8s.io/v1beta1, or a non-resource path at or below the group-version
        // (its discovery document; `/apis/metrics.k8s.io/v1beta1//` is one too, for
        // RequestInfo trims trailing slashes, and upstream proxies it the same way).
        let own = if attrs.is_resource_request {
            attrs.api_group == "metrics.k8s.io" && attrs.api_version == "v1beta1"
        } else {
            // The group-version root, with any number of trailing slashes: RequestInfo
            // trims them (a non-resource request), the mux routes by prefix, as upstream.
            attrs
                .path
                .strip_prefix("/apis/metrics.k8s.io/v1beta1")
                .is_some_and(|rest| rest.bytes().all(|b| b == b'/'))
        };
        assert!(
            own,
            "the metrics backend was reached by {} {} authorized as {attrs:?}",
            seen.method, seen.uri
        );
        assert_eq!(
            *decision,
            Decision::Allow,
            "a {decision:?} request reached the backend"
        );
        assert_eq!(seen.method, method, "the method changed on the way");
        assert!(
            seen.uri.path().starts_with("/apis/metrics.k8s.io/"),
            "the metrics backend was sent {}",
            seen.uri
        );
        assert_eq!(seen.body, input.body, "the body changed on the way");
        for (name, _) in &seen.headers {
            let n = name.as_str();
            assert!(
                n != "authorization"
                    && n != "proxy-authorization"
                    && !n.starts_with("impersonate-"),
                "the backend was sent {n}"
            );
            // What a backend's request-header authenticator reads: the three names and
            // the extra prefix. The target's users have no extra of their own, so an
            // extra header is one the impersonation checks allowed, or came from the
            // client. (Other `x-remote-*` names mean nothing to it, and upstream passes
            // them on too.)
            if let Some(key) = n.strip_prefix("x-remote-extra-") {
                assert!(
                    user.extra
                        .keys()
                        .any(|k| crate::proxy::escape_extra_key(k).eq_ignore_ascii_case(key)),
                    "the backend was sent {n} for {user:?}"
                );
            }
        }
        let values = |n: &str| -> Vec<&[u8]> {
            seen.headers
                .get_all(n)
                .iter()
                .map(HeaderValue::as_bytes)
                .collect()
        };
        assert_eq!(
            values("x-remote-user"),
            [user.name.as_bytes()],
            "X-Remote-User for {user:?}"
        );
        let groups: Vec<&[u8]> = user.groups.iter().map(|g| g.as_bytes()).collect();
        assert_eq!(
            values("x-remote-group"),
            groups,
            "X-Remote-Group for {user:?}"
        );
        let uid: Vec<&[u8]> = if user.uid.is_empty() {
            Vec::new()
        } else {
            vec![user.uid.as_bytes()]
        };
        assert_eq!(values("x-remote-uid"), uid, "X-Remote-Uid for {user:?}");
        for (key, extra) in &user.extra {
            let name = format!("x-remote-extra-{}", crate::proxy::escape_extra_key(key));
            let extra: Vec<&[u8]> = extra.iter().map(|v| v.as_bytes()).collect();
            assert_eq!(values(&name), extra, "{name} for {user:?}");
        }
        assert!(
            carried_whole(user),
            "an identity that headers cannot carry reached the backend: {user:?}"
        );
        assert_eq!(status, StatusCode::OK, "the backend's answer was replaced");
        return Some(status);
    }
    // The identity could not be forwarded: only for a user that headers cannot carry,
    // answered as Go's transport refuses such a request.
    if body.starts_with(b"error trying to reach service: net/http: invalid header field value") {
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        let Some((Attributes { user, .. }, Decision::Allow)) = decisions.first() else {
            panic!("an identity was refused before it was authorized");
        };
        assert!(
            !carried_whole(user),
            "{user:?} was refused as unsendable: {}",
            String::from_utf8_lossy(&body)
        );
    }

    // The backend was not reached: the stack answered itself.
    if let Some((Attributes { user, .. }, decision)) = decisions.first() {
        if *decision != Decision::Allow {
            assert_eq!(
                status,
                StatusCode::FORBIDDEN,
                "{decision:?} for {user:?} answered {status}"
            );
        }
    } else {
        assert!(
            status.is_client_error() || status.is_server_error(),
            "{status} without authorization"
        );
    }
    let from_stack = !parts.headers.contains_key("x-fuzz-host");
    if from_stack && (status.is_client_error() || status.is_server_error()) {
        let content_type = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .map(HeaderValue::as_bytes)
            .unwrap_or_default();
        if content_type == b"text/plain; charset=utf-8" {
            // Go's `http.Error`, which upstream's proxy handler and InternalError use.
            assert_eq!(
                parts
                    .headers
                    .get(http::header::X_CONTENT_TYPE_OPTIONS)
                    .map(HeaderValue::as_bytes),
                Some(&b"nosniff"[..]),
                "a plain-text {status} without nosniff"
            );
            assert!(
                body.ends_with(b"\n"),
                "a plain-text {status} not ending in a newline"
            );
        } else {
            assert_eq!(
                content_type, b"application/json",
                "a {status} answered as {content_type:?}"
            );
            let v: serde_json::Value = match serde_json::from_slice(&body) {
                Ok(v) => v,
                Err(e) => panic!(
                    "a {status} answer is not JSON ({e}): {:?}",
                    String::from_utf8_lossy(&body)
                ),
            };
            assert_eq!(
                v["kind"], "Status",
                "a {status} answer is not a Status: {v}"
            );
            assert_eq!(
                v["code"],
                status.as_u16(),
                "a {status} Status says {}",
                v["code"]
            );
            assert!(
                v["message"].as_str().is_some_and(|m| !m.is_empty()),
                "a {status} Status without a message: {v}"
            );
        }
    }
    Some(status)
}

/// True when every field of `user` can be written as a header value, as Go's transport
/// checks them (no control character but tab).
fn carried_whole(user: &crate::authn::UserInfo) -> bool {
    let fine = |v: &String| HeaderValue::from_bytes(v.as_bytes()).is_ok();
    fine(&user.name)
        && fine(&user.uid)
        && user.groups.iter().all(fine)
        && user.extra.values().flatten().all(fine)
}

/// True when the only `Authorization` header of the input is the one the target adds.
fn req_had_single_authorization(headers: &[StackHeader<'_>]) -> bool {
    !headers
        .iter()
        .any(|h| h.header_name().eq_ignore_ascii_case("authorization"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(
        target_prefix: u8,
        target: &str,
        credential: u8,
        headers: Vec<StackHeader<'_>>,
    ) -> Option<StatusCode> {
        fuzz_stack(&StackInput {
            method: 0,
            target_prefix,
            target,
            credential,
            headers,
            body: b"",
        })
    }

    /// The unsendable admin (a LF in the name, a DEL in a group) is authorized, yet
    /// never reaches the backend; impersonating a well-formed user it does, as that user.
    #[test]
    fn an_identity_headers_cannot_carry_never_reaches_the_backend() {
        let unsendable = u8::try_from(STACK_CREDENTIALS.len() - 1).expect("few credentials");
        assert_eq!(
            STACK_CREDENTIALS[usize::from(unsendable)],
            "Bearer unsendable-token"
        );
        assert_eq!(
            get(1, "nodes", unsendable, Vec::new()),
            Some(StatusCode::SERVICE_UNAVAILABLE)
        );
        let impersonate = StackHeader {
            name_choice: 7,
            name: "",
            value: b"viewer",
        };
        assert_eq!(STACK_HEADER_NAMES[7], "impersonate-user");
        assert_eq!(
            get(1, "nodes", unsendable, vec![impersonate]),
            Some(StatusCode::OK)
        );
        // The admin's own token goes through as the admin.
        assert_eq!(get(1, "nodes", 1, Vec::new()), Some(StatusCode::OK));
    }
}
