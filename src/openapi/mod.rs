//! OpenAPI aggregation: `/openapi/v2` merged, `/openapi/v3` routed (kube-aggregator
//! [`pkg/controllers/openapi/aggregator/aggregator.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/controllers/openapi/aggregator/aggregator.go)
//! and
//! [`pkg/controllers/openapiv3/aggregator/aggregator.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/controllers/openapiv3/aggregator/aggregator.go),
//! kube-openapi [`pkg/aggregator/aggregator.go`](https://github.com/kubernetes/kube-openapi/blob/master/pkg/aggregator/aggregator.go),
//! [`pkg/handler/handler.go`](https://github.com/kubernetes/kube-openapi/blob/master/pkg/handler/handler.go) and
//! [`pkg/handler3/handler.go`](https://github.com/kubernetes/kube-openapi/blob/master/pkg/handler3/handler.go)).
//!
//! - **`/openapi/v2`**: one Swagger 2.0 document: the host's own spec (asked from the
//!   inner service's `/openapi/v2`) or, when it has none, a minimal base, then every
//!   remote APIService's spec filtered to its `/apis/<group>/<version>/` paths, in group
//!   priority order; path conflicts keep the first, clashing definitions and parameters
//!   are renamed ([`merge`]). Served as JSON or as the gnostic protobuf client-go asks
//!   for ([`proto`]), with `ETag`, `Vary: Accept` and 304.
//! - **`/openapi/v3`**: the root lists the host's keys and each remote APIService's own
//!   `apis/<group>/<version>` key with its `serverRelativeURL` (`?hash=`);
//!   `/openapi/v3/apis/<group>/<version>` goes through the availability gate and the
//!   proxy, with the caller's identity, to the APIService that listed it. An APIService
//!   whose `/openapi/v3` is 404 has its v2 spec **converted** ([`v3`]) and served by the
//!   aggregator with handler3's caching (`immutable` when the hash matches, 301 to the
//!   current hash otherwise).
//!
//! The [`OpenApiManager`] downloads specs off the request path; the request path only
//! reads its published [`OpenApiSnapshot`] and asks the host in process.
//!
//! ```
//! use kube_aggregator::openapi::merge::merge_all;
//! let host = serde_json::json!({"swagger": "2.0", "paths": {"/api/v1/nodes": {}}, "definitions": {"Node": {"type": "object"}}});
//! let remote = serde_json::json!({"paths": {"/apis/metrics.k8s.io/v1beta1/nodes": {"get": {"responses": {"200": {"schema": {"$ref": "#/definitions/Node"}}}}}},
//!                                 "definitions": {"Node": {"type": "string"}}});
//! let merged = merge_all([&host, &remote]);
//! assert_eq!(merged["definitions"]["Node_v2"]["type"], "string");
//! ```
//!
//! Floor 3 of the import order (docs/architecture.md): uses `body`, `discovery`,
//! `identity`, `refresh`, `rt`, `status`; used by `aggregator`, `builder`, `fuzz_logic`.

mod manager;
pub mod merge;
mod metrics;
pub mod proto;
mod snapshot;
pub mod v3;

pub use manager::OpenApiManager;
pub use metrics::OpenApiMetrics;
pub use snapshot::{OpenApiConfig, OpenApiSnapshot, V2Document, V3Document, V3Entry};

/// The protobuf media type `/openapi/v2` answers with, when the `Accept` asks for it.
pub const PROTOBUF_V2: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
/// The older spelling client-go sends (the only one it asks for), still accepted; the
/// answer carries [`PROTOBUF_V2`] either way, as kube-openapi's handler answers.
pub const PROTOBUF_V2_DEPRECATED: &str =
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
