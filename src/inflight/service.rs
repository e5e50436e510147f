//! [`InFlightLayer`] and its service: admission in `call`, the slots carried by the
//! response body until it ends.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderValue, Request, Response, StatusCode, header};
use pin_project_lite::pin_project;

use super::{InFlight, Limit, LongRunningCheck, PerApiService, Shared, Slots};
use crate::authn::UserInfo;
use crate::authz::{ApiPath, RequestInfo, SYSTEM_MASTERS};
use crate::body::{Body, Guarded};
use crate::filter::{BodyService, Filter, Filtered, filter_layer};
use crate::metrics::{RequestLabels, RequestMetrics};
use crate::status::plain_text_error;

/// Layer that limits the requests in flight (see the [module docs](super)).
///
/// ```
/// use http::{Request, Response, StatusCode};
/// use kube_aggregator::Body;
/// use kube_aggregator::inflight::InFlightLayer;
/// use tower::{Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// // One read-only request at a time.
/// let limits = InFlightLayer::new(1, 1);
/// let service = limits.layer(tower::service_fn(|_: Request<Body>| async {
///     Ok::<_, std::convert::Infallible>(Response::new(Body::full("nodes")))
/// }));
/// let get = || Request::get("/apis/metrics.k8s.io/v1beta1/nodes").body(Body::empty()).unwrap();
///
/// // The first answer's body is not read yet, so its slot is still held.
/// let first = service.clone().oneshot(get()).await.unwrap();
/// assert_eq!(limits.in_flight().read_only, 1);
/// let second = service.clone().oneshot(get()).await.unwrap();
/// assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
/// assert_eq!(second.headers()["retry-after"], "1");
///
/// drop(first); // the body is done with: the slot is free again
/// assert_eq!(service.oneshot(get()).await.unwrap().status(), StatusCode::OK);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct InFlightLayer {
    shared: Arc<Shared>,
}

impl Default for InFlightLayer {
    /// kube-apiserver's defaults: 400 read-only, 200 mutating, no per-APIService limit.
    fn default() -> Self {
        InFlightLayer::new(
            super::DEFAULT_MAX_REQUESTS_INFLIGHT,
            super::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
        )
    }
}

impl InFlightLayer {
    /// `max_requests_inflight` read-only and `max_mutating_requests_inflight` mutating
    /// requests at most (kube-apiserver's flags of those names); 0 is no limit.
    pub fn new(max_requests_inflight: usize, max_mutating_requests_inflight: usize) -> Self {
        InFlightLayer {
            shared: Arc::new(Shared {
                read_only: Limit::new(max_requests_inflight),
                mutating: Limit::new(max_mutating_requests_inflight),
                per_api_service: None,
                long_running: LongRunningCheck::kube_apiserver(),
                metrics: None,
            }),
        }
    }

    /// At most `max` requests (both classes together) in flight for any one APIService;
    /// 0 is no limit. Not in upstream.
    pub fn per_api_service(self, max: usize) -> Self {
        self.rebuild(|s| {
            s.per_api_service = (max > 0).then(|| PerApiService {
                max,
                counts: Default::default(),
            });
        })
    }

    /// Which requests are not counted (default [`LongRunningCheck::kube_apiserver`]).
    pub fn long_running(self, check: LongRunningCheck) -> Self {
        self.rebuild(|s| s.long_running = check)
    }

    /// Counts each 429 in `metrics`, as upstream's `RecordDroppedRequest`:
    /// `apiserver_request_total` and `apiserver_request_terminations_total` with code 429.
    pub fn metrics(self, metrics: Arc<RequestMetrics>) -> Self {
        self.rebuild(|s| s.metrics = Some(metrics))
    }

    /// Adds `apiserver_current_inflight_requests{request_kind="readOnly"|"mutating"}` to
    /// `registry`: the most requests of each class in flight since the previous scrape
    /// (upstream reports the most over the last second; 0 for a class without a limit,
    /// which counts nothing).
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register_collector(Box::new(CurrentInflight(self.shared.clone())));
    }

    /// The requests counted right now, across every service this layer built.
    pub fn in_flight(&self) -> InFlight {
        self.shared.in_flight()
    }

    /// The requests counted right now for APIService `name` (`<version>.<group>`, or
    /// `<tenant>/<version>.<group>` for a tenant's: each tenant's APIServices have limits of
    /// their own); 0 when there is no per-APIService limit.
    pub fn in_flight_for(&self, name: &str) -> usize {
        self.shared
            .per_api_service
            .as_ref()
            .map_or(0, |p| p.current(name))
    }

    // Settings are fixed before the layer builds services: counters start at zero.
    fn rebuild(self, f: impl FnOnce(&mut Shared)) -> Self {
        let s = &self.shared;
        let mut shared = Shared {
            read_only: Limit::new(s.read_only.max),
            mutating: Limit::new(s.mutating.max),
            per_api_service: s.per_api_service.as_ref().map(|p| PerApiService {
                max: p.max,
                counts: Default::default(),
            }),
            long_running: s.long_running.clone(),
            metrics: s.metrics.clone(),
        };
        f(&mut shared);
        InFlightLayer {
            shared: Arc::new(shared),
        }
    }
}

impl Shared {
    fn in_flight(&self) -> InFlight {
        let count = |l: &Limit| l.current.load(std::sync::atomic::Ordering::Acquire);
        InFlight {
            read_only: count(&self.read_only),
            mutating: count(&self.mutating),
        }
    }
}

filter_layer! {
    /// Service of [`InFlightLayer`]. Ready when the inner service is: limits are checked when
    /// the request arrives, never by waiting in `poll_ready` (there is no queue, as upstream
    /// has none).
    pub type InFlightService<S> = FilterService<InFlightLayer, S>;
}

/// What a request may do: go on holding `Slots` (or none), or be refused.
enum Admission {
    Uncounted,
    Counted(Slots),
    Refused,
}

impl<S: BodyService<B>, B> Filter<S, B> for InFlightLayer {
    type Future = ResponseFuture<S::Future>;

    fn filter(&self, inner: &mut S, mut req: Request<B>) -> Self::Future {
        let admission = if crate::authz::request_info::ensure(&mut req).is_ok() {
            let (parts, body) = req.into_parts();
            let admission = match parts.extensions.get::<RequestInfo>() {
                Some(info) => admit(&self.shared, &parts, info),
                None => Admission::Uncounted,
            };
            req = Request::from_parts(parts, body);
            admission
        } else {
            // Refused right behind (authorization answers a path RequestInfo cannot parse).
            Admission::Uncounted
        };
        match admission {
            Admission::Refused => {
                if let (Some(metrics), Some(info)) =
                    (&self.shared.metrics, req.extensions().get::<RequestInfo>())
                {
                    let content_type = req
                        .headers()
                        .get(http::header::CONTENT_TYPE)
                        .map(|v| v.as_bytes());
                    let labels =
                        RequestLabels::of(info, req.method(), req.uri().query(), content_type);
                    metrics.terminated(&labels, 429);
                }
                Filtered::ready(too_many_requests())
            }
            Admission::Uncounted => Filtered::inner(inner.call(req)),
            Admission::Counted(slots) => Filtered::wrapped(Counted {
                inner: inner.call(req),
                slots: Some(slots),
            }),
        }
    }
}

/// Upstream's decision, with the per-APIService limit checked first.
fn admit(shared: &Arc<Shared>, head: &http::request::Parts, info: &RequestInfo) -> Admission {
    let per = shared.per_api_service.as_ref();
    if shared.read_only.max == 0 && shared.mutating.max == 0 && per.is_none() {
        return Admission::Uncounted;
    }
    if shared.long_running.is_long_running(head, info) {
        return Admission::Uncounted;
    }
    // Checked only when a limit is reached, as upstream: the user after impersonation.
    let is_master = || {
        head.extensions
            .get::<UserInfo>()
            .is_some_and(|u| u.groups.iter().any(|g| g == SYSTEM_MASTERS))
    };
    let mut slots = Slots {
        shared: shared.clone(),
        class: None,
        api_service: None,
    };
    let tenant = head.extensions.get::<crate::tenancy::Tenant>();
    if let (Some(per), Some(name)) = (per, api_service_name(info, tenant)) {
        if per.try_acquire(&name) {
            slots.api_service = Some(name);
        } else if is_master() {
            return Admission::Uncounted;
        } else {
            return Admission::Refused;
        }
    }
    let mutating = !matches!(info.verb.as_str(), "get" | "list" | "watch");
    let class = if mutating {
        &shared.mutating
    } else {
        &shared.read_only
    };
    if class.try_acquire() {
        slots.class = Some(mutating);
    } else if is_master() {
        return Admission::Uncounted; // `slots` gives back the per-APIService slot.
    } else {
        return Admission::Refused;
    }
    Admission::Counted(slots)
}

/// The APIService a request addresses: `<version>.<group>` for `/apis/<group>/<version>...`,
/// `<version>.` for the core group's resources.
fn api_service_name(info: &RequestInfo, tenant: Option<&crate::tenancy::Tenant>) -> Option<String> {
    let (version, group) = match info.api_path() {
        ApiPath::GroupVersion { group, version } => (version, group),
        ApiPath::Legacy if info.is_resource_request => (info.api_version.as_str(), ""),
        _ => return None,
    };
    // Pushed, not formatted: this runs for every counted request.
    let tenant = tenant.map(crate::tenancy::Tenant::name);
    let mut name =
        String::with_capacity(tenant.map_or(0, |t| t.len() + 1) + version.len() + 1 + group.len());
    // A tenant's APIService is another one than the same name elsewhere.
    if let Some(t) = tenant {
        name.push_str(t);
        name.push('/');
    }
    name.push_str(version);
    name.push('.');
    name.push_str(group);
    Some(name)
}

/// Upstream's `tooManyRequests`: `Retry-After: 1` and Go's `http.Error` text.
fn too_many_requests() -> Response<Body> {
    let mut res = plain_text_error(
        StatusCode::TOO_MANY_REQUESTS,
        "Too many requests, please try again later.",
    );
    res.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    res
}

/// Response future of [`InFlightService`]: an uncounted request's call as it is, a
/// counted call holding its slots, or the 429 refusing the request.
pub type ResponseFuture<F> = Filtered<F, Counted<F>>;

pin_project! {
    /// A counted request's call: its slots move into the response body, freed when it
    /// ends.
    pub struct Counted<F> {
        #[pin]
        inner: F,
        slots: Option<Slots>,
    }
}

debug_fields!(Counted<F> {});

impl<F: crate::body::Answer> Future for Counted<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = std::task::ready!(this.inner.poll(cx));
        let slots = this.slots.take();
        Poll::Ready(result.map(|res| match slots {
            Some(slots) if !http_body::Body::is_end_stream(res.body()) => res.map(|body| {
                // Upstream holds the slot for the whole handler, which writes the body.
                Body::new(Guarded::new(body, Some(slots)))
            }),
            _ => res,
        }))
    }
}

/// `apiserver_current_inflight_requests`, read from the layer's counters at each scrape.
#[derive(Debug)]
struct CurrentInflight(Arc<Shared>);

impl prometheus_client::collector::Collector for CurrentInflight {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder<'_>,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric as _;
        let mut family = encoder.encode_descriptor(
            "apiserver_current_inflight_requests",
            "Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for (kind, limit) in [
            ("readOnly", &self.0.read_only),
            ("mutating", &self.0.mutating),
        ] {
            let value =
                prometheus_client::metrics::gauge::ConstGauge::new(limit.take_peak() as i64);
            value.encode(family.encode_family(&[("request_kind", kind)])?)?;
        }
        Ok(())
    }
}
