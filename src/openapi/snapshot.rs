//! What the OpenAPI manager is configured with and what it publishes: the documents the
//! request path serves, built once per change.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::HeaderValue;
use serde_json::Value;

use super::proto;
use crate::discovery::etag_of;

/// Timing and limits of the [`OpenApiManager`](super::OpenApiManager). Defaults are
/// upstream's where it has one; every duration is measured on the manager's
/// [`Timer`](crate::rt::Timer).
#[derive(Debug, Clone)]
pub struct OpenApiConfig {
    /// How often an APIService's specs are downloaded again (upstream: 1 min).
    pub refresh_period: Duration,
    /// Deadline of one download, headers and body (upstream: 1 min).
    pub fetch_timeout: Duration,
    /// First retry delay after a failure, doubled per failure (default 500 ms).
    pub backoff_base: Duration,
    /// Longest retry delay (default 1 min).
    pub backoff_max: Duration,
    /// Downloads running at once once every APIService has been tried (default 2); the
    /// first download of each new APIService does not wait for a worker.
    pub workers: usize,
    /// Largest spec accepted from a backend, in bytes; a larger one is refused with a
    /// logged reason and counts as a failed download.
    pub max_document_bytes: usize,
}

impl Default for OpenApiConfig {
    fn default() -> Self {
        OpenApiConfig {
            refresh_period: Duration::from_secs(60),
            fetch_timeout: Duration::from_secs(60),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(60),
            workers: 2,
            max_document_bytes: crate::discovery::DEFAULT_MAX_DOCUMENT_BYTES,
        }
    }
}

/// A merged Swagger 2.0 document, encoded both ways, as `/openapi/v2` serves it. Built
/// once per change of the merged specs; serving it clones `Bytes`.
#[derive(Debug)]
pub struct V2Document {
    /// The JSON encoding.
    pub json: Bytes,
    /// The gnostic protobuf encoding.
    pub proto: Bytes,
    /// Quoted upper-case hex SHA-512 of the JSON (also used for the protobuf form).
    pub etag: HeaderValue,
    /// When it was built.
    pub last_modified: SystemTime,
}

impl V2Document {
    /// Encodes a merged spec both ways and hashes it, stamped with the system clock.
    pub(crate) fn new(spec: &Value) -> V2Document {
        let json = Bytes::from(serde_json::to_vec(spec).unwrap_or_default());
        V2Document {
            proto: Bytes::from(proto::encode(spec)),
            etag: etag_of(&json),
            json,
            last_modified: SystemTime::now(),
        }
    }
}

/// A v3 group-version document the aggregator serves itself (converted from v2): served
/// at `/openapi/v3/<key>` with handler3's caching (`Cache-Control: public, immutable` at
/// the current hash, a 301 to the current hash for an old one).
#[derive(Debug)]
pub struct V3Document {
    /// The JSON encoding.
    pub json: Bytes,
    /// Upper-case hex SHA-512 of the JSON: the `hash` of its `serverRelativeURL`.
    pub hash: String,
    /// When it was built.
    pub last_modified: SystemTime,
}

/// Who serves one key of the v3 root: the aggregator routes `/openapi/v3/<key>` by it.
#[derive(Debug, Clone)]
pub enum V3Entry {
    /// The APIService of this name, through the proxy; its root gave this URL.
    Remote {
        /// The APIService name.
        apiservice: String,
        /// `serverRelativeURL` from its root.
        url: String,
    },
    /// The aggregator, from the APIService's v2 spec converted.
    Converted(Arc<V3Document>),
}

/// What the request path serves, published whole after every download that changed it:
/// one lock-free load per request, never a wait on a backend.
#[derive(Debug)]
pub struct OpenApiSnapshot {
    /// The remote APIServices' v2 specs (filtered to their group-version) in merge order.
    pub remote_v2: Vec<Arc<Value>>,
    /// The base spec followed by `remote_v2`, merged: what `/openapi/v2` serves when the
    /// host has no spec of its own.
    pub merged_v2: Arc<V2Document>,
    /// The v3 root keys of remote APIServices (only their own `apis/<group>/<version>`).
    pub v3: BTreeMap<String, V3Entry>,
}
