//! One download of an APIService's specs: `GET /openapi/v2` (with `If-None-Match`) and
//! `GET /openapi/v3`, as `system:aggregator`, each within the configured timeout.

use bytes::Bytes;
use http::{HeaderValue, Request, StatusCode, header};
use serde_json::Value;
use tower::ServiceExt;

use super::gv_key;
use crate::body::{Body, read_limited};
use crate::discovery::Target;
use crate::identity;
use crate::openapi::snapshot::OpenApiConfig;
use crate::openapi::v3;
use crate::rt::Timer;

pub(super) enum V2Result {
    NotModified,
    Found(Value, Option<String>),
    NotFound,
    Failed,
}

pub(super) enum V3Result {
    /// The root, and the URL of the APIService's own key if it lists it.
    Root(Option<String>),
    NotFound,
    Failed,
}

pub(super) struct Downloaded {
    pub(super) v2: V2Result,
    pub(super) v3: V3Result,
}

/// `GET path` as `system:aggregator`; status, `Etag` and (for a 200) the bounded body.
pub(super) async fn get(
    target: &Target,
    path: &str,
    if_none_match: Option<&str>,
    timer: &Timer,
    config: &OpenApiConfig,
) -> Result<(StatusCode, Option<String>, Bytes), String> {
    let mut req = Request::get(path)
        .body(Body::empty())
        .map_err(|e| format!("building the request for {path}: {e}"))?;
    let h = req.headers_mut();
    h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    identity::set_own(h, identity::OPENAPI_USER, &[]);
    if let Some(tag) = if_none_match.and_then(|t| HeaderValue::from_str(t).ok()) {
        h.insert(header::IF_NONE_MATCH, tag);
    }
    let limit = config.max_document_bytes;
    let call = async {
        let res = target
            .fetcher
            .clone()
            .oneshot(req)
            .await
            .map_err(|e| crate::status::error_chain(&*e))?;
        let status = res.status();
        let etag = res
            .headers()
            .get(header::ETAG)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(str::to_owned);
        if status != StatusCode::OK {
            return Ok((status, etag, Bytes::new()));
        }
        let body = read_limited(res.into_body(), limit)
            .await
            .map_err(|e| e.to_string())?;
        Ok((status, etag, body))
    };
    match timer.timeout(config.fetch_timeout, call).await {
        Ok(r) => r,
        Err(_) => Err("request timed out".to_owned()),
    }
}

pub(super) async fn download(
    target: &Target,
    etag: Option<String>,
    timer: &Timer,
    config: &OpenApiConfig,
) -> Downloaded {
    let name = &target.name;
    let v2 = match get(target, "/openapi/v2", etag.as_deref(), timer, config).await {
        Ok((StatusCode::NOT_MODIFIED, ..)) if etag.is_some() => V2Result::NotModified,
        Ok((StatusCode::NOT_FOUND, ..)) => V2Result::NotFound,
        Ok((StatusCode::OK, tag, body)) => match serde_json::from_slice::<Value>(&body) {
            Ok(spec) if spec.is_object() => V2Result::Found(spec, tag),
            Ok(_) => failed(name, "/openapi/v2", Failure::NotAnObject),
            Err(e) => failed(name, "/openapi/v2", Failure::Decode(&e)),
        },
        Ok((status, ..)) => failed(name, "/openapi/v2", Failure::Status(status)),
        Err(e) => failed(name, "/openapi/v2", Failure::Download(&e)),
    };
    let key = gv_key(target);
    let v3 = match get(target, "/openapi/v3", None, timer, config).await {
        Ok((StatusCode::NOT_FOUND, ..)) => V3Result::NotFound,
        Ok((StatusCode::OK, _, body)) => match serde_json::from_slice::<Value>(&body) {
            Ok(root) => {
                let paths = v3::root_paths(&root);
                let mine = paths
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, u)| u.clone());
                let foreign = paths.len() - usize::from(mine.is_some());
                if foreign > 0 {
                    tracing::debug!(apiservice = %name, foreign, "openapi: v3 root keys outside the APIService's group-version are ignored");
                }
                V3Result::Root(mine)
            }
            Err(e) => failed(name, "/openapi/v3", Failure::Decode(&e)),
        },
        Ok((status, ..)) => failed(name, "/openapi/v3", Failure::Status(status)),
        Err(e) => failed(name, "/openapi/v3", Failure::Download(&e)),
    };
    Downloaded { v2, v3 }
}

/// Why a download of one document failed.
enum Failure<'a> {
    /// The backend answered, but not 200 (nor 304 or 404, which are answers).
    Status(StatusCode),
    /// No answer: the request failed or timed out.
    Download(&'a dyn std::fmt::Display),
    /// 200 with a body that is not JSON.
    Decode(&'a serde_json::Error),
    /// 200 with JSON that is not an object.
    NotAnObject,
}

/// Logs why the download of `path` from `name` failed (a warning when the document is
/// broken, info when it could not be had) and says it failed.
fn failed<R: From<Failed>>(name: &str, path: &str, why: Failure<'_>) -> R {
    match why {
        Failure::Status(status) => {
            tracing::info!(apiservice = %name, status = status.as_u16(), "openapi: failed to download {path}");
        }
        Failure::Download(e) => {
            tracing::info!(apiservice = %name, error = %e, "openapi: failed to download {path}");
        }
        Failure::Decode(e) => {
            tracing::warn!(apiservice = %name, error = %e, "openapi: {path} does not decode");
        }
        Failure::NotAnObject => {
            tracing::warn!(apiservice = %name, "openapi: {path} is not a JSON object");
        }
    }
    R::from(Failed)
}

/// A failed download, as either document's result.
struct Failed;

impl From<Failed> for V2Result {
    fn from(_: Failed) -> V2Result {
        V2Result::Failed
    }
}

impl From<Failed> for V3Result {
    fn from(_: Failed) -> V3Result {
        V3Result::Failed
    }
}
