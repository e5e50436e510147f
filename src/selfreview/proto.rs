//! The Kubernetes protobuf encoding of the three review kinds: `prost` messages numbered
//! as the `generated.proto` files of k8s.io/api `authorization/v1` and
//! `authentication/v1` and k8s.io/apimachinery `runtime` and `meta/v1` number them, inside
//! the `k8s\0` envelope (apimachinery `runtime/serializer/protobuf/protobuf.go`), which is
//! the one piece written here.
//!
//! Only the fields these kinds use are declared; `prost` skips the others, as protobuf
//! decoders do. Empty strings and false booleans are not written; a Go decoder reads them
//! as the zero values they are.

use std::collections::BTreeMap;

use prost::Message;

use super::{AccessReview, ReviewError};
use crate::authn::UserInfo;
use crate::authz::{
    NonResourceAttributes, NonResourceRule, ResourceAttributes, ResourceRule, Rules,
    SelectorAttributes, SelectorRequirement, SubjectAccessReviewStatus,
};

/// The media type, and the envelope's first four bytes.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8; 4] = b"k8s\0";

mod wire;

/// A body that is not a message of the expected type.
fn decode_error(e: prost::DecodeError) -> ReviewError {
    ReviewError::Decode(format!("protobuf: {e}"))
}

/// The object inside the envelope, with its `apiVersion` and `kind`: `body` is `k8s\0`
/// followed by a `runtime.Unknown`. A body without the prefix gets apimachinery's own
/// message.
pub(crate) fn unwrap_envelope(body: &[u8]) -> Result<(String, String, Vec<u8>), ReviewError> {
    let unknown = body.strip_prefix(MAGIC).ok_or_else(|| {
        ReviewError::Decode("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]".into())
    })?;
    let unknown = wire::Unknown::decode(unknown).map_err(decode_error)?;
    let meta = unknown.type_meta.unwrap_or_default();
    Ok((meta.api_version, meta.kind, unknown.raw))
}

/// The envelope around `object` of `kind` in `api_version`.
fn envelope(api_version: &str, kind: &str, object: &impl Message) -> Vec<u8> {
    let unknown = wire::Unknown {
        type_meta: Some(wire::TypeMeta {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        }),
        raw: object.encode_to_vec(),
        ..Default::default()
    };
    let mut out = Vec::with_capacity(MAGIC.len() + unknown.encoded_len());
    out.extend_from_slice(MAGIC);
    unknown.encode(&mut out).expect("a Vec grows as needed");
    out
}

impl From<wire::SelectorAttributes> for SelectorAttributes {
    fn from(s: wire::SelectorAttributes) -> Self {
        let requirements = s.requirements.into_iter().map(|r| SelectorRequirement {
            key: r.key,
            operator: r.operator,
            values: r.values,
        });
        SelectorAttributes {
            raw_selector: s.raw_selector,
            requirements: requirements.collect(),
        }
    }
}

impl From<&SelectorAttributes> for wire::SelectorAttributes {
    fn from(s: &SelectorAttributes) -> Self {
        let requirements = s.requirements.iter().map(|r| wire::SelectorRequirement {
            key: r.key.clone(),
            operator: r.operator.clone(),
            values: r.values.clone(),
        });
        wire::SelectorAttributes {
            raw_selector: s.raw_selector.clone(),
            requirements: requirements.collect(),
        }
    }
}

impl From<wire::SelfSubjectAccessReviewSpec> for AccessReview {
    fn from(spec: wire::SelfSubjectAccessReviewSpec) -> Self {
        AccessReview {
            resource_attributes: spec.resource_attributes.map(|r| ResourceAttributes {
                namespace: r.namespace,
                verb: r.verb,
                group: r.group,
                version: r.version,
                resource: r.resource,
                subresource: r.subresource,
                name: r.name,
                field_selector: r.field_selector.map(Into::into),
                label_selector: r.label_selector.map(Into::into),
            }),
            non_resource_attributes: spec.non_resource_attributes.map(|n| NonResourceAttributes {
                path: n.path,
                verb: n.verb,
            }),
        }
    }
}

impl From<&AccessReview> for wire::SelfSubjectAccessReviewSpec {
    fn from(review: &AccessReview) -> Self {
        let resource = review
            .resource_attributes
            .as_ref()
            .map(|r| wire::ResourceAttributes {
                namespace: r.namespace.clone(),
                verb: r.verb.clone(),
                group: r.group.clone(),
                version: r.version.clone(),
                resource: r.resource.clone(),
                subresource: r.subresource.clone(),
                name: r.name.clone(),
                field_selector: r.field_selector.as_ref().map(Into::into),
                label_selector: r.label_selector.as_ref().map(Into::into),
            });
        let non_resource =
            review
                .non_resource_attributes
                .as_ref()
                .map(|n| wire::NonResourceAttributes {
                    path: n.path.clone(),
                    verb: n.verb.clone(),
                });
        wire::SelfSubjectAccessReviewSpec {
            resource_attributes: resource,
            non_resource_attributes: non_resource,
        }
    }
}

/// `SelfSubjectAccessReview.spec` from the object's bytes.
pub(crate) fn decode_access_review(raw: &[u8]) -> Result<AccessReview, ReviewError> {
    let review = wire::SelfSubjectAccessReview::decode(raw).map_err(decode_error)?;
    Ok(review.spec.unwrap_or_default().into())
}

/// `SelfSubjectRulesReview.spec.namespace` from the object's bytes.
pub(crate) fn decode_rules_review(raw: &[u8]) -> Result<String, ReviewError> {
    let review = wire::SelfSubjectRulesReview::decode(raw).map_err(decode_error)?;
    Ok(review.spec.unwrap_or_default().namespace)
}

/// Checks that a `SelfSubjectReview` body is a well-formed message (it has no spec).
pub(crate) fn decode_subject_review(raw: &[u8]) -> Result<(), ReviewError> {
    wire::SelfSubjectReview::decode(raw).map_err(decode_error)?;
    Ok(())
}

/// A `SelfSubjectAccessReview` with its spec echoed and `status` filled in.
pub(crate) fn encode_access_review(
    review: &AccessReview,
    status: &SubjectAccessReviewStatus,
) -> Vec<u8> {
    let object = wire::SelfSubjectAccessReview {
        metadata: Some(wire::ObjectMeta::default()),
        spec: Some(review.into()),
        status: Some(wire::SubjectAccessReviewStatus {
            allowed: status.allowed,
            reason: status.reason.clone(),
            evaluation_error: status.evaluation_error.clone(),
            denied: status.denied,
        }),
    };
    envelope(super::AUTHORIZATION_V1, "SelfSubjectAccessReview", &object)
}

/// A `SelfSubjectRulesReview` with `status` filled in and an empty spec, as upstream.
pub(crate) fn encode_rules_review(rules: &Rules) -> Vec<u8> {
    let resource_rules = rules
        .resource_rules
        .iter()
        .map(|r: &ResourceRule| wire::ResourceRule {
            verbs: r.verbs.clone(),
            api_groups: r.api_groups.clone(),
            resources: r.resources.clone(),
            resource_names: r.resource_names.clone(),
        });
    let non_resource_rules =
        rules
            .non_resource_rules
            .iter()
            .map(|r: &NonResourceRule| wire::NonResourceRule {
                verbs: r.verbs.clone(),
                non_resource_urls: r.non_resource_urls.clone(),
            });
    let object = wire::SelfSubjectRulesReview {
        metadata: Some(wire::ObjectMeta::default()),
        spec: Some(wire::SelfSubjectRulesReviewSpec::default()),
        status: Some(wire::SubjectRulesReviewStatus {
            resource_rules: resource_rules.collect(),
            non_resource_rules: non_resource_rules.collect(),
            incomplete: rules.incomplete,
            evaluation_error: rules.evaluation_error().unwrap_or_default(),
        }),
    };
    envelope(super::AUTHORIZATION_V1, "SelfSubjectRulesReview", &object)
}

/// A `SelfSubjectReview` naming `user`, created at `unix_seconds`.
pub(crate) fn encode_subject_review(user: &UserInfo, unix_seconds: u64) -> Vec<u8> {
    let extra: &BTreeMap<String, Vec<String>> = &user.extra;
    let extra = extra.iter().map(|(k, values)| {
        let items = values.clone();
        (k.clone(), wire::ExtraValue { items })
    });
    let object = wire::SelfSubjectReview {
        metadata: Some(wire::ObjectMeta {
            creation_timestamp: Some(wire::Time {
                seconds: i64::try_from(unix_seconds).unwrap_or(i64::MAX),
                nanos: 0,
            }),
        }),
        status: Some(wire::SelfSubjectReviewStatus {
            user_info: Some(wire::UserInfo {
                username: user.name.clone(),
                uid: user.uid.clone(),
                groups: user.groups.clone(),
                extra: extra.collect(),
            }),
        }),
    };
    envelope(super::AUTHENTICATION_V1, "SelfSubjectReview", &object)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Encodes a request the way client-go does: the gogo-generated marshaller writes
    /// every scalar, empty or not, and the envelope's empty `contentEncoding` and
    /// `contentType`. Written byte by byte, so the decoder meets Go's bytes, not ours.
    pub(crate) fn client_access_review(
        resource: Option<(&str, &str, &str)>,
        path: Option<(&str, &str)>,
    ) -> Vec<u8> {
        /// A length-delimited field (wire type 2) with a one-byte length.
        fn field(out: &mut Vec<u8>, tag: u8, value: &[u8]) {
            out.push(tag << 3 | 2);
            out.push(u8::try_from(value.len()).expect("test values are short"));
            out.extend_from_slice(value);
        }
        let mut spec = Vec::new();
        if let Some((ns, verb, res)) = resource {
            let mut m = Vec::new();
            for (tag, v) in (1..).zip([ns, verb, "metrics.k8s.io", "", res, "", ""]) {
                field(&mut m, tag, v.as_bytes());
            }
            field(&mut spec, 1, &m);
        }
        if let Some((p, verb)) = path {
            let mut m = Vec::new();
            field(&mut m, 1, p.as_bytes());
            field(&mut m, 2, verb.as_bytes());
            field(&mut spec, 2, &m);
        }
        // status: allowed false, reason "", evaluationError "", denied false.
        let status = [0x08, 0x00, 0x12, 0x00, 0x1a, 0x00, 0x20, 0x00];
        let mut raw = Vec::new();
        field(&mut raw, 1, b"");
        field(&mut raw, 2, &spec);
        field(&mut raw, 3, &status);
        let mut type_meta = Vec::new();
        field(&mut type_meta, 1, super::super::AUTHORIZATION_V1.as_bytes());
        field(&mut type_meta, 2, b"SelfSubjectAccessReview");
        let mut out = MAGIC.to_vec();
        field(&mut out, 1, &type_meta);
        // raw may be longer than 127 bytes: its length as a varint.
        out.push(2 << 3 | 2);
        prost::encoding::encode_varint(raw.len() as u64, &mut out);
        out.extend_from_slice(&raw);
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
        let review = decode_access_review(&raw).unwrap();
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
        let review = decode_access_review(&unwrap_envelope(&body).unwrap().2).unwrap();
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
        let back = decode_access_review(&unwrap_envelope(&out).unwrap().2).unwrap();
        assert_eq!(back, review);
        for cut in 1..out.len() {
            // Every truncation is an error or a smaller message; never a panic.
            let _ = unwrap_envelope(&out[..cut]).and_then(|(_, _, raw)| decode_access_review(&raw));
        }
        assert!(unwrap_envelope(b"{\"kind\":1}").is_err());
        let err = unwrap_envelope(b"k8s\0\x0a\x05ab").unwrap_err();
        assert!(err.to_string().starts_with("protobuf: "), "{err}");
    }

    #[test]
    fn whoami_names_the_user_with_extra() {
        let mut user = UserInfo::new("bob", ["team", "system:authenticated"]);
        user.extra
            .insert("scopes".into(), vec!["a".into(), "".into()]);
        let out = encode_subject_review(&user, 1_700_000_000);
        let (v, k, raw) = unwrap_envelope(&out).unwrap();
        assert_eq!(
            (v.as_str(), k.as_str()),
            ("authentication.k8s.io/v1", "SelfSubjectReview")
        );
        let review = wire::SelfSubjectReview::decode(raw.as_slice()).unwrap();
        let created = review.metadata.unwrap().creation_timestamp.unwrap();
        assert_eq!(created.seconds, 1_700_000_000);
        let info = review.status.unwrap().user_info.unwrap();
        assert_eq!((info.username.as_str(), info.groups.len()), ("bob", 2));
        assert_eq!(info.extra["scopes"].items, ["a", ""]);
    }
}
