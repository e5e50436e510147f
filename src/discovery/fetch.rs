//! One discovery fetch of a Service: its aggregated `/apis`, or the legacy document of
//! each group-version (kube-aggregator
//! [`pkg/apiserver/handler_discovery.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/handler_discovery.go)).

use std::collections::HashMap;

use http::{HeaderValue, Request, StatusCode, header};
use tower::ServiceExt;

use super::config::DiscoveryConfig;
use super::negotiate::{AggregatedVersion, V2_JSON, is_aggregated_content_type};
use super::target::{Fetcher, GroupVersion, ServiceKey};
use super::v2::{
    ApiGroupDiscoveryList, ApiResourceDiscovery, ApiResourceList, ApiVersionDiscovery,
    convert_legacy_resources,
};
use crate::body::{Body, read_limited};
use crate::identity;
use crate::rt::Timer;

/// What one fetch needs, taken out of the state so the fetch runs without the lock: the
/// Service, a fetcher of one of its APIServices (any will do: they share the Service),
/// the `Etag` of the cached document, and the group-versions to ask one by one if the
/// Service has no v2 document.
pub(super) struct Job {
    pub(super) service: ServiceKey,
    pub(super) fetcher: Fetcher,
    pub(super) etag: Option<String>,
    pub(super) group_versions: Vec<GroupVersion>,
}

/// The outcome of one fetch of a Service, as the manager records it.
pub(super) enum Fetched {
    /// 304 to our `If-None-Match`: the cached document is still current.
    NotModified,
    /// A v2 document, by group-version, with its `Etag`.
    Aggregated {
        etag: Option<String>,
        versions: HashMap<GroupVersion, ApiVersionDiscovery>,
    },
    /// Legacy documents, one per group-version (`Err`: that one failed).
    Legacy(HashMap<GroupVersion, Result<Vec<ApiResourceDiscovery>, ()>>),
    /// The Service could not be asked (503, timeout, unreachable, bad document).
    Failed,
}

/// A backend's answer to one discovery request; `body` is empty unless the status is 200
/// (other bodies are never read).
struct Answer {
    status: StatusCode,
    content_type: String,
    etag: Option<String>,
    body: bytes::Bytes,
}

/// `GET path` with `accept`, as `system:kube-aggregator` in `groups`, bounded by the fetch
/// timeout (the body included) and by [`DiscoveryConfig::max_document_bytes`]. Returns
/// status, content type, `Etag` and body, or why not (a transport error, a timeout, a
/// document over the limit).
async fn get(
    fetcher: &Fetcher,
    timer: &Timer,
    config: &DiscoveryConfig,
    path: &str,
    accept: &'static str,
    groups: &[&'static str],
    if_none_match: Option<&str>,
) -> Result<Answer, String> {
    let mut req = Request::get(path)
        .body(Body::empty())
        .map_err(|e| format!("building the request for {path}: {e}"))?;
    let h = req.headers_mut();
    h.insert(header::ACCEPT, HeaderValue::from_static(accept));
    identity::set_own(h, identity::KUBE_AGGREGATOR_USER, groups);
    if let Some(tag) = if_none_match.and_then(|t| HeaderValue::from_str(t).ok()) {
        h.insert(header::IF_NONE_MATCH, tag);
    }
    let limit = config.max_document_bytes;
    let call = async {
        let res = fetcher
            .clone()
            .oneshot(req)
            .await
            .map_err(|e| crate::status::error_chain(&*e))?;
        let status = res.status();
        let (content_type, etag) = {
            let text = |name| {
                res.headers()
                    .get(name)
                    .and_then(|v: &HeaderValue| v.to_str().ok())
                    .map(str::to_owned)
            };
            let etag = text(header::ETAG).filter(|e| !e.is_empty());
            (text(header::CONTENT_TYPE).unwrap_or_default(), etag)
        };
        if status != StatusCode::OK {
            // Only 200 bodies are read; others are dropped unread.
            return Ok(Answer {
                status,
                content_type,
                etag,
                body: bytes::Bytes::new(),
            });
        }
        let body = read_limited(res.into_body(), limit)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Answer {
            status,
            content_type,
            etag,
            body,
        })
    };
    match timer.timeout(config.fetch_timeout, call).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "request timed out after {:?}",
            config.fetch_timeout
        )),
    }
}

/// One fetch of a Service: its v2 `/apis`, or the legacy document of each group-version.
///
/// The `/apis` request carries the v2 `Accept` and the cached `Etag` as `If-None-Match`,
/// as `system:kube-aggregator` in `system:masters`. 304 keeps the cache, 503 or an error
/// fails the fetch, a v2 document (by its content type) replaces the cache; anything else
/// (404, 406, a legacy list) falls back to `GET /apis/<g>/<v>` per group-version with
/// `Accept: application/json` and no groups, whose results are not cached.
pub(super) async fn fetch(job: &Job, timer: &Timer, config: &DiscoveryConfig) -> Fetched {
    let service = &job.service;
    let first = get(
        &job.fetcher,
        timer,
        config,
        "/apis",
        V2_JSON,
        &[identity::SYSTEM_MASTERS],
        job.etag.as_deref(),
    )
    .await;
    let Answer {
        status,
        content_type,
        etag,
        body,
    } = match first {
        Ok(r) => r,
        Err(e) => {
            tracing::info!(%service, error = %e, "discovery: fetching /apis failed");
            return Fetched::Failed;
        }
    };
    match status {
        StatusCode::NOT_MODIFIED if job.etag.is_some() => return Fetched::NotModified,
        StatusCode::SERVICE_UNAVAILABLE => {
            tracing::info!(%service, "discovery: service {service} returned non-success response code: 503");
            return Fetched::Failed;
        }
        StatusCode::OK if is_aggregated_content_type(&content_type, AggregatedVersion::V2) => {
            return match serde_json::from_slice::<ApiGroupDiscoveryList>(&body) {
                Ok(mut list) => {
                    list.fill_response_kinds();
                    let mut versions = HashMap::new();
                    for g in list.items {
                        for v in g.versions {
                            versions.insert((g.metadata.name.clone(), v.version.clone()), v);
                        }
                    }
                    Fetched::Aggregated { etag, versions }
                }
                Err(e) => {
                    tracing::info!(%service, error = %e, "discovery: the v2 document does not decode");
                    Fetched::Failed
                }
            };
        }
        _ => {}
    }
    // Anything else: the legacy document of each group-version (upstream's fallback,
    // kubernetes/kubernetes#119870), as system:kube-aggregator with no groups.
    let mut results = HashMap::new();
    for gv in &job.group_versions {
        let path = if gv.0.is_empty() {
            format!("/api/{}", gv.1)
        } else {
            format!("/apis/{}/{}", gv.0, gv.1)
        };
        let r = get(
            &job.fetcher,
            timer,
            config,
            &path,
            "application/json",
            &[],
            None,
        )
        .await;
        let converted = match r {
            Ok(Answer {
                status: StatusCode::OK,
                body,
                ..
            }) => serde_json::from_slice::<ApiResourceList>(&body)
                .map_err(|e| e.to_string())
                .and_then(|l| convert_legacy_resources(&l.resources).map_err(|e| e.to_string())),
            Ok(Answer { status, .. }) => Err(format!(
                "failed to download legacy discovery for {path}: {}",
                status.as_u16()
            )),
            Err(e) => Err(e),
        };
        let converted = converted.map_err(|e| {
            tracing::info!(%service, error = %e, "discovery: legacy fallback failed");
        });
        results.insert(gv.clone(), converted);
    }
    Fetched::Legacy(results)
}
