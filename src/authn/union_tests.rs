//! The authenticator union and the anonymous fallback: the first success wins, errors
//! show only when nobody succeeds, and anonymous is asked only when no member failed.

use futures_util::FutureExt;

use super::*;
use crate::authn::AuthenticationResult;

struct Fixed(AuthenticationResult);

impl Authenticator for Fixed {
    fn authenticate(&self, _: &http::request::Parts) -> AuthenticateFuture {
        Box::pin(std::future::ready(self.0.clone()))
    }
}

fn parts(path: &str) -> http::request::Parts {
    http::Request::get(path).body(()).unwrap().into_parts().0
}

fn run(a: &impl Authenticator, path: &str) -> AuthenticationResult {
    a.authenticate(&parts(path)).now_or_never().unwrap()
}

fn err(s: &str) -> AuthenticationResult {
    Err(AuthenticationError::Other(s.into()))
}

#[test]
fn vectors_4_3_anonymous() {
    let u = run(&Anonymous::new(), "/api").unwrap().unwrap();
    assert_eq!(u, UserInfo::new(SYSTEM_ANONYMOUS, [SYSTEM_UNAUTHENTICATED]));
    let probes = Anonymous::for_paths(["/healthz", "/readyz", "/livez"]);
    for p in ["/healthz", "/readyz", "/livez"] {
        assert!(
            run(&probes, &format!("https://123.123.123.123{p}"))
                .unwrap()
                .is_some()
        );
    }
    assert_eq!(run(&probes, "/api"), Ok(None));
}

#[test]
fn first_success_wins_and_errors_only_when_nobody_succeeds() {
    let alice = Ok(Some(UserInfo::new("alice", Vec::<String>::new())));
    let u = Union::new()
        .push(Fixed(err("a")))
        .push(Fixed(alice.clone()))
        .push(Fixed(err("c")));
    assert_eq!(run(&u, "/"), alice);
    let u = Union::new().push(Fixed(Ok(None))).push(Fixed(err("b")));
    assert_eq!(run(&u, "/"), err("b"));
    let u = Union::new().push(Fixed(err("a"))).push(Fixed(err("b")));
    assert_eq!(run(&u, "/"), err("[a, b]"));
    assert_eq!(run(&Union::new().push(Fixed(Ok(None))), "/"), Ok(None));
}

#[test]
fn anonymous_only_when_no_member_failed() {
    let u = Union::new()
        .push(Fixed(Ok(None)))
        .with_anonymous(Anonymous::new());
    assert_eq!(run(&u, "/").unwrap().unwrap().name, SYSTEM_ANONYMOUS);
    let u = Union::new()
        .push(Fixed(err("invalid bearer token")))
        .with_anonymous(Anonymous::new());
    assert_eq!(run(&u, "/"), err("invalid bearer token"));
    assert_eq!(
        run(&Union::new().with_anonymous(Anonymous::new()), "/")
            .unwrap()
            .unwrap()
            .name,
        SYSTEM_ANONYMOUS
    );
}

/// Answers its result after one `Pending`, counting how often it was asked.
struct Later(AuthenticationResult, std::sync::atomic::AtomicUsize);

impl Later {
    fn new(result: AuthenticationResult) -> Arc<Later> {
        Arc::new(Later(result, Default::default()))
    }

    fn asked(&self) -> usize {
        self.1.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Authenticator for Later {
    fn authenticate(&self, _: &http::request::Parts) -> AuthenticateFuture {
        self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Box::pin(crate::testing::later(self.0.clone()))
    }
}

/// Members that answer later keep their order and their errors like those that answer
/// at once; a first member that knows the user at once is the only one asked.
#[tokio::test]
async fn members_answering_later_keep_the_order() {
    let alice = Ok(Some(UserInfo::new("alice", Vec::<String>::new())));
    let bob = Ok(Some(UserInfo::new("bob", Vec::<String>::new())));
    let ask = |u: &Union| u.authenticate(&parts("/"));
    // The first answers later: its answer still comes first.
    let (first, second) = (Later::new(alice.clone()), Later::new(bob.clone()));
    let u = Union::new().push(first.clone()).push(second.clone());
    assert_eq!(ask(&u).await, alice);
    assert_eq!((first.asked(), second.asked()), (1, 1));
    // A later no-opinion, then a later error: the error; a later error before a
    // success: the success.
    let u = Union::new()
        .push(Later::new(Ok(None)))
        .push(Later::new(err("b")));
    assert_eq!(ask(&u).await, err("b"));
    let u = Union::new()
        .push(Later::new(err("a")))
        .push(Later::new(bob.clone()));
    assert_eq!(ask(&u).await, bob);
    let u = Union::new()
        .push(Fixed(err("a")))
        .push(Later::new(err("b")));
    assert_eq!(ask(&u).await, err("[a, b]"));
    // Known at once: nobody else is asked.
    let second = Later::new(bob);
    let u = Union::new().push(Fixed(alice.clone())).push(second.clone());
    assert_eq!(ask(&u).await, alice);
    assert_eq!(second.asked(), 0);
}
