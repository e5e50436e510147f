//! Bearer tokens against the rows of apiserver's `bearertoken_test.go`: which headers
//! carry a token, which are ignored without calling the token authenticator, and the
//! WebSocket subprotocol form.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::authn::UserInfo;

/// Records the tokens it is asked about and answers with a fixed outcome.
struct Fixed {
    outcome: Result<Option<UserInfo>, AuthenticationError>,
    seen: Mutex<Vec<String>>,
    calls: AtomicUsize,
}

fn fixed(outcome: Result<Option<UserInfo>, AuthenticationError>) -> Arc<Fixed> {
    Arc::new(Fixed {
        outcome,
        seen: Mutex::new(Vec::new()),
        calls: AtomicUsize::new(0),
    })
}

impl TokenAuthenticator for Fixed {
    fn authenticate_token(&self, token: &str, _audiences: &[String]) -> AuthenticateFuture {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.seen.lock().unwrap().push(token.to_owned());
        Box::pin(std::future::ready(self.outcome.clone()))
    }
}

fn parts(headers: &[(&str, &str)]) -> http::request::Parts {
    let mut b = http::Request::get("/api");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap().into_parts().0
}

fn run<T: TokenAuthenticator>(
    a: &BearerToken<T>,
    headers: &[(&str, &str)],
) -> AuthenticationResult {
    futures_util::FutureExt::now_or_never(a.authenticate(&parts(headers))).unwrap()
}

use crate::authn::AuthenticationResult;

#[test]
fn vectors_4_1_ok_rows_pass_the_second_part() {
    for h in [
        "Bearer token",
        "Bearer token a",
        "Bearer token a b c",
        "Bearer token   a",
        "bEaReR token",
    ] {
        let t = fixed(Ok(Some(UserInfo::new("myuser", Vec::<String>::new()))));
        let a = BearerToken::new(t.clone());
        assert_eq!(
            run(&a, &[("authorization", h)]).unwrap().unwrap().name,
            "myuser",
            "{h}"
        );
        assert_eq!(*t.seen.lock().unwrap(), ["token"], "{h}");
    }
}

#[test]
fn vectors_4_1_not_ok_and_errors() {
    let a = BearerToken::new(fixed(Ok(None)));
    let err = run(&a, &[("authorization", "Bearer 123")]).unwrap_err();
    assert_eq!(err.to_string(), "invalid bearer token");
    let custom = AuthenticationError::Other("boom".into());
    let a = BearerToken::new(fixed(Err(custom.clone())));
    assert_eq!(run(&a, &[("authorization", "Bearer 123")]), Err(custom));
}

#[test]
fn vectors_4_1_ignored_headers_never_call_the_token_authenticator() {
    for h in [
        None,
        Some(""),
        Some("Bearer"),
        Some("Bearer "),
        Some("bear token"),
        Some("Bearer: token"),
        Some("Basic 123"),
        Some("Bearer  token"),
    ] {
        let t = fixed(Ok(Some(UserInfo::default())));
        let a = BearerToken::new(t.clone());
        let headers: Vec<(&str, &str)> = h.map(|v| ("authorization", v)).into_iter().collect();
        assert_eq!(run(&a, &headers), Ok(None), "{h:?}");
        assert_eq!(t.calls.load(Ordering::SeqCst), 0, "{h:?}");
    }
    assert_eq!(bearer_token("Bearer  token"), None);
}

#[test]
fn websocket_protocol_token() {
    let enc = |t: &str| {
        format!(
            "{WEBSOCKET_BEARER_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(t)
        )
    };
    let proto = format!("{}, v4.channel.k8s.io", enc("ws-token"));
    let ws = [("connection", "Upgrade"), ("upgrade", "websocket")];
    let t = fixed(Ok(Some(UserInfo::new("ws", Vec::<String>::new()))));
    let a = BearerToken::new(t.clone());
    let mut h = ws.to_vec();
    h.push(("sec-websocket-protocol", &proto));
    assert_eq!(run(&a, &h).unwrap().unwrap().name, "ws");
    assert_eq!(*t.seen.lock().unwrap(), ["ws-token"]);
    // Not an upgrade: the protocol header is not a credential.
    assert_eq!(run(&a, &[("sec-websocket-protocol", &proto)]), Ok(None));
    // The bearer protocol alone leaves nothing to echo back.
    let mut h = ws.to_vec();
    let only = enc("ws-token");
    h.push(("sec-websocket-protocol", &only));
    assert_eq!(
        run(&a, &h).unwrap_err().to_string(),
        "missing additional subprotocol"
    );
    let mut h = ws.to_vec();
    let bad = format!("{WEBSOCKET_BEARER_PREFIX}!!!, v4.channel.k8s.io");
    h.push(("sec-websocket-protocol", &bad));
    assert_eq!(
        run(&a, &h).unwrap_err().to_string(),
        "invalid base64.bearer.authorization token encoding"
    );
    let mut headers = HeaderMap::new();
    headers.insert(SEC_WEBSOCKET_PROTOCOL, proto.parse().unwrap());
    strip_websocket_bearer(&mut headers);
    assert_eq!(headers[SEC_WEBSOCKET_PROTOCOL], "v4.channel.k8s.io");
}
