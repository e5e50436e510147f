//! The label sets of the request metrics' families, each encoded from one shared
//! `RequestLabels` whose hash is computed once: with the code, without `dry_run`, and the
//! aborted requests' `group`, `version`, `resource`, `subresource`, `scope`, `verb`.

use std::sync::Arc;

use prometheus_client::encoding::{
    EncodeLabel as _, EncodeLabelSet, EncodeLabelValue, LabelSetEncoder, LabelValueEncoder,
};

use super::RequestLabels;

/// [`RequestLabels`] borrowed from a request: hashed like the owned set (the same fields
/// in the same order, `&str` for `String`), so that a set seen before is found by it.
#[derive(Hash)]
pub(super) struct LabelsView<'a> {
    pub(super) verb: &'static str,
    pub(super) dry_run: &'static str,
    pub(super) group: &'a str,
    pub(super) version: &'a str,
    pub(super) resource: &'a str,
    pub(super) subresource: &'a str,
    pub(super) scope: &'static str,
    pub(super) component: &'static str,
}

impl LabelsView<'_> {
    pub(super) fn to_owned(&self) -> RequestLabels {
        RequestLabels {
            verb: self.verb,
            dry_run: self.dry_run,
            group: self.group.to_owned(),
            version: self.version.to_owned(),
            resource: self.resource.to_owned(),
            subresource: self.subresource.to_owned(),
            scope: self.scope,
            component: self.component,
        }
    }

    fn is(&self, labels: &RequestLabels) -> bool {
        self.verb == labels.verb
            && self.dry_run == labels.dry_run
            && self.group == labels.group
            && self.version == labels.version
            && self.resource == labels.resource
            && self.subresource == labels.subresource
            && self.scope == labels.scope
            && self.component == labels.component
    }
}

/// The hash [`Shared`] keeps (FxHash).
fn hash_of(labels: &impl std::hash::Hash) -> u64 {
    use std::hash::Hasher as _;
    let mut hasher = rustc_hash::FxHasher::default();
    labels.hash(&mut hasher);
    hasher.finish()
}

/// The label sets recorded so far, by hash. Only those [`RequestMetrics`] keeps samples
/// of are remembered (a 404's made-up path is not: see [`Shared::bounded`]), so this
/// grows no further than the families do.
///
/// [`RequestMetrics`]: super::RequestMetrics
#[derive(Debug, Default)]
pub(super) struct Interned(std::sync::RwLock<rustc_hash::FxHashMap<u64, Shared>>);

impl Interned {
    /// `view` as a [`Shared`]: the remembered set when there is one, else a new one.
    pub(super) fn shared(&self, view: &LabelsView<'_>) -> Shared {
        let hash = hash_of(view);
        let known = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match known.get(&hash) {
            Some(shared) if view.is(&shared.0) => shared.clone(),
            _ => Shared(Arc::new(view.to_owned()), hash),
        }
    }

    /// Remembers `labels` (the first set of each hash).
    pub(super) fn remember(&self, labels: &Shared) {
        let mut known = self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        known.entry(labels.1).or_insert_with(|| labels.clone());
    }
}

/// [`RequestLabels`] as a family key: shared, so that the keys of one request's
/// samples are reference counts, not copies of its strings.
#[derive(Clone, Debug)]
pub(super) struct Shared(pub(super) Arc<RequestLabels>, pub(super) u64);

impl Shared {
    /// `labels`, with their hash computed once (FxHash, eight bytes a step): each of a
    /// request's three metric families looks the set up by that number instead of
    /// hashing every string again with the families' SipHash.
    pub(super) fn new(labels: RequestLabels) -> Shared {
        let hash = hash_of(&labels);
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
