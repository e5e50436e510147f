//! Aggregated discovery on the request path: `/apis` and `/api` with a v2 `Accept`,
//! answered from the published document merged with the host's own groups. Nothing here
//! waits on an extension server; the inner service (the host) is asked in process.

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Request, Response, StatusCode, header};
use serde::Deserialize;
use tower::{Service, ServiceExt};

use super::ResponseFuture;
use crate::body::{Body, read_limited};
use crate::discovery::v2::{
    ApiGroupDiscovery, ApiGroupDiscoveryList, ApiResourceList, ApiVersionDiscovery, Freshness,
    GroupMeta, convert_legacy_resources,
};
use crate::discovery::{
    AggregatedDocument, AggregatedVersion, DiscoveryManager, aggregated_response, etag_of,
    is_aggregated_content_type,
};

/// The last merge of the published document with the host's groups, reused while both
/// are unchanged (the request path then does one comparison, no encoding, no hashing).
#[derive(Default)]
pub(super) struct HostCache {
    apis: ArcSwapOption<Merged>,
    core: ArcSwapOption<CoreMerged>,
}

impl std::fmt::Debug for HostCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostCache")
    }
}

/// The `/apis` merge: the published document and the host's raw answers it was made
/// from (compared byte for byte on the next request), and the result.
struct Merged {
    base: Arc<AggregatedDocument>,
    host: Vec<Bytes>,
    merged: Arc<AggregatedDocument>,
}

/// The `/api` answer built from the host's legacy core documents: the raw documents it
/// was made from and both encodings with their ETag.
struct CoreMerged {
    host: Vec<Bytes>,
    v2: Bytes,
    v2beta1: Bytes,
    etag: HeaderValue,
}

/// `GET` of the inner service at `path`, with `accept` and the caller's extensions; the
/// status, content type and (bounded) body of a 200, `None` for anything else.
async fn ask<S, E: Send + 'static>(
    inner: S,
    req: &Parts,
    path: &str,
    accept: &HeaderValue,
    limit: usize,
) -> Result<Option<(String, Bytes)>, E>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = E> + Clone,
{
    let Ok(mut probe) = Request::get(path).body(Body::empty()) else {
        return Ok(None);
    };
    probe.headers_mut().insert(header::ACCEPT, accept.clone());
    *probe.extensions_mut() = req.extensions.clone();
    let res = inner.oneshot(probe).await?;
    if res.status() != StatusCode::OK {
        return Ok(None);
    }
    let content_type = crate::gocompat::header(res.headers(), header::CONTENT_TYPE)
        .unwrap_or("")
        .to_owned();
    match read_limited(res.into_body(), limit).await {
        Ok(body) => Ok(Some((content_type, body))),
        Err(e) => {
            tracing::warn!(path, error = %e, "discovery: the host's document is refused");
            Ok(None)
        }
    }
}

/// True when the host answered with an aggregated discovery document (either version).
fn is_aggregated(content_type: &str) -> bool {
    is_aggregated_content_type(content_type, AggregatedVersion::V2)
        || is_aggregated_content_type(content_type, AggregatedVersion::V2Beta1)
}

/// The legacy resources of `path` converted to a `Current` v2 entry of `version`.
async fn legacy_version<S, E: Send + 'static>(
    inner: S,
    req: &Parts,
    path: &str,
    version: &str,
    limit: usize,
) -> Result<Option<(Bytes, ApiVersionDiscovery)>, E>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = E> + Clone,
{
    let json = HeaderValue::from_static("application/json");
    let Some((_, body)) = ask(inner, req, path, &json, limit).await? else {
        return Ok(None);
    };
    let Ok(list) = serde_json::from_slice::<ApiResourceList>(&body) else {
        return Ok(None);
    };
    match convert_legacy_resources(&list.resources) {
        Ok(resources) => Ok(Some((
            body,
            ApiVersionDiscovery {
                version: version.to_owned(),
                resources,
                freshness: Some(Freshness::Current),
            },
        ))),
        Err(e) => {
            tracing::warn!(path, error = %e, "discovery: the host's resource list does not convert");
            Ok(None)
        }
    }
}

/// The parts of a legacy `APIGroupList` this reads: group names and their versions.
#[derive(Deserialize)]
struct LegacyGroupList {
    #[serde(default)]
    groups: Vec<LegacyGroup>,
}

/// One group of a legacy `APIGroupList`.
#[derive(Deserialize)]
struct LegacyGroup {
    #[serde(default)]
    name: String,
    #[serde(default)]
    versions: Vec<LegacyVersion>,
}

/// One `{groupVersion, version}` of a legacy group; only the version is read.
#[derive(Deserialize)]
struct LegacyVersion {
    #[serde(default)]
    version: String,
}

/// The legacy `/api` answer (`APIVersions`): the core group's versions.
#[derive(Deserialize)]
struct ApiVersions {
    #[serde(default)]
    versions: Vec<String>,
}

/// What the host is asked with, for one aggregated discovery request: the host (the
/// inner service), the request's head and `Accept`, and the document and cache to merge
/// its answer with.
struct HostAsk<S> {
    inner: S,
    req: Parts,
    accept: HeaderValue,
    manager: DiscoveryManager,
    cache: Arc<HostCache>,
    version: AggregatedVersion,
}

/// `GET /api` (`core`) or `GET /apis` with an aggregated `Accept` (`version`): the
/// published document merged with the host's own groups ([`group_list`], [`core`]).
pub(super) fn aggregated<S, E: Send + 'static>(
    inner: S,
    req: Request<Body>,
    (manager, cache): (DiscoveryManager, Arc<HostCache>),
    version: AggregatedVersion,
    core: bool,
) -> ResponseFuture<E>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = E> + Clone + Send + 'static,
    S::Future: Send,
{
    let (req, _) = req.into_parts();
    let accept = req.headers.get(header::ACCEPT).cloned();
    let accept = accept.unwrap_or(HeaderValue::from_static("application/json"));
    let host = HostAsk {
        inner,
        req,
        accept,
        manager,
        cache,
        version,
    };
    if core {
        Box::pin(self::core(host))
    } else {
        Box::pin(group_list(host))
    }
}

/// `GET /apis` with an aggregated `Accept`.
///
/// The host is asked `/apis` with the same `Accept`: a v2 answer is merged as it is; a
/// legacy `APIGroupList` is converted, asking `/apis/<g>/<v>` for each version the
/// aggregator does not already list. The merge is cached while both the published
/// document and the host's bytes stay the same, so a steady state costs the host's
/// answers and one comparison. Without host groups the published document is served.
async fn group_list<S, E: Send + 'static>(host: HostAsk<S>) -> Result<Response<Body>, E>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = E> + Clone,
{
    let (inner, req, accept) = (host.inner, host.req, host.accept);
    let (manager, cache, version) = (host.manager, host.cache, host.version);
    let base = manager.document();
    let limit = manager.config().max_document_bytes;
    let mut raw = Vec::new();
    let mut host = Vec::new();
    if let Some((content_type, body)) = ask(inner.clone(), &req, "/apis", &accept, limit).await? {
        if is_aggregated(&content_type) {
            match serde_json::from_slice::<ApiGroupDiscoveryList>(&body) {
                Ok(list) => host = list.items,
                Err(e) => {
                    tracing::warn!(error = %e, "discovery: the host's /apis does not decode")
                }
            }
            raw.push(body);
        } else if let Ok(list) = serde_json::from_slice::<LegacyGroupList>(&body) {
            raw.push(body);
            for g in list.groups {
                let mut versions = Vec::new();
                for v in g.versions {
                    // A group-version the aggregator lists masks the host's anyway.
                    let ours = base.groups().iter().any(|d| {
                        d.name() == g.name
                            && d.versions()
                                .iter()
                                .any(|e| e.discovery.version == v.version)
                    });
                    if ours || v.version.is_empty() {
                        continue;
                    }
                    let path = format!("/apis/{}/{}", g.name, v.version);
                    if let Some((bytes, entry)) =
                        legacy_version(inner.clone(), &req, &path, &v.version, limit).await?
                    {
                        raw.push(bytes);
                        versions.push(entry);
                    }
                }
                host.push(ApiGroupDiscovery {
                    metadata: GroupMeta { name: g.name },
                    versions,
                });
            }
        }
    }
    let doc = if host.is_empty() {
        base
    } else {
        match cache.apis.load_full() {
            Some(m) if Arc::ptr_eq(&m.base, &base) && m.host == raw => m.merged.clone(),
            _ => {
                let merged =
                    Arc::new(base.with_host_groups(host, |g, v| manager.local_priority(g, v)));
                cache.apis.store(Some(Arc::new(Merged {
                    base,
                    host: raw,
                    merged: merged.clone(),
                })));
                merged
            }
        }
    };
    Ok(aggregated_response(
        doc.body(version).clone(),
        doc.etag(),
        version,
        &req.headers,
    ))
}

/// `GET /api` with an aggregated `Accept`: the host's answer when it speaks v2, its legacy
/// `/api` and `/api/<version>` converted when it does not, its own answer (a 404) when it
/// has no core API.
async fn core<S, E: Send + 'static>(host: HostAsk<S>) -> Result<Response<Body>, E>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = E> + Clone,
{
    let (inner, req, accept) = (host.inner, host.req, host.accept);
    let (manager, cache, version) = (host.manager, host.cache, host.version);
    let limit = manager.config().max_document_bytes;
    let Ok(mut probe) = Request::get("/api").body(Body::empty()) else {
        return Ok(crate::status::internal_error(
            "/api",
            &"cannot build the request",
        ));
    };
    probe.headers_mut().insert(header::ACCEPT, accept);
    *probe.extensions_mut() = req.extensions.clone();
    let res = inner.clone().oneshot(probe).await?;
    let content_type = crate::gocompat::header(res.headers(), header::CONTENT_TYPE).unwrap_or("");
    if res.status() != StatusCode::OK || is_aggregated(content_type) {
        return Ok(res);
    }
    let body = match read_limited(res.into_body(), limit).await {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "discovery: the host's /api is refused");
            return Ok(crate::status::internal_error("/api", &e));
        }
    };
    let versions = serde_json::from_slice::<ApiVersions>(&body)
        .map(|v| v.versions)
        .unwrap_or_default();
    let mut raw = vec![body];
    let mut entries = Vec::new();
    for v in versions {
        let path = format!("/api/{v}");
        if let Some((bytes, entry)) = legacy_version(inner.clone(), &req, &path, &v, limit).await? {
            raw.push(bytes);
            entries.push(entry);
        }
    }
    let merged = match cache.core.load_full() {
        Some(m) if m.host == raw => m,
        _ => {
            let item = ApiGroupDiscovery {
                metadata: GroupMeta::default(),
                versions: entries,
            };
            let items = serde_json::to_string(&[item]).unwrap_or_else(|_| "[]".into());
            let body = |v: AggregatedVersion| {
                Bytes::from(format!(
                    r#"{{"kind":"APIGroupDiscoveryList","apiVersion":"{}","metadata":{{}},"items":{items}}}"#,
                    v.api_version()
                ))
            };
            let v2 = body(AggregatedVersion::V2);
            let m = Arc::new(CoreMerged {
                host: raw,
                etag: etag_of(&v2),
                v2beta1: body(AggregatedVersion::V2Beta1),
                v2,
            });
            cache.core.store(Some(m.clone()));
            m
        }
    };
    let body = match version {
        AggregatedVersion::V2 => merged.v2.clone(),
        AggregatedVersion::V2Beta1 => merged.v2beta1.clone(),
    };
    Ok(aggregated_response(
        body,
        &merged.etag,
        version,
        &req.headers,
    ))
}
