//! Responses, schema items and headers (gnostic `OpenAPIv2.proto`).

// The oneofs mirror the .proto; boxing their large variants would only change the
// in-memory shape of messages that are built once per document.
#![allow(clippy::large_enum_variant)]

use prost::Message;

use super::*;

/// `Responses`.
#[derive(Clone, PartialEq, Message)]
pub struct Responses {
    /// By status code (or `default`).
    #[prost(message, repeated, tag = "1")]
    pub response_code: Vec<NamedResponseValue>,
    /// `x-*`.
    #[prost(message, repeated, tag = "2")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `NamedResponseValue`.
#[derive(Clone, PartialEq, Message)]
pub struct NamedResponseValue {
    /// Status code.
    #[prost(string, tag = "1")]
    pub name: String,
    /// The response.
    #[prost(message, optional, tag = "2")]
    pub value: Option<ResponseValue>,
}

/// `ResponseValue`.
#[derive(Clone, PartialEq, Message)]
pub struct ResponseValue {
    /// A response or a reference.
    #[prost(oneof = "response_value::Oneof", tags = "1, 2")]
    pub oneof: Option<response_value::Oneof>,
}

pub mod response_value {
    //! `ResponseValue.oneof`: a response is inline or a `$ref` to the spec's `responses`.
    //!
    //! ```
    //! use kube_aggregator::openapi::proto::document;
    //! use serde_json::json;
    //! use kube_aggregator::openapi::proto::response_value::Oneof;
    //!
    //! let doc = document(&json!({"swagger": "2.0", "paths": {"/apis/g/v/things": {"get": {
    //!     "responses": {"200": {"description": "OK"}, "401": {"$ref": "#/responses/unauthorized"}}}}}}));
    //! let get = doc.paths.unwrap().path[0].value.clone().unwrap().get.unwrap();
    //! let codes = get.responses.unwrap().response_code;
    //! assert!(matches!(&codes[0].value.as_ref().unwrap().oneof, Some(Oneof::Response(r)) if r.description == "OK"));
    //! assert!(matches!(&codes[1].value.as_ref().unwrap().oneof, Some(Oneof::JsonReference(_))));
    //! ```

    /// The variants.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Oneof {
        /// Inline.
        #[prost(message, tag = "1")]
        Response(super::Response),
        /// `{"$ref": ...}`.
        #[prost(message, tag = "2")]
        JsonReference(super::JsonReference),
    }
}

/// `Response`.
#[derive(Clone, PartialEq, Message)]
pub struct Response {
    /// `description`.
    #[prost(string, tag = "1")]
    pub description: String,
    /// `schema`.
    #[prost(message, optional, tag = "2")]
    pub schema: Option<SchemaItem>,
    /// `headers`.
    #[prost(message, optional, tag = "3")]
    pub headers: Option<Headers>,
    /// `examples`.
    #[prost(message, optional, tag = "4")]
    pub examples: Option<Examples>,
    /// `x-*`.
    #[prost(message, repeated, tag = "5")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `SchemaItem`.
#[derive(Clone, PartialEq, Message)]
pub struct SchemaItem {
    /// A schema or a file schema.
    #[prost(oneof = "schema_item::Oneof", tags = "1, 2")]
    pub oneof: Option<schema_item::Oneof>,
}

pub mod schema_item {
    //! `SchemaItem.oneof`: a response's schema is a [`Schema`](super::Schema), or a
    //! [`FileSchema`](super::FileSchema) when its `type` is `file` (a download).
    //!
    //! ```
    //! use kube_aggregator::openapi::proto::document;
    //! use serde_json::json;
    //! use kube_aggregator::openapi::proto::{response_value, schema_item::Oneof};
    //!
    //! let doc = document(&json!({"swagger": "2.0", "paths": {"/apis/g/v/logs": {"get": {
    //!     "responses": {"200": {"description": "OK", "schema": {"type": "file"}}}}}}}));
    //! let get = doc.paths.unwrap().path[0].value.clone().unwrap().get.unwrap();
    //! let codes = get.responses.unwrap().response_code;
    //! let Some(response_value::Oneof::Response(ok)) = &codes[0].value.as_ref().unwrap().oneof else { panic!() };
    //! assert!(matches!(ok.schema.as_ref().unwrap().oneof, Some(Oneof::FileSchema(_))));
    //! ```

    /// The variants.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Oneof {
        /// A schema.
        #[prost(message, tag = "1")]
        Schema(super::Schema),
        /// `type: file`.
        #[prost(message, tag = "2")]
        FileSchema(super::FileSchema),
    }
}

/// `FileSchema`.
#[derive(Clone, PartialEq, Message)]
pub struct FileSchema {
    /// `format`.
    #[prost(string, tag = "1")]
    pub format: String,
    /// `title`.
    #[prost(string, tag = "2")]
    pub title: String,
    /// `description`.
    #[prost(string, tag = "3")]
    pub description: String,
    /// `default`.
    #[prost(message, optional, tag = "4")]
    pub default: Option<Any>,
    /// `required`.
    #[prost(string, repeated, tag = "5")]
    pub required: Vec<String>,
    /// `type`.
    #[prost(string, tag = "6")]
    pub r#type: String,
    /// `readOnly`.
    #[prost(bool, tag = "7")]
    pub read_only: bool,
    /// `externalDocs`.
    #[prost(message, optional, tag = "8")]
    pub external_docs: Option<ExternalDocs>,
    /// `example`.
    #[prost(message, optional, tag = "9")]
    pub example: Option<Any>,
    /// `x-*`.
    #[prost(message, repeated, tag = "10")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `Headers`.
#[derive(Clone, PartialEq, Message)]
pub struct Headers {
    /// By name.
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedHeader>,
}

/// `NamedHeader`.
#[derive(Clone, PartialEq, Message)]
pub struct NamedHeader {
    /// Header name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its description.
    #[prost(message, optional, tag = "2")]
    pub value: Option<Header>,
}

/// `Header`.
#[derive(Clone, PartialEq, Message)]
pub struct Header {
    /// `type`.
    #[prost(string, tag = "1")]
    pub r#type: String,
    /// `format`.
    #[prost(string, tag = "2")]
    pub format: String,
    /// `items`.
    #[prost(message, optional, tag = "3")]
    pub items: Option<PrimitivesItems>,
    /// `collectionFormat`.
    #[prost(string, tag = "4")]
    pub collection_format: String,
    /// `default`.
    #[prost(message, optional, tag = "5")]
    pub default: Option<Any>,
    /// `description`.
    #[prost(string, tag = "18")]
    pub description: String,
    /// `x-*`.
    #[prost(message, repeated, tag = "19")]
    pub vendor_extension: Vec<NamedAny>,
}
