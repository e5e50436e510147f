//! A remote APIService's requests: the worker check, the availability gate, the
//! transport, the user and the Service, then the proxy (and passive availability).

use std::sync::Arc;

use http::{Request, StatusCode};

use super::{ResponseFuture, Shared};
use crate::authn::{ConnectionInfo, UserInfo};
use crate::body::Body;
use crate::registry::{Registry, RemoteBackend, Route};
use crate::status::plain_text_error;

/// A remote APIService: the gate, then the proxy (the decision sequence of
/// kube-aggregator's
/// [`pkg/apiserver/handler_proxy.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/handler_proxy.go),
/// from "not available" on). The `UserInfo` is taken out of the extensions (nothing behind
/// reads them) and written as `X-Remote-*` headers by the proxy. A backend that cannot be
/// connected to at all marks the APIService unavailable at once (passive availability),
/// with the message the availability probe would write.
pub(super) fn remote<E: Send + 'static>(
    shared: Arc<Shared>,
    registry: Registry,
    route: Arc<Route>,
    backend: Arc<RemoteBackend>,
    mut req: Request<Body>,
) -> ResponseFuture<E> {
    Box::pin(async move {
        if let Some(problem) = shared
            .worker
            .as_ref()
            .and_then(|w| w.problem(shared.timer.now()))
        {
            return Ok(plain_text_error(StatusCode::SERVICE_UNAVAILABLE, problem));
        }
        if !route.is_available() {
            return Ok(plain_text_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "service unavailable",
            ));
        }
        let client = match &backend.client {
            Ok(c) => c.clone(),
            Err(e) => {
                return Ok(plain_text_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &e.to_string(),
                ));
            }
        };
        // Taken out, not cloned: nothing behind the proxy reads the extensions.
        let Some(user) = req.extensions_mut().remove::<UserInfo>() else {
            return Ok(plain_text_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "missing user",
            ));
        };
        let endpoints = match shared.resolver.resolve_endpoints(&backend.service).await {
            Ok(e) => e,
            Err(e) => {
                // Upstream logs the real error and tells the client only this.
                tracing::warn!(apiservice = route.apiservice.name(), error = %e, "cannot resolve service");
                return Ok(plain_text_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "service unavailable",
                ));
            }
        };
        // A Service with several endpoints: the less loaded of two, none ejected; the
        // ejected ones whose time is up are probed (off the request path).
        let (picked, due) =
            shared
                .balancer
                .pick(&endpoints, shared.timer.now(), shared.executor.is_some());
        if !due.is_empty() {
            probe_back(&shared, &route, &client, &backend, due);
        }
        let authority = picked.authority().clone();
        let remote_addr = req
            .extensions()
            .get::<ConnectionInfo>()
            .and_then(|c| c.remote_addr);
        if crate::proxy::is_upgrade_request(&req) {
            #[cfg(feature = "tokio")]
            if let (Some(executor), Ok(c)) = (&shared.executor, &backend.upgrade_client) {
                let client = c.clone();
                // Boxed: an upgrade's future is as large as this whole one, and every
                // request's future would otherwise be sized for it.
                return Ok(Box::pin(crate::proxy::forward_upgrade(
                    client,
                    executor,
                    &authority,
                    &user,
                    remote_addr,
                    req,
                ))
                .await);
            }
            let text = "error trying to reach service: upgrade requests are not supported by this transport";
            return Ok(plain_text_error(StatusCode::SERVICE_UNAVAILABLE, text));
        }
        let sent = shared.timer.now();
        let mut res =
            crate::proxy::forward(client, &shared.timer, &authority, &user, remote_addr, req).await;
        let took = shared.timer.now().saturating_duration_since(sent);
        shared
            .proxy_metrics
            .observe(route.apiservice.name(), res.status().as_u16(), took);
        let unreachable = res.extensions_mut().remove::<crate::proxy::Unreachable>();
        if picked.is_balanced() {
            // One endpoint of several failing is not the Service failing: it is ejected
            // after enough failures in a row, and the others take its requests.
            let failed = unreachable.is_some() || res.status().is_server_error();
            if let Some(time) = picked.finish(failed, shared.timer.now()) {
                tracing::warn!(apiservice = route.apiservice.name(), endpoint = %authority, ejected_for = ?time, "endpoint failing; ejected");
            }
            return Ok(res);
        }
        drop(picked);
        // Passive availability: a backend that cannot even be connected to is down for
        // every request, so say so now rather than at the next check.
        if let Some(crate::proxy::Unreachable(error)) = unreachable {
            let spec = &route.apiservice.spec;
            let url = if spec.group.is_empty() {
                format!("https://{authority}/api/{}", spec.version)
            } else {
                format!("https://{authority}/apis/{}/{}", spec.group, spec.version)
            };
            let cause = crate::availability::UnavailableCause::from_error(
                &url,
                authority.as_str(),
                &*error,
                registry.client_certificate(),
            );
            let message = cause.to_string();
            if registry.report_unreachable_because(route.apiservice.name(), &message, cause.name())
            {
                tracing::warn!(apiservice = route.apiservice.name(), %message, "backend unreachable; marked unavailable");
            }
        }
        Ok(res)
    })
}

/// Probes each of `due` (ejected endpoints whose time is up) with the availability
/// check's `GET /apis/<group>/<version>` through the APIService's client, on the
/// executor, and lets it back in when the probe passes.
fn probe_back(
    shared: &Shared,
    route: &Route,
    client: &crate::transport::BackendClient,
    backend: &RemoteBackend,
    due: Vec<http::uri::Authority>,
) {
    let Some(executor) = &shared.executor else {
        return;
    };
    let spec = &route.apiservice.spec;
    let path = if spec.group.is_empty() {
        format!("/api/{}", spec.version)
    } else {
        format!("/apis/{}/{}", spec.group, spec.version)
    };
    let name = route.apiservice.name().to_owned();
    for authority in due {
        let (balancer, timer, client) = (
            shared.balancer.clone(),
            shared.timer.clone(),
            client.clone(),
        );
        let (service, path, name) = (backend.service.clone(), path.clone(), name.clone());
        executor.spawn(async move {
            let fixed = Fixed(authority.clone());
            let probe = crate::availability::Probe {
                resolver: &fixed,
                timer: &timer,
                budget: PROBE_BUDGET,
                client: None,
            };
            let result = probe.run(&service, &client, &path).await;
            match balancer.probed(&authority, result.is_ok(), timer.now()) {
                None => tracing::info!(apiservice = %name, endpoint = %authority, "endpoint probe passed; back in"),
                Some(time) => tracing::warn!(apiservice = %name, endpoint = %authority, ejected_for = ?time, error = %result.err().map(|e| e.to_string()).unwrap_or_default(), "endpoint probe failed; ejected again"),
            }
        });
    }
}

/// How long an ejected endpoint's probe may take (the availability check's 5 s).
const PROBE_BUDGET: std::time::Duration = std::time::Duration::from_secs(5);

/// A resolver of one address: the endpoint a probe is for.
struct Fixed(http::uri::Authority);

impl crate::resolver::ServiceResolver for Fixed {
    fn resolve(&self, _: &crate::apiservice::ServiceReference) -> crate::resolver::ResolveFuture {
        Box::pin(std::future::ready(Ok(self.0.clone())))
    }
}
