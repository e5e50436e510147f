//! The label sets of the request metrics' families, each encoded from one shared
//! `RequestLabels` whose hash is computed once: with the code, without `dry_run`, and the
//! aborted requests' `group`, `version`, `resource`, `subresource`, `scope`, `verb`.

use std::sync::Arc;

use prometheus_client::encoding::{
    EncodeLabel as _, EncodeLabelSet, EncodeLabelValue, LabelSetEncoder, LabelValueEncoder,
};

use super::RequestLabels;

/// [`RequestLabels`] as a family key: shared, so that the keys of one request's
/// samples are reference counts, not copies of its strings.
#[derive(Clone, Debug)]
pub(super) struct Shared(pub(super) Arc<RequestLabels>, pub(super) u64);

impl Shared {
    /// `labels`, with their hash computed once (FxHash, eight bytes a step): each of a
    /// request's three metric families looks the set up by that number instead of
    /// hashing every string again with the families' SipHash.
    pub(super) fn new(labels: RequestLabels) -> Shared {
        use std::hash::{Hash as _, Hasher as _};
        let mut hasher = rustc_hash::FxHasher::default();
        labels.hash(&mut hasher);
        let hash = hasher.finish();
        Shared(Arc::new(labels), hash)
    }

    /// The labels without what a client chose freely: the group, version, resource and
    /// subresource of a request answered 404, so made-up paths cannot grow the label
    /// sets (upstream counts only what its installed handlers serve).
    pub(super) fn bounded(&self, code: u16) -> Shared {
        if code != 404 {
            return self.clone();
        }
        Shared::new(RequestLabels {
            group: String::new(),
            version: String::new(),
            resource: String::new(),
            subresource: String::new(),
            ..(*self.0).clone()
        })
    }
}

impl std::hash::Hash for Shared {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.1);
    }
}

impl PartialEq for Shared {
    fn eq(&self, other: &Shared) -> bool {
        self.1 == other.1 && (Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0)
    }
}

impl Eq for Shared {}

impl EncodeLabelSet for Shared {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> std::fmt::Result {
        self.0.encode(encoder)
    }
}

/// A label set and the response code: [`Shared`] and the code for
/// `apiserver_request_total`, [`NoDryRun`] and the code for
/// `apiserver_request_terminations_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct WithCode<L>(pub(super) L, pub(super) Code);

impl<L: EncodeLabelSet> EncodeLabelSet for WithCode<L> {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> std::fmt::Result {
        self.0.encode(encoder)?;
        ("code", self.1).encode(encoder.encode_label())
    }
}

/// An HTTP status code as a label value.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(super) struct Code(pub(super) u16);

impl EncodeLabelValue for Code {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        use std::fmt::Write as _;
        write!(encoder, "{}", self.0)
    }
}

/// [`RequestLabels`] without `dry_run` (the long-running gauge and the size histogram):
/// the shared labels with an empty `dry_run`, so that keys equal as written are equal.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct NoDryRun(pub(super) Shared);

impl NoDryRun {
    pub(super) fn of(labels: &Shared) -> NoDryRun {
        if labels.0.dry_run.is_empty() {
            return NoDryRun(labels.clone());
        }
        NoDryRun(Shared::new(RequestLabels {
            dry_run: "",
            ..(*labels.0).clone()
        }))
    }
}

impl EncodeLabelSet for NoDryRun {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> std::fmt::Result {
        self.0.0.encode_without(encoder, &["dry_run"])
    }
}

/// [`NoDryRun`] without `component` either: `apiserver_request_aborts_total`'s labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct Aborted(pub(super) NoDryRun);

impl EncodeLabelSet for Aborted {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> std::fmt::Result {
        self.0
            .0
            .0
            .encode_without(encoder, &["dry_run", "component"])
    }
}
