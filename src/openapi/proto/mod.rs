//! The gnostic `openapi.v2` protobuf messages (google/gnostic-models
//! `openapiv2/OpenAPIv2.proto`) as our own `prost` definitions, and the conversion of a
//! Swagger 2.0 JSON document into them, as gnostic's `ParseDocument` does it:
//! vendor extensions (`x-*`), `default`, `enum` and `example` become `Any` values holding
//! their YAML text; `$ref` parameters and responses become `JsonReference`s.
//!
//! This is the body client-go reads from `/openapi/v2` (it asks only for
//! `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`), so kubectl's
//! `explain --output=plaintext-openapiv2` and client-side validation parse it with
//! kube-openapi's `proto.NewOpenAPIData`. The message definitions follow
//! [`openapiv2/OpenAPIv2.proto`](https://github.com/google/gnostic-models/blob/main/openapiv2/OpenAPIv2.proto)
//! field for field (names, numbers, `oneof`s); each `oneof` is an enum in a module named
//! after its message, as `prost` generates them.
//!
//! ```
//! use kube_aggregator::openapi::proto::{Document, encode};
//! use prost::Message;
//!
//! let spec = serde_json::json!({
//!     "swagger": "2.0",
//!     "info": {"title": "Kubernetes", "version": "v1.32.0"},
//!     "paths": {},
//!     "definitions": {"NodeMetrics": {"type": "object", "required": ["window"],
//!         "x-kubernetes-group-version-kind": [{"group": "metrics.k8s.io", "kind": "NodeMetrics", "version": "v1beta1"}]}}
//! });
//! let bytes = encode(&spec);
//! let doc = Document::decode(bytes.as_slice()).unwrap();
//! assert_eq!(doc.info.unwrap().title, "Kubernetes");
//! let node = &doc.definitions.unwrap().additional_properties[0];
//! assert_eq!(node.name, "NodeMetrics");
//! // Vendor extensions travel as YAML text, as gnostic writes them.
//! let gvk = &node.value.as_ref().unwrap().vendor_extension[0];
//! assert!(gvk.value.as_ref().unwrap().yaml.contains("kind: NodeMetrics"));
//! ```

mod convert;
mod document;
mod parameters;
mod responses;
mod schema;

pub use convert::{document, encode};
pub use document::*;
pub use parameters::*;
pub use responses::*;
pub use schema::*;

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn round_trips_what_kubectl_reads() {
        let spec = serde_json::json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.32.0"},
            "paths": {"/apis/metrics.k8s.io/v1beta1/nodes": {"get": {
                "operationId": "listNodeMetrics",
                "parameters": [{"$ref": "#/parameters/limit"}, {"name": "watch", "in": "query", "type": "boolean", "uniqueItems": true}],
                "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/NodeMetricsList"}}},
                "x-kubernetes-group-version-kind": {"group": "metrics.k8s.io", "kind": "NodeMetrics", "version": "v1beta1"}
            }}},
            "definitions": {"NodeMetrics": {
                "type": "object", "required": ["window"], "description": "usage of a node",
                "properties": {"usage": {"type": "object", "additionalProperties": {"type": "string"}},
                               "tags": {"type": "array", "items": {"type": "string"}}},
                "x-kubernetes-group-version-kind": [{"group": "metrics.k8s.io", "kind": "NodeMetrics", "version": "v1beta1"}]
            }, "Empty": {"type": "object", "properties": {}}},
            "parameters": {"limit": {"name": "limit", "in": "query", "type": "integer"}}
        });
        let bytes = encode(&spec);
        let doc = Document::decode(bytes.as_slice()).unwrap();
        assert_eq!(doc.swagger, "2.0");
        let defs = doc.definitions.unwrap().additional_properties;
        let node = defs.iter().find(|d| d.name == "NodeMetrics").unwrap();
        let node = node.value.as_ref().unwrap();
        assert_eq!(node.r#type.as_ref().unwrap().value, ["object"]);
        assert_eq!(node.required, ["window"]);
        let gvk = &node.vendor_extension[0];
        assert_eq!(gvk.name, "x-kubernetes-group-version-kind");
        let yaml: serde_json::Value =
            serde_yaml_ng::from_str(&gvk.value.as_ref().unwrap().yaml).unwrap();
        assert_eq!(yaml[0]["kind"], "NodeMetrics");
        let props = &node.properties.as_ref().unwrap().additional_properties;
        let usage = props.iter().find(|p| p.name == "usage").unwrap();
        assert!(matches!(
            usage
                .value
                .as_ref()
                .unwrap()
                .additional_properties
                .as_deref(),
            Some(AdditionalPropertiesItem {
                oneof: Some(additional_properties_item::Oneof::Schema(_))
            })
        ));
        // An empty `properties` stays present: kube-openapi reads it as a kind.
        let empty = defs.iter().find(|d| d.name == "Empty").unwrap();
        assert!(empty.value.as_ref().unwrap().properties.is_some());
        let paths = doc.paths.unwrap().path;
        let get = paths[0].value.as_ref().unwrap().get.as_ref().unwrap();
        assert!(matches!(
            get.parameters[0].oneof,
            Some(parameters_item::Oneof::JsonReference(ref r)) if r.xref == "#/parameters/limit"
        ));
        assert!(matches!(
            get.parameters[1].oneof,
            Some(parameters_item::Oneof::Parameter(Parameter {
                oneof: Some(parameter::Oneof::NonBodyParameter(NonBodyParameter {
                    oneof: Some(non_body_parameter::Oneof::QueryParameterSubSchema(ref q))
                }))
            })) if q.name == "watch" && q.unique_items
        ));
    }
}
