//! The authentication layer: credentials and front-proxy headers stripped on success
//! (custom request-header names included), 401 on failure, and the HTTP/2 connection
//! closed after a 401 or an anonymous request, as apiserver's filter tests expect.

use std::convert::Infallible;

use futures_util::FutureExt;
use tower::ServiceExt;

use super::*;
use crate::authn::{AuthenticateFuture, AuthenticationError, AuthenticationResult};

struct Fixed(AuthenticationResult);

impl Authenticator for Fixed {
    fn authenticate(&self, _: &http::request::Parts) -> AuthenticateFuture {
        Box::pin(std::future::ready(self.0.clone()))
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

async fn call(
    outcome: AuthenticationResult,
    version: http::Version,
    headers: &[(&str, &str)],
) -> Response<Body> {
    let mut b = Request::get("/apis").version(version);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let svc = AuthenticationLayer::new(Fixed(outcome)).layer(echo());
    svc.oneshot(b.body(Body::empty()).unwrap()).await.unwrap()
}

async fn text(res: Response<Body>) -> String {
    use http_body_util::BodyExt;
    String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
}

#[test]
fn vectors_2_2_success_strips_credentials_and_configured_headers() {
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
    .now_or_never()
    .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.extensions().get::<CloseConnection>().is_none());
    let body = text(res).now_or_never().unwrap();
    // Impersonation headers are the ImpersonationLayer's to check and remove.
    assert_eq!(
        body,
        "panda|system:authenticated|impersonate-user,x-group-remote"
    );
}

#[test]
fn failures_are_401_and_close_http2_connections() {
    for outcome in [Ok(None), Err(AuthenticationError::Other("bad".into()))] {
        let res = call(outcome.clone(), http::Version::HTTP_11, &[])
            .now_or_never()
            .unwrap();
        assert_eq!(res.status(), 401);
        assert!(res.extensions().get::<CloseConnection>().is_none());
        assert_eq!(
            text(res).now_or_never().unwrap().trim_end(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
        );
        let res = call(outcome, http::Version::HTTP_2, &[])
            .now_or_never()
            .unwrap();
        assert_eq!(res.status(), 401);
        assert!(res.extensions().get::<CloseConnection>().is_some());
    }
}

#[test]
fn anonymous_over_http2_closes_the_connection() {
    let anon = Ok(Some(crate::authn::Anonymous::user()));
    let res = call(anon.clone(), http::Version::HTTP_2, &[])
        .now_or_never()
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.extensions().get::<CloseConnection>().is_some());
    let res = call(anon, http::Version::HTTP_11, &[])
        .now_or_never()
        .unwrap();
    assert!(res.extensions().get::<CloseConnection>().is_none());
    assert_eq!(
        text(res).now_or_never().unwrap(),
        "system:anonymous|system:unauthenticated|"
    );
}
