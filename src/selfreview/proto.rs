//! The Kubernetes protobuf encoding of the three review kinds, written by hand from the
//! `generated.proto` files of k8s.io/api `authorization/v1` and `authentication/v1` and
//! k8s.io/apimachinery `runtime` and `meta/v1`: the `k8s\0` envelope around a
//! `runtime.Unknown` whose `raw` holds the object.
//!
//! Only the fields these kinds use are read; unknown fields are skipped, as protobuf
//! decoders do. Empty strings and false booleans are not written; a Go decoder reads them
//! as the zero values they are.

use std::collections::BTreeMap;

use super::{AccessReview, ReviewError};
use crate::authn::UserInfo;
use crate::authz::{
    NonResourceAttributes, NonResourceRule, ResourceAttributes, ResourceRule, Rules,
    SelectorAttributes, SelectorRequirement, SubjectAccessReviewStatus,
};

/// The media type, and the envelope's first four bytes.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8; 4] = b"k8s\0";

/// A field's value on the wire: only length-delimited values are kept (every field read
/// from a review's spec is a string or a message); varints and fixed values are skipped.
enum Wire<'a> {
    Varint,
    Bytes(&'a [u8]),
    Fixed,
}

/// Reads the fields of one message, in order, as `(field number, value)`; an iterator so
/// unknown fields cost nothing. Stops at the first malformed field with an error.
struct Fields<'a> {
    buf: &'a [u8],
}

/// The error of a message that ends inside a field.
fn truncated() -> ReviewError {
    ReviewError::Decode("protobuf: unexpected end of message".to_owned())
}

/// A base-128 varint from the front of `buf`, advancing it; at most 10 bytes.
fn varint(buf: &mut &[u8]) -> Result<u64, ReviewError> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = buf.split_first().ok_or_else(truncated)?;
        *buf = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(ReviewError::Decode(
        "protobuf: varint overflows 64 bits".to_owned(),
    ))
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u64, Wire<'a>), ReviewError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() {
            return None;
        }
        Some((|| {
            let key = varint(&mut self.buf)?;
            let (field, wire) = (key >> 3, key & 7);
            let value = match wire {
                0 => {
                    varint(&mut self.buf)?;
                    Wire::Varint
                }
                1 | 5 => {
                    let n = if wire == 1 { 8 } else { 4 };
                    if self.buf.len() < n {
                        return Err(truncated());
                    }
                    self.buf = &self.buf[n..];
                    Wire::Fixed
                }
                2 => {
                    let len = usize::try_from(varint(&mut self.buf)?).map_err(|_| truncated())?;
                    if self.buf.len() < len {
                        return Err(truncated());
                    }
                    let (v, rest) = self.buf.split_at(len);
                    self.buf = rest;
                    Wire::Bytes(v)
                }
                other => {
                    return Err(ReviewError::Decode(format!(
                        "protobuf: unsupported wire type {other} for field {field}"
                    )));
                }
            };
            Ok((field, value))
        })())
    }
}

fn fields(buf: &[u8]) -> Fields<'_> {
    Fields { buf }
}

/// A string field: UTF-8 or an error (Go would keep the bytes; a name must be text here).
fn text(b: &[u8]) -> Result<String, ReviewError> {
    String::from_utf8(b.to_vec())
        .map_err(|_| ReviewError::Decode("protobuf: a string field is not valid UTF-8".into()))
}

/// The object inside the envelope, with its `apiVersion` and `kind`: `body` is `k8s\0`
/// followed by a `runtime.Unknown` (field 1 `typeMeta {apiVersion, kind}`, field 2
/// `raw`). A body without the prefix gets apimachinery's own message.
pub(crate) fn unwrap_envelope(body: &[u8]) -> Result<(String, String, &[u8]), ReviewError> {
    let unknown = body.strip_prefix(MAGIC).ok_or_else(|| {
        ReviewError::Decode("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]".into())
    })?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &b""[..]);
    for f in fields(unknown) {
        match f? {
            (1, Wire::Bytes(type_meta)) => {
                for t in fields(type_meta) {
                    match t? {
                        (1, Wire::Bytes(v)) => api_version = text(v)?,
                        (2, Wire::Bytes(v)) => kind = text(v)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(v)) => raw = v,
            _ => {}
        }
    }
    Ok((api_version, kind, raw))
}

/// `SelfSubjectAccessReview.spec` from the object's bytes.
pub(crate) fn decode_access_review(raw: &[u8]) -> Result<AccessReview, ReviewError> {
    let mut review = AccessReview::default();
    for f in fields(raw) {
        if let (2, Wire::Bytes(spec)) = f? {
            for s in fields(spec) {
                match s? {
                    (1, Wire::Bytes(r)) => {
                        review.resource_attributes = Some(resource_attributes(r)?)
                    }
                    (2, Wire::Bytes(n)) => {
                        let mut attrs = NonResourceAttributes::default();
                        for a in fields(n) {
                            match a? {
                                (1, Wire::Bytes(v)) => attrs.path = text(v)?,
                                (2, Wire::Bytes(v)) => attrs.verb = text(v)?,
                                _ => {}
                            }
                        }
                        review.non_resource_attributes = Some(attrs);
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(review)
}

fn resource_attributes(buf: &[u8]) -> Result<ResourceAttributes, ReviewError> {
    let mut r = ResourceAttributes::default();
    for f in fields(buf) {
        let (field, value) = f?;
        let Wire::Bytes(v) = value else { continue };
        match field {
            1 => r.namespace = text(v)?,
            2 => r.verb = text(v)?,
            3 => r.group = text(v)?,
            4 => r.version = text(v)?,
            5 => r.resource = text(v)?,
            6 => r.subresource = text(v)?,
            7 => r.name = text(v)?,
            8 => r.field_selector = Some(selector_attributes(v)?),
            9 => r.label_selector = Some(selector_attributes(v)?),
            _ => {}
        }
    }
    Ok(r)
}

fn selector_attributes(buf: &[u8]) -> Result<SelectorAttributes, ReviewError> {
    let mut s = SelectorAttributes::default();
    for f in fields(buf) {
        match f? {
            (1, Wire::Bytes(v)) => s.raw_selector = text(v)?,
            (2, Wire::Bytes(v)) => {
                let mut req = SelectorRequirement::default();
                for r in fields(v) {
                    match r? {
                        (1, Wire::Bytes(v)) => req.key = text(v)?,
                        (2, Wire::Bytes(v)) => req.operator = text(v)?,
                        (3, Wire::Bytes(v)) => req.values.push(text(v)?),
                        _ => {}
                    }
                }
                s.requirements.push(req);
            }
            _ => {}
        }
    }
    Ok(s)
}

/// `SelfSubjectRulesReview.spec.namespace` from the object's bytes.
pub(crate) fn decode_rules_review(raw: &[u8]) -> Result<String, ReviewError> {
    let mut namespace = String::new();
    for f in fields(raw) {
        if let (2, Wire::Bytes(spec)) = f? {
            for s in fields(spec) {
                if let (1, Wire::Bytes(v)) = s? {
                    namespace = text(v)?;
                }
            }
        }
    }
    Ok(namespace)
}

/// Checks that a `SelfSubjectReview` body is a well-formed message (it has no spec).
pub(crate) fn decode_subject_review(raw: &[u8]) -> Result<(), ReviewError> {
    for f in fields(raw) {
        f?;
    }
    Ok(())
}

/// Writes protobuf fields: tag, then the value, with lengths as varints. Fields equal to
/// their default are left out, as Go's generated marshallers leave them.
#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            // The low seven bits, with the continuation bit.
            self.0.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u64, wire: u64) {
        self.varint((field << 3) | wire);
    }

    fn bytes(&mut self, field: u64, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn string(&mut self, field: u64, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    fn strings(&mut self, field: u64, list: &[String]) {
        for s in list {
            // Repeated strings keep empty entries.
            self.bytes(field, s.as_bytes());
        }
    }

    fn boolean(&mut self, field: u64, v: bool) {
        if v {
            self.key(field, 0);
            self.varint(1);
        }
    }

    fn message(&mut self, field: u64, write: impl FnOnce(&mut Enc)) {
        let mut inner = Enc::default();
        write(&mut inner);
        self.bytes(field, &inner.0);
    }
}

/// The envelope around `raw` of `kind` in `api_version`.
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut unknown = Enc(MAGIC.to_vec());
    unknown.message(1, |t| {
        t.string(1, api_version);
        t.string(2, kind);
    });
    unknown.bytes(2, raw);
    unknown.0
}

fn write_selector(e: &mut Enc, s: &SelectorAttributes) {
    e.string(1, &s.raw_selector);
    for r in &s.requirements {
        e.message(2, |m| {
            m.string(1, &r.key);
            m.string(2, &r.operator);
            m.strings(3, &r.values);
        });
    }
}

/// A `SelfSubjectAccessReview` with its spec echoed and `status` filled in.
pub(crate) fn encode_access_review(
    review: &AccessReview,
    status: &SubjectAccessReviewStatus,
) -> Vec<u8> {
    let mut raw = Enc::default();
    raw.message(1, |_| {});
    raw.message(2, |spec| {
        if let Some(r) = &review.resource_attributes {
            spec.message(1, |m| {
                m.string(1, &r.namespace);
                m.string(2, &r.verb);
                m.string(3, &r.group);
                m.string(4, &r.version);
                m.string(5, &r.resource);
                m.string(6, &r.subresource);
                m.string(7, &r.name);
                if let Some(f) = &r.field_selector {
                    m.message(8, |s| write_selector(s, f));
                }
                if let Some(l) = &r.label_selector {
                    m.message(9, |s| write_selector(s, l));
                }
            });
        }
        if let Some(n) = &review.non_resource_attributes {
            spec.message(2, |m| {
                m.string(1, &n.path);
                m.string(2, &n.verb);
            });
        }
    });
    raw.message(3, |s| {
        s.boolean(1, status.allowed);
        s.string(2, &status.reason);
        s.string(3, &status.evaluation_error);
        s.boolean(4, status.denied);
    });
    envelope(super::AUTHORIZATION_V1, "SelfSubjectAccessReview", &raw.0)
}

/// A `SelfSubjectRulesReview` with `status` filled in and an empty spec, as upstream.
pub(crate) fn encode_rules_review(rules: &Rules) -> Vec<u8> {
    let write_resource = |m: &mut Enc, r: &ResourceRule| {
        m.strings(1, &r.verbs);
        m.strings(2, &r.api_groups);
        m.strings(3, &r.resources);
        m.strings(4, &r.resource_names);
    };
    let write_non_resource = |m: &mut Enc, r: &NonResourceRule| {
        m.strings(1, &r.verbs);
        m.strings(2, &r.non_resource_urls);
    };
    let mut raw = Enc::default();
    raw.message(1, |_| {});
    raw.message(2, |_| {});
    raw.message(3, |s| {
        for r in &rules.resource_rules {
            s.message(1, |m| write_resource(m, r));
        }
        for r in &rules.non_resource_rules {
            s.message(2, |m| write_non_resource(m, r));
        }
        s.boolean(3, rules.incomplete);
        s.string(4, &rules.evaluation_error().unwrap_or_default());
    });
    envelope(super::AUTHORIZATION_V1, "SelfSubjectRulesReview", &raw.0)
}

/// A `SelfSubjectReview` naming `user`, created at `unix_seconds`.
pub(crate) fn encode_subject_review(user: &UserInfo, unix_seconds: u64) -> Vec<u8> {
    let mut raw = Enc::default();
    raw.message(1, |meta| {
        meta.message(8, |time| {
            time.key(1, 0);
            time.varint(unix_seconds);
        });
    });
    raw.message(2, |status| {
        status.message(1, |u| {
            u.string(1, &user.name);
            u.string(2, &user.uid);
            u.strings(3, &user.groups);
            let extra: &BTreeMap<String, Vec<String>> = &user.extra;
            for (k, values) in extra {
                u.message(4, |entry| {
                    entry.bytes(1, k.as_bytes());
                    entry.message(2, |v| v.strings(1, values));
                });
            }
        });
    });
    envelope(super::AUTHENTICATION_V1, "SelfSubjectReview", &raw.0)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Encodes a request the way client-go does (the gogo-generated marshaller writes
    /// every scalar, empty or not), for the decoder tests.
    pub(crate) fn client_access_review(
        resource: Option<(&str, &str, &str)>,
        path: Option<(&str, &str)>,
    ) -> Vec<u8> {
        let mut raw = Enc::default();
        raw.message(1, |_| {});
        raw.message(2, |spec| {
            if let Some((ns, verb, res)) = resource {
                spec.message(1, |m| {
                    for (i, v) in [ns, verb, "metrics.k8s.io", "", res, "", ""]
                        .iter()
                        .enumerate()
                    {
                        m.bytes(i as u64 + 1, v.as_bytes());
                    }
                });
            }
            if let Some((p, verb)) = path {
                spec.message(2, |m| {
                    m.bytes(1, p.as_bytes());
                    m.bytes(2, verb.as_bytes());
                });
            }
        });
        raw.message(3, |s| {
            s.key(1, 0);
            s.varint(0);
            s.bytes(2, b"");
            s.bytes(3, b"");
            s.key(4, 0);
            s.varint(0);
        });
        let mut out = envelope(
            super::super::AUTHORIZATION_V1,
            "SelfSubjectAccessReview",
            &raw.0,
        );
        // contentEncoding and contentType, empty, as client-go writes them.
        out.extend_from_slice(&[0x1a, 0x00, 0x22, 0x00]);
        out
    }

    #[test]
    fn decodes_what_client_go_sends() {
        let body = client_access_review(Some(("default", "list", "nodes")), None);
        let (v, k, raw) = unwrap_envelope(&body).unwrap();
        assert_eq!(
            (v.as_str(), k.as_str()),
            ("authorization.k8s.io/v1", "SelfSubjectAccessReview")
        );
        let review = decode_access_review(raw).unwrap();
        let r = review.resource_attributes.unwrap();
        assert_eq!(
            (
                r.namespace.as_str(),
                r.verb.as_str(),
                r.group.as_str(),
                r.resource.as_str()
            ),
            ("default", "list", "metrics.k8s.io", "nodes")
        );
        assert!(review.non_resource_attributes.is_none());
        let body = client_access_review(None, Some(("/healthz", "get")));
        let review = decode_access_review(unwrap_envelope(&body).unwrap().2).unwrap();
        assert_eq!(review.non_resource_attributes.unwrap().path, "/healthz");
    }

    #[test]
    fn round_trips_and_refuses_damage() {
        let review = AccessReview {
            resource_attributes: Some(ResourceAttributes {
                verb: "list".into(),
                resource: "pods".into(),
                label_selector: Some(SelectorAttributes {
                    raw_selector: String::new(),
                    requirements: vec![SelectorRequirement {
                        key: "app".into(),
                        operator: "In".into(),
                        values: vec!["a".into(), "".into()],
                    }],
                }),
                ..ResourceAttributes::default()
            }),
            non_resource_attributes: None,
        };
        let out = encode_access_review(&review, &SubjectAccessReviewStatus::default());
        let back = decode_access_review(unwrap_envelope(&out).unwrap().2).unwrap();
        assert_eq!(back, review);
        for cut in 1..out.len() {
            // Every truncation is an error or a smaller message; never a panic.
            let _ = unwrap_envelope(&out[..cut]).and_then(|(_, _, raw)| decode_access_review(raw));
        }
        assert!(unwrap_envelope(b"{\"kind\":1}").is_err());
    }
}
