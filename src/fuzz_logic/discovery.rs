//! Backend discovery documents and OpenAPI specs through the bounded reads and parsers.

use super::*;

/// A backend's discovery document or OpenAPI spec, read with a limit of
/// `limit_step * 64` bytes. Checks that the bounded read refuses exactly the documents
/// over the limit (naming it) and returns the others whole; that a v2 document decodes
/// or fails without panicking, and one that decodes builds an aggregated document whose
/// body is JSON and whose ETag is a quoted 128-digit hex SHA-512; that a legacy resource
/// list converts or fails; and that a spec that parses as JSON survives filtering,
/// merging with itself (clashing definitions renamed), the gnostic protobuf encoding
/// (which must decode again) and the v2-to-v3 conversion.
pub fn fuzz_discovery_documents(limit_step: u8, data: &[u8]) {
    use crate::discovery::v2::{ApiGroupDiscoveryList, ApiResourceList, convert_legacy_resources};
    use crate::discovery::{AggregatedVersion, DocumentBuilder, VersionEntry};
    use crate::openapi::{merge, proto, v3};

    let limit = usize::from(limit_step) * 64;
    let body = crate::body::Body::full(bytes::Bytes::copy_from_slice(data));
    match run_ready(crate::body::read_limited(body, limit), "read_limited") {
        Ok(read) => assert!(data.len() <= limit && read.as_ref() == data),
        Err(e) => {
            assert!(
                data.len() > limit,
                "refused a document within the limit: {e}"
            );
            assert!(e.to_string().contains(&limit.to_string()), "{e}");
        }
    }

    if let Ok(mut list) = serde_json::from_slice::<ApiGroupDiscoveryList>(data) {
        list.fill_response_kinds();
        let mut builder = DocumentBuilder::new();
        for g in list.items {
            for v in g.versions {
                builder.set(
                    &g.metadata.name,
                    VersionEntry {
                        discovery: v,
                        group_priority_minimum: 100,
                        version_priority: 15,
                    },
                );
            }
        }
        let doc = builder.build();
        let parsed: serde_json::Value = serde_json::from_slice(doc.body(AggregatedVersion::V2))
            .expect("the aggregated document is JSON");
        assert_eq!(parsed["kind"], "APIGroupDiscoveryList");
        let etag = doc.etag().to_str().expect("ASCII ETag");
        assert_eq!(etag.len(), 130);
        assert!(etag[1..129].bytes().all(|b| b.is_ascii_hexdigit()));
    }
    if let Ok(list) = serde_json::from_slice::<ApiResourceList>(data) {
        let _ = convert_legacy_resources(&list.resources);
    }
    if let Ok(spec) = serde_json::from_slice::<serde_json::Value>(data) {
        let filtered = merge::filter_by_path_prefixes(&spec, &["/apis/g/v1/"]);
        let merged = merge::merge_all([&spec, &filtered, &spec]);
        let encoded = proto::encode(&merged);
        <proto::Document as prost::Message>::decode(encoded.as_slice())
            .expect("our protobuf encoding decodes");
        let converted = v3::convert_v2_to_v3(&merged);
        serde_json::to_vec(&converted).expect("the v3 document encodes");
        let _ = v3::root_paths(&spec);
    }
}
