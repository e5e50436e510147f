//! Go standard-library behaviour (and apimachinery's name checks) that upstream messages,
//! limits and wire formats depend on, in one place, each with the upstream file it
//! mirrors:
//!
//! - [`parse_duration`]: `time.ParseDuration` with its error texts (`?timeout=`);
//! - [`quote`]: `strconv.Quote`, the `%q` of names and paths in messages;
//! - `url`: `net/url` escaping and unescaping of paths, queries and extra keys;
//! - `json`: `encoding/json`'s HTML-safe escaping, written while serializing;
//! - `time`: `metav1.MicroTime` and the civil date under Go's time formats;
//! - `names`: apimachinery's DNS-1123 / DNS-1035 / qualified-name checks and messages;
//! - `yaml`: YAML request bodies with sigs.k8s.io/yaml's bound on alias expansion;
//! - [`header`]: `http.Header.Get`, a header's first value as text.
//!
//! Floor 0 of the import order (docs/architecture.md): uses nothing of the crate; used by
//! `aggregator`, `apiregistration`, `apiservice`, `audit`, `authz`, `availability`,
//! `identity`, `proxy`, `selfreview`, `status`, `timeout`, `trace`.

mod duration;
pub(crate) mod json;
pub(crate) mod names;
mod quote;
mod time;
pub(crate) mod url;
pub(crate) mod yaml;

pub(crate) use duration::parse_duration;
pub(crate) use quote::quote;
pub(crate) use time::{civil_from_days, micro_time};

/// The first value of header `name` as text, as Go's `http.Header.Get` reads it; `None`
/// when the header is missing or its value is not visible ASCII (which Go would hand over
/// as it is, and which no value the callers compare against contains).
pub(crate) fn header(
    headers: &http::HeaderMap,
    name: impl http::header::AsHeaderName,
) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}
