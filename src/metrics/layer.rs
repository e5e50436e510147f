//! [`MetricsLayer`]: each request's count, duration and response size, as upstream's
//! `InstrumentHandlerFunc` records them when its handler returns (the body sent).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::Request;
use http_body::Frame;
use pin_project_lite::pin_project;
use prometheus_client::metrics::gauge::Gauge;

use super::{RequestMetrics, Shared};
use crate::authz::RequestInfo;
use crate::body::Body;
use crate::filter::{BodyService, Filter, filter_layer};
use crate::timeout::LongRunningCheck;

/// Layer that records every request into [`RequestMetrics`]: `apiserver_request_total`
/// and `apiserver_request_duration_seconds` when its body has been sent (or the request
/// was given up: then with the code of the head, if one was sent), the bytes sent in
/// `apiserver_response_sizes`, and long-running requests in
/// `apiserver_longrunning_requests` while they run. Placed right behind authorization;
/// the duration runs from there. A request with no [`RequestInfo`] is not recorded.
#[derive(Clone, Debug)]
pub struct MetricsLayer {
    metrics: Arc<RequestMetrics>,
    long_running: LongRunningCheck,
}

impl MetricsLayer {
    /// Records into `metrics`, with kube-apiserver's long-running requests.
    pub fn new(metrics: Arc<RequestMetrics>) -> MetricsLayer {
        MetricsLayer {
            metrics,
            long_running: LongRunningCheck::kube_apiserver(),
        }
    }

    /// Which requests are long-running; the check the timeout is given.
    pub fn long_running(self, check: LongRunningCheck) -> MetricsLayer {
        MetricsLayer {
            long_running: check,
            ..self
        }
    }

    /// The metrics recorded into.
    pub fn metrics(&self) -> &Arc<RequestMetrics> {
        &self.metrics
    }
}

filter_layer! {
    /// Service of [`MetricsLayer`].
    pub type MetricsService<S> = FilterService<MetricsLayer, S>;
}

impl<S: BodyService<B>, B> Filter<S, B> for MetricsLayer {
    type Future = ResponseFuture<S::Future>;

    fn filter(&self, inner: &mut S, req: Request<B>) -> Self::Future {
        let (parts, body) = req.into_parts();
        let record = parts.extensions.get::<RequestInfo>().map(|info| {
            let content_type = parts
                .headers
                .get(http::header::CONTENT_TYPE)
                .map(|v| v.as_bytes());
            let metrics = &self.metrics;
            let labels = metrics.labels_of(info, &parts.method, parts.uri.query(), content_type);
            let gauge = self.long_running.is_long_running(&parts, info).then(|| {
                let gauge = metrics.long_running(&labels);
                gauge.inc();
                gauge
            });
            Box::new(Record {
                metrics: metrics.clone(),
                labels,
                started: Instant::now(),
                code: 0,
                bytes: 0,
                gauge,
            })
        });
        let req = Request::from_parts(parts, body);
        ResponseFuture {
            inner: inner.call(req),
            record,
        }
    }
}

/// One request being recorded; recorded when dropped (the body over, or given up).
#[derive(Debug)]
struct Record {
    metrics: Arc<RequestMetrics>,
    labels: Shared,
    started: Instant,
    /// The code of the head sent; 0 until then.
    code: u16,
    bytes: u64,
    gauge: Option<Gauge>,
}

impl Drop for Record {
    fn drop(&mut self) {
        if let Some(gauge) = &self.gauge {
            gauge.dec();
        }
        if self.code != 0 {
            let seconds = self.started.elapsed().as_secs_f64();
            self.metrics
                .observe_shared(&self.labels, self.code, seconds, self.bytes);
        }
    }
}

pin_project! {
    /// Response future of [`MetricsService`].
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        record: Option<Box<Record>>,
    }
}

debug_fields!(ResponseFuture<F> {});

impl<F: crate::body::Answer> Future for ResponseFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let res = std::task::ready!(this.inner.poll(cx))?;
        let Some(mut record) = this.record.take() else {
            return Poll::Ready(Ok(res));
        };
        record.code = res.status().as_u16();
        Poll::Ready(Ok(res.map(|inner| {
            Body::new(MetricsBody {
                inner,
                record: Some(record),
            })
        })))
    }
}

pin_project! {
    /// A response body that counts its bytes and records the request at its end (or
    /// when dropped unfinished).
    pub struct MetricsBody {
        #[pin]
        inner: Body,
        record: Option<Box<Record>>,
    }
}

debug_fields!(MetricsBody {});

impl http_body::Body for MetricsBody {
    type Data = bytes::Bytes;
    type Error = crate::body::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<bytes::Bytes>, Self::Error>>> {
        let this = self.project();
        let frame = std::task::ready!(this.inner.poll_frame(cx));
        match &frame {
            Some(Ok(frame)) => {
                if let (Some(data), Some(record)) = (frame.data_ref(), this.record.as_mut()) {
                    record.bytes += data.len() as u64;
                }
            }
            // The end: the request is over.
            None => drop(this.record.take()),
            // The body failed after the head was sent (the backend's answer broke off):
            // over, and aborted, as upstream's proxy aborts the handler.
            Some(Err(_)) => {
                if let Some(record) = this.record.take() {
                    record
                        .metrics
                        .aborted_shared(&record.labels.bounded(record.code));
                }
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
