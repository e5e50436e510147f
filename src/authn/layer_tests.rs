//! The authentication layer: credentials and front-proxy headers stripped on success
//! (custom request-header names included), 401 on failure, and the HTTP/2 connection
//! closed after a 401 or an anonymous request, as apiserver's filter tests expect.

use std::convert::Infallible;

use tower::{Layer, Service, ServiceExt};

use super::*;
use crate::authn::{AuthenticateFuture, AuthenticationError, AuthenticationResult};

/// Answers `.0`, at once or (`.1`) after one `Pending`: the layer's synchronous and
/// asynchronous paths.
struct Fixed(AuthenticationResult, bool);

impl Authenticator for Fixed {
    fn authenticate(&self, _: &http::request::Parts) -> AuthenticateFuture {
        let result = self.0.clone();
        if self.1 {
            Box::pin(crate::testing::later(result))
        } else {
            Box::pin(std::future::ready(result))
        }
    }

    fn credential_headers(&self) -> CredentialHeaders {
        CredentialHeaders {
            names: vec![http::HeaderName::from_static("foo")],
            prefixes: vec!["baz-".into()],
        }
    }
}

fn echo()
-> impl tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible, Future = impl Send>
+ Clone
+ Send
+ 'static {
    tower::service_fn(|req: Request<Body>| async move {
        let mut names: Vec<String> = req.headers().keys().map(|k| k.to_string()).collect();
        names.sort();
        let user = req
            .extensions()
            .get::<UserInfo>()
            .cloned()
            .unwrap_or_default();
        let body = format!(
            "{}|{}|{}",
            user.name,
            user.groups.join(","),
            names.join(",")
        );
        Ok::<_, Infallible>(Response::new(Body::full(body)))
    })
}

/// The answer to one request, the same whether the authenticator answers at once or later
/// (checked: status, connection close and body of both).
async fn call(
    outcome: AuthenticationResult,
    version: http::Version,
    headers: &[(&str, &str)],
) -> Response<Body> {
    let request = || {
        let mut b = Request::get("/apis").version(version);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(Body::empty()).unwrap()
    };
    let mut answers = Vec::new();
    for later in [false, true] {
        let svc = AuthenticationLayer::new(Fixed(outcome.clone(), later)).layer(echo());
        let res = svc.oneshot(request()).await.unwrap();
        let (parts, body) = res.into_parts();
        let close = parts.extensions.get::<CloseConnection>().is_some();
        let body = text(Response::new(body)).await;
        answers.push((parts.status, close, body, parts.extensions));
    }
    let (status, close, body, extensions) = answers.pop().unwrap();
    assert_eq!(answers[0].0, status, "status, answering later and at once");
    assert_eq!(answers[0].1, close, "connection close, later and at once");
    assert_eq!(answers[0].2, body, "body, later and at once");
    let mut res = Response::new(Body::full(body));
    *res.status_mut() = status;
    *res.extensions_mut() = extensions;
    res
}

/// The layer calls only a service it made ready, one call per readiness, on both paths.
#[tokio::test]
async fn the_inner_service_is_called_only_once_ready() {
    for later in [false, true] {
        let user = Ok(Some(UserInfo::new("panda", Vec::<String>::new())));
        let mut svc = AuthenticationLayer::new(Fixed(user, later))
            .layer(crate::testing::MustBeReady::new(echo()));
        for _ in 0..3 {
            let req = Request::get("/apis").body(Body::empty()).unwrap();
            let res = svc.ready().await.unwrap().call(req).await;
            let res = res.unwrap_or_else(|e| panic!("answering later: {later}: {e}"));
            assert_eq!(res.status(), 200);
        }
    }
}

async fn text(res: Response<Body>) -> String {
    use http_body_util::BodyExt;
    String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
}

#[tokio::test]
async fn vectors_2_2_success_strips_credentials_and_configured_headers() {
    let alice = Ok(Some(UserInfo::new("panda", Vec::<String>::new())));
    let res = call(
        alice,
        http::Version::HTTP_11,
        &[
            ("authorization", "Bearer x"),
            ("x-remote-user", "Bob"),
            ("x-remote-group", "g"),
            ("x-remote-extra-a", "b"),
            ("foo", "custom-user"),
            ("baz-key", "custom-extra"),
            ("impersonate-user", "root"),
            ("x-group-remote", "snorlax"),
        ],
    )
    .await;
    assert_eq!(res.status(), 200);
    assert!(res.extensions().get::<CloseConnection>().is_none());
    let body = text(res).await;
    // Impersonation headers are the ImpersonationLayer's to check and remove.
    assert_eq!(
        body,
        "panda|system:authenticated|impersonate-user,x-group-remote"
    );
}

#[tokio::test]
async fn failures_are_401_and_close_http2_connections() {
    for outcome in [Ok(None), Err(AuthenticationError::Other("bad".into()))] {
        let res = call(outcome.clone(), http::Version::HTTP_11, &[]).await;
        assert_eq!(res.status(), 401);
        assert!(res.extensions().get::<CloseConnection>().is_none());
        assert_eq!(
            text(res).await.trim_end(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
        );
        let res = call(outcome, http::Version::HTTP_2, &[]).await;
        assert_eq!(res.status(), 401);
        assert!(res.extensions().get::<CloseConnection>().is_some());
    }
}

#[tokio::test]
async fn anonymous_over_http2_closes_the_connection() {
    let anon = Ok(Some(crate::authn::Anonymous::user()));
    let res = call(anon.clone(), http::Version::HTTP_2, &[]).await;
    assert_eq!(res.status(), 200);
    assert!(res.extensions().get::<CloseConnection>().is_some());
    let res = call(anon, http::Version::HTTP_11, &[]).await;
    assert!(res.extensions().get::<CloseConnection>().is_none());
    assert_eq!(text(res).await, "system:anonymous|system:unauthenticated|");
}
