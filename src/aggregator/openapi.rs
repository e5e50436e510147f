//! OpenAPI on the request path: `/openapi/v2` and `/openapi/v3` from the published
//! snapshot merged with the host's own documents, and the converted v3 documents the
//! aggregator serves itself. Nothing here waits on an extension server.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use serde_json::Value;
use tower::{Service, ServiceExt};

use super::ResponseFuture;
use crate::body::{Body, read_limited};
use crate::discovery::{etag_of, parse_accept};
use crate::openapi::{
    OpenApiManager, OpenApiSnapshot, PROTOBUF_V2, V2Document, V3Document, V3Entry, merge, v3,
};

/// The last merges with the host's documents, reused while both sides are unchanged.
#[derive(Default)]
pub(super) struct OpenApiCache {
    v2: ArcSwapOption<(Arc<OpenApiSnapshot>, Bytes, Arc<V2Document>)>,
    root: ArcSwapOption<(Arc<OpenApiSnapshot>, Bytes, Arc<Root>)>,
}

impl std::fmt::Debug for OpenApiCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OpenApiCache")
    }
}

/// The merged `/openapi/v3` root: its JSON, ETag and when it was built (for
/// `Last-Modified`).
struct Root {
    json: Bytes,
    etag: HeaderValue,
    last_modified: SystemTime,
}

/// Go's `http.TimeFormat`: `Mon, 02 Jan 2006 15:04:05 GMT`.
fn http_date(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    let (year, month, day) = crate::gocompat::civil_from_days(days);
    let name = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][(month - 1) as usize];
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    format!("{weekday}, {day:02} {name} {year:04} {h:02}:{m:02}:{s:02} GMT")
}

/// Sets `name` to `value` when it is a valid header value (dates and ETags always are).
fn set(h: &mut HeaderMap, name: header::HeaderName, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        h.insert(name, v);
    }
}

/// An empty answer with `code` and `Vary: Accept` (handler's 406, handler3's 301/404).
fn empty(code: StatusCode) -> Response<Body> {
    let mut res = Response::new(Body::empty());
    *res.status_mut() = code;
    res.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    res
}

/// A document answer: 304 when `If-None-Match` is `etag`, else the body with its type.
fn document(
    req: &HeaderMap,
    body: Bytes,
    content_type: &'static str,
    etag: &HeaderValue,
    last_modified: SystemTime,
) -> Response<Body> {
    let not_modified = req
        .get(header::IF_NONE_MATCH)
        .is_some_and(|v| v.as_bytes() == etag.as_bytes());
    let mut res = if not_modified {
        empty(StatusCode::NOT_MODIFIED)
    } else {
        let mut r = Response::new(Body::full(body));
        r.headers_mut()
            .insert(header::VARY, HeaderValue::from_static("Accept"));
        r
    };
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::ETAG, etag.clone());
    set(h, header::LAST_MODIFIED, &http_date(last_modified));
    res
}

/// The host's document at `path` (JSON), bounded; `None` when it has none.
async fn host_document<S, E: Send + 'static>(
    inner: S,
    req: &Parts,
    path: &str,
    limit: usize,
) -> Result<Option<Bytes>, E>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = E>,
{
    let Ok(mut probe) = Request::get(path).body(Body::empty()) else {
        return Ok(None);
    };
    probe
        .headers_mut()
        .insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    *probe.extensions_mut() = req.extensions.clone();
    let res = inner.oneshot(probe).await?;
    if res.status() != StatusCode::OK {
        return Ok(None);
    }
    match read_limited(res.into_body(), limit).await {
        Ok(b) => Ok(Some(b)),
        Err(e) => {
            tracing::warn!(path, error = %e, "openapi: the host's document is refused");
            Ok(None)
        }
    }
}

/// The encoding `/openapi/v2` answers with.
#[derive(Clone, Copy)]
enum V2Format {
    Json,
    Protobuf,
}

/// kube-openapi `handler.go`'s negotiation: each clause in order against JSON and the two
/// protobuf spellings; `*` matches; an empty `Accept` is `*/*`.
fn negotiate_v2(accept: Option<&str>) -> Option<V2Format> {
    let accept = accept.filter(|a| !a.is_empty()).unwrap_or("*/*");
    let offers = [
        ("json", V2Format::Json),
        (
            "com.github.proto-openapi.spec.v2@v1.0+protobuf",
            V2Format::Protobuf,
        ),
        (
            "com.github.proto-openapi.spec.v2.v1.0+protobuf",
            V2Format::Protobuf,
        ),
    ];
    for c in parse_accept(accept) {
        for (subtype, format) in offers {
            let kind_ok = c.kind == "application" || c.kind == "*";
            let sub_ok = c.subtype == subtype || c.subtype == "*";
            if kind_ok && sub_ok {
                return Some(format);
            }
        }
    }
    None
}

/// One request for a merged document: the host (the inner service) to ask for its own,
/// the request's head, and the manager's documents and cache to merge it with.
struct HostDocs<S> {
    inner: S,
    req: Parts,
    manager: OpenApiManager,
    cache: Arc<OpenApiCache>,
}

/// `GET /openapi/v2` or, with `v3_root`, `GET /openapi/v3`: the manager's documents
/// merged with the host's ([`v2`], [`v3_root`]).
pub(super) fn document_of<S, E: Send + 'static>(
    inner: S,
    req: Request<Body>,
    (manager, cache): (OpenApiManager, Arc<OpenApiCache>),
    v3_root: bool,
) -> ResponseFuture<E>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = E> + Send + 'static,
    S::Future: Send,
{
    let (req, _) = req.into_parts();
    let host = HostDocs {
        inner,
        req,
        manager,
        cache,
    };
    if v3_root {
        Box::pin(self::v3_root(host))
    } else {
        Box::pin(v2(host))
    }
}

/// `GET /openapi/v2`.
///
/// The host's own `/openapi/v2` heads the merge when it has one (a JSON object);
/// otherwise the manager's merge over a minimal base is served. The merge with the host's
/// spec is cached while the snapshot and the host's bytes stay the same. 406 when the
/// `Accept` allows neither JSON nor protobuf; 304 on a matching `If-None-Match`.
async fn v2<S, E: Send + 'static>(host: HostDocs<S>) -> Result<Response<Body>, E>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = E>,
{
    let (inner, req) = (host.inner, host.req);
    let (manager, cache) = (host.manager, host.cache);
    let accept = crate::gocompat::header(&req.headers, header::ACCEPT);
    let Some(format) = negotiate_v2(accept) else {
        return Ok(empty(StatusCode::NOT_ACCEPTABLE));
    };
    let snapshot = manager.snapshot();
    let limit = manager.config().max_document_bytes;
    let host = host_document(inner, &req, "/openapi/v2", limit).await?;
    let host_spec = host
        .as_ref()
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
        .filter(Value::is_object);
    let doc = match (host, host_spec) {
        (Some(bytes), Some(spec)) => match cache.v2.load_full() {
            Some(c) if Arc::ptr_eq(&c.0, &snapshot) && c.1 == bytes => c.2.clone(),
            _ => {
                let specs = std::iter::once(&spec).chain(snapshot.remote_v2.iter().map(|v| &**v));
                let doc = Arc::new(V2Document::new(&merge::merge_all(specs)));
                cache
                    .v2
                    .store(Some(Arc::new((snapshot.clone(), bytes, doc.clone()))));
                doc
            }
        },
        _ => snapshot.merged_v2.clone(),
    };
    let (body, content_type) = match format {
        V2Format::Json => (doc.json.clone(), "application/json"),
        V2Format::Protobuf => (doc.proto.clone(), PROTOBUF_V2),
    };
    Ok(document(
        &req.headers,
        body,
        content_type,
        &doc.etag,
        doc.last_modified,
    ))
}

/// The root entries of the snapshot: key -> `serverRelativeURL`.
fn our_root_entries(snapshot: &OpenApiSnapshot) -> Vec<(String, String)> {
    snapshot
        .v3
        .iter()
        .map(|(key, e)| match e {
            V3Entry::Remote { url, .. } => (key.clone(), url.clone()),
            V3Entry::Converted(doc) => {
                (key.clone(), format!("/openapi/v3/{key}?hash={}", doc.hash))
            }
        })
        .collect()
}

/// `GET /openapi/v3`: the host's keys, then the APIServices' (which win for their own
/// group-version).
async fn v3_root<S, E: Send + 'static>(host: HostDocs<S>) -> Result<Response<Body>, E>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = E>,
{
    let (inner, req) = (host.inner, host.req);
    let (manager, cache) = (host.manager, host.cache);
    let snapshot = manager.snapshot();
    let limit = manager.config().max_document_bytes;
    let host = host_document(inner, &req, "/openapi/v3", limit)
        .await?
        .unwrap_or_default();
    let root = match cache.root.load_full() {
        Some(c) if Arc::ptr_eq(&c.0, &snapshot) && c.1 == host => c.2.clone(),
        _ => {
            let mut paths: std::collections::BTreeMap<String, String> =
                serde_json::from_slice::<Value>(&host)
                    .map(|v| v3::root_paths(&v).into_iter().collect())
                    .unwrap_or_default();
            paths.extend(our_root_entries(&snapshot));
            let mut map = serde_json::Map::new();
            for (k, url) in paths {
                map.insert(k, serde_json::json!({ "serverRelativeURL": url }));
            }
            let json = Bytes::from(
                serde_json::to_vec(&serde_json::json!({ "paths": map })).unwrap_or_default(),
            );
            let root = Arc::new(Root {
                etag: etag_of(&json),
                json,
                last_modified: SystemTime::now(),
            });
            cache
                .root
                .store(Some(Arc::new((snapshot.clone(), host, root.clone()))));
            root
        }
    };
    Ok(document(
        &req.headers,
        root.json.clone(),
        "application/json",
        &root.etag,
        root.last_modified,
    ))
}

/// `GET /openapi/v3/<key>` of a converted document, as handler3 serves one.
pub(super) fn converted(req: &Request<Body>, key: &str, doc: &V3Document) -> Response<Body> {
    let accept = crate::gocompat::header(req.headers(), header::ACCEPT);
    let accept = accept.filter(|a| !a.is_empty()).unwrap_or("*/*");
    let json_ok = parse_accept(accept).iter().any(|c| {
        (c.kind == "application" || c.kind == "*") && (c.subtype == "json" || c.subtype == "*")
    });
    if !json_ok {
        return empty(StatusCode::NOT_ACCEPTABLE);
    }
    let hash = req.uri().query().and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "hash")
            .map(|(_, v)| v.into_owned())
    });
    if let Some(h) = &hash {
        if *h != doc.hash {
            let mut res = empty(StatusCode::MOVED_PERMANENTLY);
            set(
                res.headers_mut(),
                header::LOCATION,
                &format!("/openapi/v3/{key}?hash={}", doc.hash),
            );
            set(res.headers_mut(), header::CONTENT_TYPE, "application/json");
            return res;
        }
    }
    let etag = HeaderValue::from_str(&format!("\"{}\"", doc.hash))
        .unwrap_or(HeaderValue::from_static("\"\""));
    let mut res = document(
        req.headers(),
        doc.json.clone(),
        "application/json",
        &etag,
        doc.last_modified,
    );
    if hash.is_some() {
        let h = res.headers_mut();
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, immutable"),
        );
        let year = SystemTime::now() + Duration::from_secs(365 * 24 * 3600);
        set(h, header::EXPIRES, &http_date(year));
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::PROTOBUF_V2_DEPRECATED;

    #[test]
    fn dates_and_negotiation() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_136_214_245);
        assert_eq!(http_date(t), "Mon, 02 Jan 2006 15:04:05 GMT");
        assert!(matches!(
            negotiate_v2(Some(PROTOBUF_V2_DEPRECATED)),
            Some(V2Format::Protobuf)
        ));
        assert!(matches!(negotiate_v2(None), Some(V2Format::Json)));
        assert!(matches!(
            negotiate_v2(Some("application/json, */*")),
            Some(V2Format::Json)
        ));
        assert!(negotiate_v2(Some("text/html")).is_none());
    }
}
