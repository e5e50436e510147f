//! One probe attempt of an availability check: `GET /apis/<group>/<version>` as
//! `system:kube-aggregator`, and what its answer says about the backend.

use std::time::Duration;

use http::{Request, header};
use http_body_util::{BodyExt, Limited};
use tower::ServiceExt;

use super::{ServiceResolver, UnavailableCause};
use crate::apiservice::ServiceReference;
use crate::body::Body;
use crate::identity;
use crate::rt::Timer;
use crate::transport::{BackendClient, CertificateSummary};

/// The largest discovery document a probe reads (a group-version's `APIResourceList` is a
/// few KiB; this leaves room for the largest real ones).
const MAX_DOCUMENT: usize = 4 << 20;

/// What a probe attempt needs, borrowed from the controller for one check.
pub(crate) struct Probe<'a> {
    pub(crate) resolver: &'a dyn ServiceResolver,
    pub(crate) timer: &'a Timer,
    /// Time for the whole attempt: response head and document.
    pub(crate) budget: Duration,
    /// Our proxy client certificate, named in the messages of refusals.
    pub(crate) client: Option<&'a CertificateSummary>,
}

impl Probe<'_> {
    /// One attempt: resolve afresh, `GET` the group/version, read the document. Passes on
    /// a 2xx whose body can be an `APIResourceList` (see [`resource_list`]); redirects are not followed and fail, as
    /// do 304 and every other status (upstream passes any 2xx; a body that is no
    /// `APIResourceList` means the Service points at the wrong server, which upstream
    /// only finds when discovery later fails).
    pub(crate) async fn run(
        &self,
        service: &ServiceReference,
        client: &BackendClient,
        path: &str,
    ) -> Result<(), UnavailableCause> {
        let authority = self
            .resolver
            .resolve(service)
            .await
            .map_err(UnavailableCause::Service)?;
        let url = format!("https://{authority}{path}");
        // No `Accept`, as upstream sends none: servers answer discovery in JSON.
        let mut req =
            Request::get(&url)
                .body(Body::empty())
                .map_err(|e| UnavailableCause::Unreachable {
                    url: url.clone(),
                    detail: e.to_string(),
                })?;
        identity::set_own(
            req.headers_mut(),
            identity::KUBE_AGGREGATOR_USER,
            &[identity::SYSTEM_MASTERS],
        );
        let started = self.timer.now();
        let attempt = async {
            let res = client.clone().oneshot(req).await.map_err(|e| {
                UnavailableCause::from_error(&url, authority.as_str(), &*e, self.client.cloned())
            })?;
            let status = res.status();
            if !status.is_success() {
                return Err(UnavailableCause::from_status(
                    &url,
                    status.as_u16(),
                    self.client.cloned(),
                ));
            }
            let content_type = crate::gocompat::header(res.headers(), header::CONTENT_TYPE)
                .unwrap_or("")
                .to_owned();
            let body = Limited::new(res.into_body(), MAX_DOCUMENT)
                .collect()
                .await
                .map_err(|e| UnavailableCause::NotApiResourceList {
                    url: url.clone(),
                    detail: format!("the body could not be read: {e}"),
                })?
                .to_bytes();
            resource_list(&body, &content_type).map_err(|detail| {
                UnavailableCause::NotApiResourceList {
                    url: url.clone(),
                    detail,
                }
            })
        };
        match self.timer.timeout(self.budget, attempt).await {
            Ok(result) => result,
            Err(_) => Err(UnavailableCause::DiscoveryTimeout {
                url: url.clone(),
                elapsed: self.timer.now().saturating_duration_since(started),
                budget: self.budget,
            }),
        }
    }
}

/// Whether `body` can be the `APIResourceList` a group-version's discovery answers with.
/// Upstream passes any 2xx; this refuses only what is plainly another document, so that
/// a Service pointing at the wrong server is named as such: an HTML page, JSON that is not
/// an object, or an object whose `kind` is not `APIResourceList` (a `Status`, an
/// `APIGroupList`, ...). An empty body, an object without `kind` and a body that is
/// neither JSON nor HTML pass, as upstream passes them. The error says what the body is.
fn resource_list(body: &[u8], content_type: &str) -> Result<(), String> {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let start = body.iter().find(|b| !b.is_ascii_whitespace()).copied();
    let shown = if content_type.is_empty() {
        String::new()
    } else {
        format!("Content-Type {content_type:?}, ")
    };
    if essence == "text/html" || start == Some(b'<') {
        return Err(format!("{shown}an HTML page"));
    }
    let json = essence == "application/json" || essence.ends_with("+json");
    if !json && !matches!(start, Some(b'{' | b'[')) {
        return Ok(());
    }
    if start.is_none() {
        return Ok(());
    }
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("{shown}not JSON: {e}"))?;
    let Some(object) = value.as_object() else {
        return Err(format!("{shown}a JSON value that is not an object"));
    };
    match object.get("kind") {
        None => Ok(()),
        Some(serde_json::Value::String(kind)) if kind == "APIResourceList" => Ok(()),
        Some(serde_json::Value::String(kind)) => Err(format!("{shown}an object of kind {kind:?}")),
        Some(other) => Err(format!("{shown}an object whose kind is {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::resource_list;

    #[test]
    fn only_plainly_other_documents_fail() {
        let list = br#"{"kind":"APIResourceList","groupVersion":"a/v1","resources":[]}"#;
        assert!(resource_list(list, "application/json").is_ok());
        assert!(resource_list(br#"{"groupVersion":"a/v1","resources":[]}"#, "").is_ok());
        // What upstream passes and this does not judge: empty, kind-less, plain text.
        assert!(resource_list(b"", "application/json").is_ok());
        assert!(resource_list(b"{}", "").is_ok());
        assert!(resource_list(b"ok", "text/plain").is_ok());
        assert_eq!(
            resource_list(br#"{"kind":"Status","status":"Failure"}"#, ""),
            Err(r#"an object of kind "Status""#.into())
        );
        assert_eq!(
            resource_list(b"[]", "application/json"),
            Err(r#"Content-Type "application/json", a JSON value that is not an object"#.into())
        );
        assert_eq!(
            resource_list(b"<html></html>", "text/html; charset=utf-8"),
            Err(r#"Content-Type "text/html; charset=utf-8", an HTML page"#.into())
        );
        assert_eq!(
            resource_list(b"  <!doctype html>", ""),
            Err("an HTML page".into())
        );
        let broken = resource_list(b"{\"kind\":", "application/json").unwrap_err();
        assert!(
            broken.starts_with(r#"Content-Type "application/json", not JSON: "#),
            "{broken}"
        );
    }
}
