#![doc = include_str!("../README.md")]
//!
//! # Feature flags
//!
//! - `tokio` (default): the tokio executor and timer ([`rt::Executor::tokio`],
//!   [`rt::Timer::tokio`]), the rustls backend transport
//!   ([`transport::RustlsTransport`]) and the TLS accept loop ([`server`]). Without it the
//!   crate uses no runtime: the host brings an executor, a timer and a
//!   [`transport::Transport`].
//! - `opentelemetry`: traces of requests ([`trace::TracingLayer`]): a server span per
//!   request with spans for authentication, authorization (and its webhook) and the proxy
//!   (and its dial), W3C `traceparent` read from privileged callers and sent to extension
//!   servers. Runtime-free.
//! - `otlp`: with `tokio`, the export of those traces over OTLP/gRPC from a
//!   kube-apiserver `TracingConfiguration` (`--tracing-config-file`).
//!
//! # Modules, by the upstream piece each one reimplements
//!
//! | module | what | upstream |
//! |---|---|---|
//! | [`builder`] | the whole stack in one step, and its [`Worker`] | kube-apiserver's `DefaultBuildHandlerChain` ([`pkg/server/config.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/server/config.go)) |
//! | [`audit`] | the `Audit-Id` response header; the audit policy, events, layer and sink seam | [`pkg/endpoints/filters/audit_init.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/audit_init.go), [`audit.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/audit.go) |
//! | [`trace`] | traces of requests (OpenTelemetry) | [`pkg/endpoints/filters/traces.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/traces.go) |
//! | [`timeout`] | request deadlines, long-running requests | [`pkg/server/filters/timeout.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/server/filters/timeout.go) |
//! | [`authn`] | who is calling: x509, front proxy, tokens, anonymous | [`pkg/endpoints/filters/authentication.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/authentication.go) |
//! | [`impersonation`] | `kubectl --as` | [`pkg/endpoints/filters/impersonation/impersonation.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/impersonation/impersonation.go) |
//! | [`inflight`] | max requests in flight | [`pkg/server/filters/maxinflight.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/server/filters/maxinflight.go) |
//! | [`authz`] | may this user do this; `RequestInfo`; SubjectAccessReview webhook | [`pkg/endpoints/filters/authorization.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/authorization.go) |
//! | [`selfreview`] | `kubectl auth can-i`, `whoami` | [`pkg/registry/authorization`](https://github.com/kubernetes/kubernetes/tree/master/pkg/registry/authorization) |
//! | [`aggregator`] | routing by APIService; the gate; the host's handlers behind | [`pkg/apiserver/apiserver.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/apiserver.go) |
//! | [`proxy`] | the request and response rewrite to extension servers | [`pkg/apiserver/handler_proxy.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/handler_proxy.go) |
//! | [`transport`] | mTLS clients per APIService, pooled | [`remote_available_controller.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/controllers/status/remote/remote_available_controller.go) `BuildTransportConfig` |
//! | [`availability`] | the `Available` condition, Service resolution | [`remote_available_controller.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/controllers/status/remote/remote_available_controller.go) |
//! | [`discovery`] | `/apis`, `/apis/<group>`, aggregated discovery v2 | [`pkg/apiserver/handler_discovery.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/handler_discovery.go) |
//! | [`openapi`] | `/openapi/v2` merged, `/openapi/v3` routed | [`pkg/controllers/openapi`](https://github.com/kubernetes/kube-aggregator/tree/master/pkg/controllers/openapi) |
//! | [`apiservice`], [`source`], [`registry`] | the APIService object, where it comes from, the routing snapshots | [`pkg/apis/apiregistration/v1/types.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apis/apiregistration/v1/types.go) |
//! | [`webhook`] | the kubeconfig webhook client both webhooks share | [`pkg/util/webhook/webhook.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/util/webhook/webhook.go) |
//! | [`status`], [`body`], [`rt`], [`reload`], [`server`] | `Status` answers, the body type, runtime seams, file reloading, the TLS accept loop | [`pkg/endpoints/handlers/responsewriters`](https://github.com/kubernetes/apiserver/tree/master/pkg/endpoints/handlers/responsewriters) |
//!
//! Every layer answers every request: policy and upstream failures become the response
//! kube-apiserver would give (a JSON `Status`, or Go's plain-text `http.Error` where
//! upstream writes one), never a dropped connection, so the services' own error type is
//! the inner service's, and `Infallible` for a stack over an infallible host.
// On docs.rs, `doc_cfg` marks each item that a feature gates (`tokio`, `otlp`) with the
// feature, from the item's own `cfg`.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// `impl Debug` for a type whose fields are not all `Debug`: the type's name and the
/// fields named, then `..` for the others (`finish_non_exhaustive`). A field may name a
/// method to print in its place (`tokens.len()`, `fallback.is_some()`): a count or a
/// presence where the field itself is a secret or not `Debug`.
macro_rules! debug_fields {
    ($ty:ident $(<$($g:ident),+>)? { $($field:ident $(.$method:ident())?),* $(,)? }) => {
        impl$(<$($g),+>)? ::std::fmt::Debug for $ty$(<$($g),+>)? {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($field), &self.$field$(.$method())?))*
                    .finish_non_exhaustive()
            }
        }
    };
}

/// `impl Clone` cloning each field, without the `T: Clone` bound `derive(Clone)` puts on
/// the type's parameters: for a type that shares what its parameter is behind an `Arc`.
macro_rules! clone_fields {
    ($ty:ident<$($g:ident),+> { $($field:ident),* $(,)? }) => {
        impl<$($g),+> Clone for $ty<$($g),+> {
            fn clone(&self) -> Self {
                $ty { $($field: self.$field.clone()),* }
            }
        }
    };
}

/// A `tower::Service::poll_ready` that is always ready: the service does its work, and
/// any waiting, in `call`.
macro_rules! always_ready {
    () => {
        fn poll_ready(
            &mut self,
            _: &mut ::std::task::Context<'_>,
        ) -> ::std::task::Poll<Result<(), Self::Error>> {
            ::std::task::Poll::Ready(Ok(()))
        }
    };
}

pub mod aggregator;
mod apiregistration;
pub mod apiservice;
pub mod audit;
mod audit_context;
pub mod authn;
pub mod authz;
pub mod availability;
pub mod body;
pub mod builder;
pub mod discovery;
pub mod filter;
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzz_logic;
mod gocompat;
mod identity;
pub mod impersonation;
pub mod inflight;
pub mod metrics;
pub mod openapi;
mod outcome_metrics;
pub mod proxy;
mod refresh;
pub mod registry;
pub mod reload;
mod resolver;
pub mod rt;
pub mod selfreview;
#[cfg(feature = "tokio")]
pub mod server;
mod sharded;
pub mod source;
mod span;
pub mod status;
mod tenancy;
pub mod tenant;
#[cfg(any(test, fuzzing))]
mod testing;
pub mod timeout;
pub mod trace;
pub mod transport;
pub mod webhook;
mod worker;

pub use aggregator::{AggregatorLayer, AggregatorService};
pub use body::Body;
pub use builder::{Aggregator, AggregatorBuilder, Worker};
pub use registry::Registry;
