//! Logic of the fuzz targets in `fuzz/fuzz_targets/`, compiled only under `cfg(fuzzing)`
//! (cargo-fuzz sets it), as linkerd2-proxy keeps its fuzz logic in the library
//! (`linkerd/addr/src/lib.rs` `fuzz_logic`).
//!
//! Living in the crate lets the targets reach `pub(crate)` parsers and keeps each target
//! a few lines long. Every function takes plain input and panics only when an invariant
//! the rest of the crate relies on does not hold: any panic here is a finding. They
//! return nothing, but for [`fuzz_stack`], whose status answers its regression tests
//! (`RUSTFLAGS="--cfg fuzzing" cargo test --lib fuzz_logic`).
//!
//! Floor 8 of the import order (docs/architecture.md): uses `apiservice`, `authn`, `authz`,
//! `availability`, `body`, `discovery`, `impersonation`, `openapi`, `proxy`, `registry`,
//! `source`, `status`, `testing`, `transport`, `webhook`; used by no other room.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::uri::Authority;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri};
use percent_encoding::percent_decode_str;
use tower::util::BoxCloneSyncService;

use crate::apiservice::{ApiService, compare_kube_aware_versions, validate};
use crate::authn::{
    CacheTtl, RequestHeaderConfig, TokenFileAuthenticator, TokenReviewAuthenticator, UserInfo,
    bearer_token,
};
use crate::authz::request_info::RequestInfoConfig;
use crate::authz::{
    Attributes, Authorizer, Decision, RequestInfo, SubjectAccessReview,
    SubjectAccessReviewAuthorizer, forbidden_message,
};
use crate::body::{Body, BoxError};
use crate::proxy::{encode_query, escape_extra_key, upstream_request, upstream_uri};
use crate::registry::Registry;
use crate::source::ApiServiceEvent;
use crate::testing::{ManualClock, NoExecutor, NoTransport, StoppedClock};
use crate::webhook::WebhookClient;

/// Methods a request may carry: the ones with a Kubernetes verb, the ones without, and
/// a lower-case extension method (Go compares method names case-sensitively, so `get`
/// must not become the `get` verb).
const METHODS: [&str; 12] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "get",
    "PROPFIND", "WATCH",
];

/// Runs `fut` (`what` names it in the panic), which must not wait on anything: the
/// canned servers, the in-memory backends and the clocks are all ready at once, so a
/// future still pending after many polls hangs, which is a finding.
pub(crate) fn run_ready<F: Future>(fut: F, what: &str) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..1024 {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
    }
    panic!("{what} did not complete although everything it waits on is ready");
}

mod authn;
mod discovery;
mod manifests;
mod proxy_rewrite;
mod request_info;
mod stack;
mod webhook;

pub use authn::{HeaderLists, fuzz_bearer, fuzz_request_header, fuzz_token_file};
pub use discovery::fuzz_discovery_documents;
pub use manifests::fuzz_manifests;
pub use proxy_rewrite::fuzz_proxy_rewrite;
pub use request_info::fuzz_request_info;
pub use stack::{StackHeader, StackInput, fuzz_stack};
pub use webhook::fuzz_webhook_responses;
