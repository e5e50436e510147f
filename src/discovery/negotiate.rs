//! Content negotiation of the discovery endpoints: apiserver
//! [`pkg/endpoints/handlers/negotiation/negotiate.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/handlers/negotiation/negotiate.go)
//! with the aggregated-discovery restrictions of
//! [`pkg/endpoints/discovery/aggregated/negotiation.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/discovery/aggregated/negotiation.go),
//! over Go's `goautoneg.ParseAccept`.
//!
//! Only JSON is encoded here: an `Accept` whose every clause asks for protobuf, YAML or
//! CBOR gets 406, listing `application/json`.

/// The `Content-Type` of an aggregated discovery v2 answer (and the `Accept` to ask for it).
pub const V2_JSON: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// The `Content-Type` of an aggregated discovery v2beta1 answer.
pub const V2BETA1_JSON: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// Which `apidiscovery.k8s.io` version a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggregatedVersion {
    /// `apidiscovery.k8s.io/v2`.
    V2,
    /// `apidiscovery.k8s.io/v2beta1` (same shape, older name).
    V2Beta1,
}

impl AggregatedVersion {
    /// The response `Content-Type`, repeating the negotiated parameters.
    pub fn content_type(self) -> &'static str {
        match self {
            AggregatedVersion::V2 => V2_JSON,
            AggregatedVersion::V2Beta1 => V2BETA1_JSON,
        }
    }

    /// The list's `apiVersion`.
    pub fn api_version(self) -> &'static str {
        match self {
            AggregatedVersion::V2 => "apidiscovery.k8s.io/v2",
            AggregatedVersion::V2Beta1 => "apidiscovery.k8s.io/v2beta1",
        }
    }
}

/// What a discovery request's `Accept` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Negotiated {
    /// The aggregated `APIGroupDiscoveryList`, as JSON.
    Aggregated(AggregatedVersion),
    /// The legacy document (`APIGroupList`, `APIVersions`), as JSON.
    Legacy,
    /// Nothing servable: 406.
    NotAcceptable,
}

/// One clause of an `Accept` header: type, subtype, its parameters (`g`, `v`, `as`,
/// `profile`, ...) and its quality.
pub(crate) struct Clause<'a> {
    pub(crate) kind: &'a str,
    pub(crate) subtype: &'a str,
    q: f32,
    params: Vec<(&'a str, &'a str)>,
}

impl Clause<'_> {
    fn param(&self, key: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    fn matches_json(&self) -> bool {
        matches!(
            (self.kind, self.subtype),
            ("application", "json") | ("application", "*") | ("*", "*")
        )
    }
}

/// Go's `goautoneg.ParseAccept`: clauses sorted by `q` (default 1), then concrete types
/// before wildcards; malformed clauses dropped; `q=0` clauses kept (as Go keeps them).
pub(crate) fn parse_accept(header: &str) -> Vec<Clause<'_>> {
    let mut clauses: Vec<Clause<'_>> = Vec::new();
    for part in header.split(',') {
        let mut pieces = part.split(';');
        let media = pieces.next().unwrap_or("");
        let (kind, subtype) = match media.split_once('/') {
            Some((t, s)) => (t.trim(), s.trim()),
            None if media.trim() == "*" => ("*", "*"),
            None => continue,
        };
        let mut clause = Clause {
            kind,
            subtype,
            q: 1.0,
            params: Vec::new(),
        };
        for param in pieces {
            let Some((k, v)) = param.split_once('=') else {
                continue;
            };
            let k = k.trim();
            if k == "q" {
                clause.q = v.trim().parse().unwrap_or(0.0);
            } else {
                clause.params.push((k, v.trim()));
            }
        }
        clauses.push(clause);
    }
    let less = |a: &Clause<'_>, b: &Clause<'_>| {
        a.q > b.q || (a.kind != "*" && b.kind == "*") || (a.subtype != "*" && b.subtype == "*")
    };
    clauses.sort_by(|a, b| {
        if less(a, b) {
            std::cmp::Ordering::Less
        } else if less(b, a) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    });
    clauses
}

/// Negotiates a discovery document for `accept` (the raw header, `None` when absent).
///
/// The first clause, in Go's order, that is JSON-compatible and names
/// `g=apidiscovery.k8s.io;v=v2|v2beta1;as=APIGroupDiscoveryList` selects the aggregated
/// document. Without one, the first JSON-compatible clause with no conversion parameters
/// selects the legacy document; an empty or absent header does too.
///
/// ```
/// use kube_aggregator::discovery::{negotiate, AggregatedVersion, Negotiated};
/// let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
/// assert_eq!(negotiate(Some(kubectl)), Negotiated::Aggregated(AggregatedVersion::V2));
/// assert_eq!(negotiate(Some("application/json")), Negotiated::Legacy);
/// assert_eq!(
///     negotiate(Some("application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")),
///     Negotiated::NotAcceptable,
/// );
/// ```
pub fn negotiate(accept: Option<&str>) -> Negotiated {
    let header = accept.unwrap_or("");
    if header.is_empty() {
        return Negotiated::Legacy;
    }
    let clauses = parse_accept(header);
    // A stream or server-version parameter disqualifies a clause for both documents.
    let usable = |c: &&Clause<'_>| {
        c.matches_json()
            && c.param("stream").is_none_or(str::is_empty)
            && c.param("sv").is_none_or(str::is_empty)
    };
    for c in clauses.iter().filter(usable) {
        if c.param("g") == Some("apidiscovery.k8s.io")
            && c.param("as") == Some("APIGroupDiscoveryList")
        {
            match c.param("v") {
                Some("v2") => return Negotiated::Aggregated(AggregatedVersion::V2),
                Some("v2beta1") => return Negotiated::Aggregated(AggregatedVersion::V2Beta1),
                _ => {}
            }
        }
    }
    let plain = clauses
        .iter()
        .filter(usable)
        .any(|c| c.param("g").is_none() && c.param("v").is_none() && c.param("as").is_none());
    if plain {
        Negotiated::Legacy
    } else {
        Negotiated::NotAcceptable
    }
}

/// True when `content_type` is JSON with the given aggregated `version` parameters, in
/// any order and with any extra parameters (client-go `ContentTypeIsGVK`).
///
/// ```
/// use kube_aggregator::discovery::{AggregatedVersion, is_aggregated_content_type};
///
/// let v2 = "application/json; as=APIGroupDiscoveryList; v=v2; g=apidiscovery.k8s.io";
/// assert!(is_aggregated_content_type(v2, AggregatedVersion::V2));
/// assert!(!is_aggregated_content_type(v2, AggregatedVersion::V2Beta1));
/// assert!(!is_aggregated_content_type("application/json", AggregatedVersion::V2));
/// ```
pub fn is_aggregated_content_type(content_type: &str, version: AggregatedVersion) -> bool {
    let mut parts = content_type.split(';');
    if !parts
        .next()
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    {
        return false;
    }
    let (mut g, mut v, mut a) = (None, None, None);
    for p in parts {
        if let Some((k, val)) = p.split_once('=') {
            let val = val.trim().trim_matches('"');
            match k.trim().to_ascii_lowercase().as_str() {
                "g" => g = Some(val),
                "v" => v = Some(val),
                "as" => a = Some(val),
                _ => {}
            }
        }
    }
    let want_v = match version {
        AggregatedVersion::V2 => "v2",
        AggregatedVersion::V2Beta1 => "v2beta1",
    };
    g == Some("apidiscovery.k8s.io") && v == Some(want_v) && a == Some("APIGroupDiscoveryList")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_fallbacks() {
        // q decides before position.
        let h = "application/json;q=0.5,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
        assert_eq!(
            negotiate(Some(h)),
            Negotiated::Aggregated(AggregatedVersion::V2Beta1)
        );
        // An unknown version of the list is skipped, the legacy clause wins.
        let h = "application/json;g=apidiscovery.k8s.io;v=v1alpha1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(negotiate(Some(h)), Negotiated::Legacy);
        assert_eq!(negotiate(Some("*/*")), Negotiated::Legacy);
        assert_eq!(negotiate(None), Negotiated::Legacy);
        assert_eq!(
            negotiate(Some("application/vnd.kubernetes.protobuf")),
            Negotiated::NotAcceptable
        );
        // Any JSON-compatible range carries the conversion.
        let h = "*/*;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        assert_eq!(
            negotiate(Some(h)),
            Negotiated::Aggregated(AggregatedVersion::V2)
        );
        // Protobuf first, JSON second: the JSON aggregated clause is taken.
        let h = "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        assert_eq!(
            negotiate(Some(h)),
            Negotiated::Aggregated(AggregatedVersion::V2)
        );
    }

    #[test]
    fn content_types_match_in_any_parameter_order() {
        assert!(is_aggregated_content_type(V2_JSON, AggregatedVersion::V2));
        assert!(is_aggregated_content_type(
            "application/json; as=APIGroupDiscoveryList;v=v2beta1;g=apidiscovery.k8s.io;charset=utf-8",
            AggregatedVersion::V2Beta1
        ));
        assert!(!is_aggregated_content_type(
            "application/json",
            AggregatedVersion::V2
        ));
        assert!(!is_aggregated_content_type(
            V2BETA1_JSON,
            AggregatedVersion::V2
        ));
    }
}
