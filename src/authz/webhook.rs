//! The SubjectAccessReview webhook authorizer: mirrors k8s.io/apiserver
//! [`plugin/pkg/authorizer/webhook/webhook.go`](https://github.com/kubernetes/apiserver/blob/master/plugin/pkg/authorizer/webhook/webhook.go).

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;

use super::cache::ExpiringLru;
use super::{Attributes, Authorization, AuthorizationError, AuthorizeFuture, Authorizer};
use crate::rt::Timer;
use crate::webhook::{WebhookClient, WebhookMetrics};

mod review;
#[cfg(test)]
use review::BOTH_ALLOW_AND_DENY;
pub use review::{
    NonResourceAttributes, ResourceAttributes, SelectorAttributes, SubjectAccessReview,
    SubjectAccessReviewSpec, SubjectAccessReviewStatus, UnsupportedWebhookVersion, WebhookVersion,
};

/// A cached answer: the decision its status maps to (an answer saying both allow and
/// deny is cached as the error it is, as upstream caches the status).
type Cached = Result<Authorization, AuthorizationError>;

/// Upstream's decision cache size (`cache.NewLRUExpireCache(8192)`).
const CACHE_CAPACITY: usize = 8192;

/// Requests whose caller-controlled strings add up to this many bytes or more are never
/// cached: a client could otherwise fill the cache with huge keys (upstream
/// `maxControlledAttrCacheSize`).
const MAX_CACHED_ATTRIBUTE_BYTES: usize = 10_000;

/// The SubjectAccessReview could not be encoded.
#[derive(Debug, thiserror::Error)]
#[error("encoding the SubjectAccessReview: {0}")]
struct Encode(#[source] serde_json::Error);

/// The webhook's answer is not a SubjectAccessReview.
#[derive(Debug, thiserror::Error)]
#[error("decoding the SubjectAccessReview answer from {url}: {source}")]
struct Decode {
    url: String,
    #[source]
    source: serde_json::Error,
}

/// The request body for `spec`: a whole `SubjectAccessReview` in `version`'s shape.
pub fn subject_access_review_body(
    spec: &SubjectAccessReviewSpec,
    version: WebhookVersion,
) -> Result<Bytes, AuthorizationError> {
    let review = SubjectAccessReview {
        kind: "SubjectAccessReview".into(),
        api_version: version.api_version().into(),
        spec: spec.clone(),
        ..SubjectAccessReview::default()
    };
    let encode = |e| AuthorizationError::new(Encode(e));
    let mut value = serde_json::to_value(&review).map_err(encode)?;
    if version == WebhookVersion::V1beta1 {
        // v1beta1 names the groups field `group`; keep the key in its place.
        if let Some(spec) = value.get_mut("spec").and_then(|s| s.as_object_mut()) {
            *spec = std::mem::take(spec)
                .into_iter()
                .map(|(k, v)| {
                    if k == "groups" {
                        ("group".into(), v)
                    } else {
                        (k, v)
                    }
                })
                .collect();
        }
    }
    serde_json::to_vec(&value).map(Bytes::from).map_err(encode)
}

/// Authorizes requests by asking a SubjectAccessReview webhook, caching its answers; it
/// mirrors k8s.io/apiserver `plugin/pkg/authorizer/webhook/webhook.go`.
///
/// Each request becomes a `SubjectAccessReview` (see [`SubjectAccessReviewSpec`]) `POST`ed
/// through the [`WebhookClient`], which retries transient failures with upstream's
/// backoff. The answer maps to a [`Decision`](super::Decision) by [`SubjectAccessReviewStatus::decision`].
///
/// **Cache:** an LRU of 8192 answers keyed by the JSON of the spec, so the user, uid,
/// groups and extra are all part of the key and one identity's answer never serves
/// another. Allowed answers live for [`authorized_ttl`](Self::authorized_ttl) (default
/// 5 min, kube-apiserver's `--authorization-webhook-cache-authorized-ttl`), all other
/// answers for [`unauthorized_ttl`](Self::unauthorized_ttl) (default 30 s). Failed calls
/// are never cached, and neither are requests whose namespace, verb, group, version,
/// resource, subresource, name and path total 10000 bytes or more. Expiry follows the
/// injected [`Timer`]'s clock.
///
/// **Failure policy:** a webhook that cannot be reached, times out, or answers non-2xx
/// after the retries gives `Err(AuthorizationError)` carrying the call's error. That is
/// upstream's `NoOpinion` plus error (kube-apiserver's failure policy for
/// `--authorization-mode=Webhook`): in a [`Union`](super::Union) a later authorizer may
/// still allow, and otherwise the client gets 500 `Internal Server Error: "<uri>":
/// <error>` from the [`AuthorizationLayer`](super::AuthorizationLayer), never an Allow and
/// never a 403.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use http::{Request, Response};
/// use kube_aggregator::Body;
/// use kube_aggregator::authn::UserInfo;
/// use kube_aggregator::authz::{Attributes, Authorizer, Decision, RequestInfo, SubjectAccessReviewAuthorizer};
/// use kube_aggregator::rt::Timer;
/// use kube_aggregator::webhook::{WebhookClient, WebhookTransport};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // A webhook that allows everything, counting its calls.
/// let calls = Arc::new(AtomicUsize::new(0));
/// let seen = calls.clone();
/// let transport = WebhookTransport::new(tower::service_fn(move |_: Request<Body>| {
///     seen.fetch_add(1, Ordering::SeqCst);
///     async { Ok(Response::new(Body::full(r#"{"status":{"allowed":true,"reason":"RBAC"}}"#))) }
/// }));
/// let client = WebhookClient::new(transport, "https://authz.example/authorize".parse()?, Timer::tokio());
/// let authorizer = SubjectAccessReviewAuthorizer::new(client, Timer::tokio());
///
/// let info = RequestInfo::from_parts(&http::Method::GET, &"/apis/metrics.k8s.io/v1beta1/nodes".parse()?)?;
/// let attrs = Attributes::new(UserInfo::new("alice", ["dev"]), &info);
/// for _ in 0..2 {
///     let answer = authorizer.authorize(&attrs).await?;
///     assert_eq!((answer.decision, answer.reason.as_str()), (Decision::Allow, "RBAC"));
/// }
/// assert_eq!(calls.load(Ordering::SeqCst), 1); // the second answer came from the cache
/// # Ok(()) }
/// ```
///
/// Field and label selectors of lists and watches are sent as requirements
/// (`resourceAttributes.fieldSelector.requirements`, upstream's `AuthorizeWithSelectors`),
/// so a webhook can allow a list limited to, say, one node's pods.
#[derive(Clone)]
pub struct SubjectAccessReviewAuthorizer {
    client: WebhookClient,
    metrics: Arc<WebhookMetrics>,
    timer: Timer,
    version: WebhookVersion,
    authorized_ttl: Duration,
    unauthorized_ttl: Duration,
    cache: Arc<Mutex<ExpiringLru<Cached>>>,
}

impl fmt::Debug for SubjectAccessReviewAuthorizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubjectAccessReviewAuthorizer")
            .field("url", self.client.url())
            .field("version", &self.version)
            .field("authorized_ttl", &self.authorized_ttl)
            .field("unauthorized_ttl", &self.unauthorized_ttl)
            .finish_non_exhaustive()
    }
}

impl SubjectAccessReviewAuthorizer {
    /// An authorizer posting to `client`'s URL, with the cache clock read from `timer`.
    pub fn new(client: WebhookClient, timer: Timer) -> SubjectAccessReviewAuthorizer {
        let metrics = Arc::new(WebhookMetrics::delegated_authz());
        SubjectAccessReviewAuthorizer {
            client: client.with_metrics(metrics.clone()),
            metrics,
            timer,
            version: WebhookVersion::V1,
            authorized_ttl: Duration::from_secs(300),
            unauthorized_ttl: Duration::from_secs(30),
            cache: Arc::new(Mutex::new(ExpiringLru::new(CACHE_CAPACITY))),
        }
    }

    /// An authorizer for the webhook a kubeconfig-format file describes
    /// (`--authorization-webhook-config-file`): HTTPS with its CA and client credentials.
    /// Errors name the file and what is wrong with it.
    #[cfg(feature = "tokio")]
    pub fn from_kubeconfig(
        path: &std::path::Path,
        executor: crate::rt::Executor,
        timer: Timer,
    ) -> Result<SubjectAccessReviewAuthorizer, crate::webhook::KubeconfigError> {
        let client = crate::webhook::Kubeconfig::load_client(path, executor, timer.clone())?;
        Ok(SubjectAccessReviewAuthorizer::new(client, timer))
    }

    /// Its calls' counts and latencies by status code
    /// (`apiserver_delegated_authz_request_total`, `..._duration_seconds`), for the host
    /// to [register](WebhookMetrics::register).
    pub fn metrics(&self) -> &Arc<WebhookMetrics> {
        &self.metrics
    }

    /// How long an allowed answer is reused (default 5 min). Zero disables caching them.
    pub fn authorized_ttl(mut self, ttl: Duration) -> SubjectAccessReviewAuthorizer {
        self.authorized_ttl = ttl;
        self
    }

    /// How long any other answer is reused (default 30 s). Zero disables caching them.
    pub fn unauthorized_ttl(mut self, ttl: Duration) -> SubjectAccessReviewAuthorizer {
        self.unauthorized_ttl = ttl;
        self
    }

    /// The API version to speak (default [`WebhookVersion::V1`]).
    pub fn version(mut self, version: WebhookVersion) -> SubjectAccessReviewAuthorizer {
        self.version = version;
        self
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, ExpiringLru<Cached>> {
        // The cache holds plain values; a panic elsewhere cannot leave it inconsistent.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn review(
        self,
        spec: SubjectAccessReviewSpec,
        key: Vec<u8>,
        cacheable: bool,
    ) -> Result<Authorization, AuthorizationError> {
        let body = subject_access_review_body(&spec, self.version)?;
        let answer = self.client.post_json(body).await.map_err(|e| {
            tracing::warn!(url = %self.client.url(), error = %e, "failed to make webhook authorizer request");
            AuthorizationError::new(e)
        })?;
        let review: SubjectAccessReview = serde_json::from_slice(&answer).map_err(|source| {
            AuthorizationError::new(Decode {
                url: self.client.url().to_string(),
                source,
            })
        })?;
        let status = review.status;
        let ttl = if status.allowed {
            self.authorized_ttl
        } else {
            self.unauthorized_ttl
        };
        let decision = status.decision();
        if cacheable && !ttl.is_zero() {
            let now = self.timer.now();
            self.cache().insert(key, decision.clone(), ttl, now);
        }
        decision
    }
}

/// The attributes a SubjectAccessReview's `resourceAttributes` carries, in its order.
fn resource_fields(attrs: &Attributes) -> [&String; 7] {
    [
        &attrs.namespace,
        &attrs.verb,
        &attrs.api_group,
        &attrs.api_version,
        &attrs.resource,
        &attrs.subresource,
        &attrs.name,
    ]
}

/// Upstream `shouldCache`: the caller controls these strings, so a huge request could be
/// a denial-of-service attempt on the cache. The selectors are part of the key, so they
/// count too here (upstream leaves them out).
fn should_cache(attrs: &Attributes) -> bool {
    let selectors = attrs
        .field_selector
        .iter()
        .chain(&attrs.label_selector)
        .map(|r| r.key.len() + r.operator.len() + r.values.iter().map(String::len).sum::<usize>())
        .sum::<usize>();
    let size = resource_fields(attrs)
        .iter()
        .map(|s| s.len())
        .sum::<usize>()
        + attrs.path.len()
        + attrs.tenant.len()
        + selectors;
    size < MAX_CACHED_ATTRIBUTE_BYTES
}

/// The cache key of `attrs` on its own (see `write_cache_key`).
#[cfg(test)]
fn cache_key(attrs: &Attributes) -> Vec<u8> {
    let mut key = Vec::new();
    write_cache_key(attrs, &mut key);
    key
}

/// Writes the decision cache's key into `key`, replacing what it held: every field the
/// SubjectAccessReview spec carries, each prefixed with its length as four bytes, so that
/// no two different specs share a key.
/// Upstream keys its cache by the spec's JSON (`webhook.go`); this holds the same
/// information without building the spec or serializing it on every cache hit.
fn write_cache_key(attrs: &Attributes, key: &mut Vec<u8>) {
    // Lengths are at most `MAX_CACHED_ATTRIBUTE_BYTES` for anything cached; a longer
    // string still gets a distinct key (its length saturates, its bytes follow in full).
    fn len(key: &mut Vec<u8>, n: usize) {
        key.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
    }
    fn field(key: &mut Vec<u8>, s: &str) {
        len(key, s.len());
        key.extend_from_slice(s.as_bytes());
    }
    let user = &attrs.user;
    let strings = |v: &[String]| v.iter().map(|s| 4 + s.len()).sum::<usize>();
    let selectors = |reqs: &[crate::authz::SelectorRequirement]| {
        reqs.iter()
            .map(|r| 12 + r.key.len() + r.operator.len() + strings(&r.values))
            .sum::<usize>()
    };
    let capacity =
        1 + if attrs.is_resource_request {
            resource_fields(attrs)
                .iter()
                .map(|s| 4 + s.len())
                .sum::<usize>()
                + 8
                + selectors(&attrs.field_selector)
                + selectors(&attrs.label_selector)
        } else {
            8 + attrs.path.len() + attrs.verb.len()
        } + 12
            + user.name.len()
            + user.uid.len()
            + strings(&user.groups)
            + 4
            + user
                .extra
                .iter()
                .map(|(k, v)| 8 + k.len() + strings(v))
                .sum::<usize>()
            + 5
            + attrs.tenant.len();
    key.clear();
    key.reserve(capacity);
    if attrs.is_resource_request {
        key.push(b'R');
        for s in resource_fields(attrs) {
            field(key, s);
        }
        for reqs in [&attrs.field_selector, &attrs.label_selector] {
            len(key, reqs.len());
            for r in reqs {
                field(key, &r.key);
                field(key, &r.operator);
                len(key, r.values.len());
                for v in &r.values {
                    field(key, v);
                }
            }
        }
    } else {
        key.push(b'N');
        field(key, &attrs.path);
        field(key, &attrs.verb);
    }
    field(key, &user.name);
    field(key, &user.uid);
    len(key, user.groups.len());
    for g in &user.groups {
        field(key, g);
    }
    len(key, user.extra.len());
    for (k, values) in &user.extra {
        field(key, k);
        len(key, values.len());
        for v in values {
            field(key, v);
        }
    }
    // The tenant is part of the question: one tenant's answer never serves another.
    key.push(b't');
    field(key, &attrs.tenant);
    debug_assert_eq!(
        key.len(),
        capacity,
        "the key's capacity is computed exactly"
    );
}

impl Authorizer for SubjectAccessReviewAuthorizer {
    fn authorize(&self, attrs: &Attributes) -> AuthorizeFuture {
        thread_local! {
            /// Where each thread writes its keys: a cache hit allocates none.
            static KEY: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let now = self.timer.now();
        let looked_up = KEY.with_borrow_mut(|key| {
            write_cache_key(attrs, key);
            let found = self.cache().get(key, now).ok_or_else(|| key.clone());
            // An unusually long key's room is not kept.
            if key.capacity() > 4096 {
                *key = Vec::new();
            }
            found
        });
        let key = match looked_up {
            Ok(decision) => return Box::pin(std::future::ready(decision)),
            Err(key) => key,
        };
        let spec = SubjectAccessReviewSpec::from_attributes(attrs);
        Box::pin(self.clone().review(spec, key, should_cache(attrs)))
    }

    /// Upstream's answer: a webhook cannot list rules.
    fn rules_for(&self, _: &crate::authn::UserInfo, _: &str) -> super::RulesFuture {
        Box::pin(std::future::ready(super::Rules::unsupported(
            "webhook authorizer does not support user rule resolution",
        )))
    }
}

#[cfg(test)]
mod tests;
