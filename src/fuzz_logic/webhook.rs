//! SubjectAccessReview and TokenReview answers through the webhook clients.

use super::*;

/// Status codes a webhook may answer with: success, client errors, and the transient
/// ones the client retries.
const WEBHOOK_STATUSES: [u16; 8] = [200, 200, 201, 204, 400, 429, 500, 503];

/// A webhook client whose server answers every call with `status` and `body`.
fn canned_webhook(status: StatusCode, body: Bytes) -> WebhookClient {
    let svc = tower::service_fn(move |_req: Request<Body>| {
        let body = body.clone();
        async move {
            let mut res = http::Response::new(Body::full(body));
            *res.status_mut() = status;
            Ok::<_, BoxError>(res)
        }
    });
    WebhookClient::new(
        BoxCloneSyncService::new(svc),
        Uri::from_static("https://webhook.example/review"),
        ManualClock::new().timer(),
    )
}

/// `status` picks the webhook's HTTP status; `body` is its answer. Decodes `body` as a
/// SubjectAccessReview and as a TokenReview response, directly and through
/// [`SubjectAccessReviewAuthorizer`] and [`TokenReviewAuthenticator`] over a canned
/// webhook. Checks that nothing panics; that a decoded SubjectAccessReview survives a
/// JSON round trip; that `allowed && !denied` decides Allow, `denied` never Allow
/// (`allowed && denied` an error), neither NoOpinion, the reason passing through; that
/// the authorizer decides exactly what the decoded status says and errors for a
/// non-2xx answer or an undecodable body; and that the TokenReview authenticator
/// returns a user only for a 2xx answer whose `status.authenticated` is `true`, and
/// with wanted audiences only when the answer lists one of them.
pub fn fuzz_webhook_responses(status: u8, body: &[u8]) {
    let code = WEBHOOK_STATUSES[usize::from(status) % WEBHOOK_STATUSES.len()];
    let Ok(code) = StatusCode::from_u16(code) else {
        return;
    };
    let body = Bytes::copy_from_slice(body);

    let review: Option<SubjectAccessReview> = serde_json::from_slice(&body).ok();
    if let Some(review) = &review {
        let s = &review.status;
        let decision = s.decision();
        match (s.allowed, s.denied) {
            (true, true) => assert!(decision.is_err(), "{s:?} -> {decision:?}"),
            (_, true) => {
                assert_eq!(
                    decision.as_ref().map(|d| d.decision).ok(),
                    Some(Decision::Deny)
                )
            }
            (true, false) => {
                assert_eq!(
                    decision.as_ref().map(|d| d.decision).ok(),
                    Some(Decision::Allow)
                )
            }
            (false, false) => assert_eq!(
                decision.as_ref().map(|d| d.decision).ok(),
                Some(Decision::NoOpinion)
            ),
        }
        if let Ok(d) = &decision {
            assert_eq!(d.reason, s.reason);
        }
        if let Ok(json) = serde_json::to_vec(review) {
            let back: Result<SubjectAccessReview, _> = serde_json::from_slice(&json);
            assert_eq!(back.as_ref().ok(), Some(review), "JSON round trip");
        }
    }

    let info = RequestInfo {
        is_resource_request: true,
        verb: "get".into(),
        api_prefix: "apis".into(),
        api_group: "metrics.k8s.io".into(),
        api_version: "v1beta1".into(),
        resource: "nodes".into(),
        parts: vec!["nodes".into()],
        ..RequestInfo::default()
    };
    let attrs = Attributes::new(UserInfo::new("alice", ["dev"]), &info);
    let authorizer = SubjectAccessReviewAuthorizer::new(
        canned_webhook(code, body.clone()),
        ManualClock::new().timer(),
    );
    let decided = run_ready(
        authorizer.authorize(&attrs),
        "a SubjectAccessReview webhook call",
    );
    match (&review, code.is_success()) {
        (Some(review), true) => {
            let direct = review.status.decision();
            assert_eq!(
                decided
                    .as_ref()
                    .map(|a| (a.decision, a.reason.as_str()))
                    .ok(),
                direct
                    .as_ref()
                    .map(|a| (a.decision, a.reason.as_str()))
                    .ok(),
                "authorizer and decoded status disagree"
            );
            assert_eq!(
                decided.is_err(),
                direct.is_err(),
                "{decided:?} vs {direct:?}"
            );
            // A second ask must give the same answer, cached or not.
            let again = run_ready(
                authorizer.authorize(&attrs),
                "a SubjectAccessReview webhook call",
            );
            assert_eq!(
                again.as_ref().map(|a| a.decision).ok(),
                decided.as_ref().map(|a| a.decision).ok()
            );
        }
        _ => assert!(decided.is_err(), "{code} {decided:?}"),
    }

    // Go's decoder replaces invalid UTF-8 inside strings instead of failing, and serde
    // skips fields it ignores without checking them, so read the answer the lenient way.
    let token_review: Option<serde_json::Value> =
        serde_json::from_str(&String::from_utf8_lossy(&body)).ok();
    for wanted in [Vec::new(), vec!["api".to_owned()]] {
        let Ok(authn) = TokenReviewAuthenticator::new(
            canned_webhook(code, body.clone()),
            ManualClock::new().timer(),
            CacheTtl::default(),
        ) else {
            return;
        };
        let outcome = run_ready(authn.review("t0ken", &wanted), "a TokenReview webhook call");
        let Ok(Some(user)) = outcome else {
            continue;
        };
        assert!(code.is_success(), "{code} authenticated {user:?}");
        let status = token_review.as_ref().map(|v| &v["status"]);
        assert_eq!(
            status.map(|s| &s["authenticated"]),
            Some(&serde_json::Value::Bool(true)),
            "authenticated {user:?} without status.authenticated"
        );
        if !wanted.is_empty() {
            let listed: BTreeSet<&str> = status
                .and_then(|s| s["audiences"].as_array())
                .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
                .unwrap_or_default();
            assert!(listed.contains("api"), "audiences {listed:?} for {user:?}");
        }
    }
}
