//! The gnostic `openapi.v2` protobuf messages (google/gnostic-models
//! `openapiv2/OpenAPIv2.proto`) as our own `prost` definitions, and the conversion of a
//! Swagger 2.0 JSON document into them, as gnostic's `ParseDocument` does it:
//! vendor extensions (`x-*`), `default`, `enum` and `example` become `Any` values holding
//! their YAML text; `$ref` parameters and responses become `JsonReference`s.
//!
//! This is the body client-go reads from `/openapi/v2` (it asks only for
//! `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`), so kubectl's
//! `explain --output=plaintext-openapiv2` and client-side validation parse it with
//! kube-openapi's `proto.NewOpenAPIData`.

// The oneofs mirror the .proto; boxing their large variants would only change the
// in-memory shape of messages that are built once per document.
#![allow(clippy::large_enum_variant)]

use prost::Message;
use serde_json::{Map, Value};

/// `google.protobuf.Any` (never filled: gnostic keeps YAML text instead).
#[derive(Clone, PartialEq, Message)]
pub struct ProtobufAny {
    /// Type URL.
    #[prost(string, tag = "1")]
    pub type_url: String,
    /// Encoded value.
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `Any`: a JSON value kept as its YAML text.
#[derive(Clone, PartialEq, Message)]
pub struct Any {
    /// Unused.
    #[prost(message, optional, tag = "1")]
    pub value: Option<ProtobufAny>,
    /// The value as YAML.
    #[prost(string, tag = "2")]
    pub yaml: String,
}

/// `NamedAny`.
#[derive(Clone, PartialEq, Message)]
pub struct NamedAny {
    /// Key.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Value.
    #[prost(message, optional, tag = "2")]
    pub value: Option<Any>,
}

/// `Document`.
#[derive(Clone, PartialEq, Message)]
pub struct Document {
    /// `swagger`.
    #[prost(string, tag = "1")]
    pub swagger: String,
    /// `info`.
    #[prost(message, optional, tag = "2")]
    pub info: Option<Info>,
    /// `host`.
    #[prost(string, tag = "3")]
    pub host: String,
    /// `basePath`.
    #[prost(string, tag = "4")]
    pub base_path: String,
    /// `schemes`.
    #[prost(string, repeated, tag = "5")]
    pub schemes: Vec<String>,
    /// `consumes`.
    #[prost(string, repeated, tag = "6")]
    pub consumes: Vec<String>,
    /// `produces`.
    #[prost(string, repeated, tag = "7")]
    pub produces: Vec<String>,
    /// `paths`.
    #[prost(message, optional, tag = "8")]
    pub paths: Option<Paths>,
    /// `definitions`.
    #[prost(message, optional, tag = "9")]
    pub definitions: Option<Definitions>,
    /// `parameters`.
    #[prost(message, optional, tag = "10")]
    pub parameters: Option<ParameterDefinitions>,
    /// `responses`.
    #[prost(message, optional, tag = "11")]
    pub responses: Option<ResponseDefinitions>,
    /// `security`.
    #[prost(message, repeated, tag = "12")]
    pub security: Vec<SecurityRequirement>,
    /// `securityDefinitions`.
    #[prost(message, optional, tag = "13")]
    pub security_definitions: Option<SecurityDefinitions>,
    /// `tags`.
    #[prost(message, repeated, tag = "14")]
    pub tags: Vec<Tag>,
    /// `externalDocs`.
    #[prost(message, optional, tag = "15")]
    pub external_docs: Option<ExternalDocs>,
    /// `x-*`.
    #[prost(message, repeated, tag = "16")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `Info`.
#[derive(Clone, PartialEq, Message)]
pub struct Info {
    /// `title`.
    #[prost(string, tag = "1")]
    pub title: String,
    /// `version`.
    #[prost(string, tag = "2")]
    pub version: String,
    /// `description`.
    #[prost(string, tag = "3")]
    pub description: String,
    /// `termsOfService`.
    #[prost(string, tag = "4")]
    pub terms_of_service: String,
    /// `contact`.
    #[prost(message, optional, tag = "5")]
    pub contact: Option<Contact>,
    /// `license`.
    #[prost(message, optional, tag = "6")]
    pub license: Option<License>,
    /// `x-*`.
    #[prost(message, repeated, tag = "7")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `Contact`.
#[derive(Clone, PartialEq, Message)]
pub struct Contact {
    /// `name`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `url`.
    #[prost(string, tag = "2")]
    pub url: String,
    /// `email`.
    #[prost(string, tag = "3")]
    pub email: String,
    /// `x-*`.
    #[prost(message, repeated, tag = "4")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `License`.
#[derive(Clone, PartialEq, Message)]
pub struct License {
    /// `name`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `url`.
    #[prost(string, tag = "2")]
    pub url: String,
    /// `x-*`.
    #[prost(message, repeated, tag = "3")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `ExternalDocs`.
#[derive(Clone, PartialEq, Message)]
pub struct ExternalDocs {
    /// `description`.
    #[prost(string, tag = "1")]
    pub description: String,
    /// `url`.
    #[prost(string, tag = "2")]
    pub url: String,
    /// `x-*`.
    #[prost(message, repeated, tag = "3")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `Tag`.
#[derive(Clone, PartialEq, Message)]
pub struct Tag {
    /// `name`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `description`.
    #[prost(string, tag = "2")]
    pub description: String,
    /// `externalDocs`.
    #[prost(message, optional, tag = "3")]
    pub external_docs: Option<ExternalDocs>,
    /// `x-*`.
    #[prost(message, repeated, tag = "4")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `Paths`.
#[derive(Clone, PartialEq, Message)]
pub struct Paths {
    /// `x-*`.
    #[prost(message, repeated, tag = "1")]
    pub vendor_extension: Vec<NamedAny>,
    /// The paths.
    #[prost(message, repeated, tag = "2")]
    pub path: Vec<NamedPathItem>,
}

/// `NamedPathItem`.
#[derive(Clone, PartialEq, Message)]
pub struct NamedPathItem {
    /// The path.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its item.
    #[prost(message, optional, tag = "2")]
    pub value: Option<PathItem>,
}

/// `PathItem`.
#[derive(Clone, PartialEq, Message)]
pub struct PathItem {
    /// `$ref`.
    #[prost(string, tag = "1")]
    pub xref: String,
    /// `get`.
    #[prost(message, optional, tag = "2")]
    pub get: Option<Operation>,
    /// `put`.
    #[prost(message, optional, tag = "3")]
    pub put: Option<Operation>,
    /// `post`.
    #[prost(message, optional, tag = "4")]
    pub post: Option<Operation>,
    /// `delete`.
    #[prost(message, optional, tag = "5")]
    pub delete: Option<Operation>,
    /// `options`.
    #[prost(message, optional, tag = "6")]
    pub options: Option<Operation>,
    /// `head`.
    #[prost(message, optional, tag = "7")]
    pub head: Option<Operation>,
    /// `patch`.
    #[prost(message, optional, tag = "8")]
    pub patch: Option<Operation>,
    /// `parameters`.
    #[prost(message, repeated, tag = "9")]
    pub parameters: Vec<ParametersItem>,
    /// `x-*`.
    #[prost(message, repeated, tag = "10")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `Operation`.
#[derive(Clone, PartialEq, Message)]
pub struct Operation {
    /// `tags`.
    #[prost(string, repeated, tag = "1")]
    pub tags: Vec<String>,
    /// `summary`.
    #[prost(string, tag = "2")]
    pub summary: String,
    /// `description`.
    #[prost(string, tag = "3")]
    pub description: String,
    /// `externalDocs`.
    #[prost(message, optional, tag = "4")]
    pub external_docs: Option<ExternalDocs>,
    /// `operationId`.
    #[prost(string, tag = "5")]
    pub operation_id: String,
    /// `produces`.
    #[prost(string, repeated, tag = "6")]
    pub produces: Vec<String>,
    /// `consumes`.
    #[prost(string, repeated, tag = "7")]
    pub consumes: Vec<String>,
    /// `parameters`.
    #[prost(message, repeated, tag = "8")]
    pub parameters: Vec<ParametersItem>,
    /// `responses`.
    #[prost(message, optional, tag = "9")]
    pub responses: Option<Responses>,
    /// `schemes`.
    #[prost(string, repeated, tag = "10")]
    pub schemes: Vec<String>,
    /// `deprecated`.
    #[prost(bool, tag = "11")]
    pub deprecated: bool,
    /// `security`.
    #[prost(message, repeated, tag = "12")]
    pub security: Vec<SecurityRequirement>,
    /// `x-*`.
    #[prost(message, repeated, tag = "13")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `ParametersItem`.
#[derive(Clone, PartialEq, Message)]
pub struct ParametersItem {
    /// A parameter or a reference to one.
    #[prost(oneof = "parameters_item::Oneof", tags = "1, 2")]
    pub oneof: Option<parameters_item::Oneof>,
}

/// `ParametersItem.oneof`.
pub mod parameters_item {
    /// The variants.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Oneof {
        /// An inline parameter.
        #[prost(message, tag = "1")]
        Parameter(super::Parameter),
        /// `{"$ref": ...}`.
        #[prost(message, tag = "2")]
        JsonReference(super::JsonReference),
    }
}

/// `JsonReference`.
#[derive(Clone, PartialEq, Message)]
pub struct JsonReference {
    /// `$ref`.
    #[prost(string, tag = "1")]
    pub xref: String,
    /// `description`.
    #[prost(string, tag = "2")]
    pub description: String,
}

/// `Parameter`.
#[derive(Clone, PartialEq, Message)]
pub struct Parameter {
    /// Body or not.
    #[prost(oneof = "parameter::Oneof", tags = "1, 2")]
    pub oneof: Option<parameter::Oneof>,
}

/// `Parameter.oneof`.
pub mod parameter {
    /// The variants.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Oneof {
        /// `in: body`.
        #[prost(message, tag = "1")]
        BodyParameter(super::BodyParameter),
        /// Any other `in`.
        #[prost(message, tag = "2")]
        NonBodyParameter(super::NonBodyParameter),
    }
}

/// `BodyParameter`.
#[derive(Clone, PartialEq, Message)]
pub struct BodyParameter {
    /// `description`.
    #[prost(string, tag = "1")]
    pub description: String,
    /// `name`.
    #[prost(string, tag = "2")]
    pub name: String,
    /// `in`.
    #[prost(string, tag = "3")]
    pub r#in: String,
    /// `required`.
    #[prost(bool, tag = "4")]
    pub required: bool,
    /// `schema`.
    #[prost(message, optional, tag = "5")]
    pub schema: Option<Schema>,
    /// `x-*`.
    #[prost(message, repeated, tag = "6")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `NonBodyParameter`.
#[derive(Clone, PartialEq, Message)]
pub struct NonBodyParameter {
    /// By `in`.
    #[prost(oneof = "non_body_parameter::Oneof", tags = "1, 2, 3, 4")]
    pub oneof: Option<non_body_parameter::Oneof>,
}

/// `NonBodyParameter.oneof`.
pub mod non_body_parameter {
    /// The variants.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Oneof {
        /// `in: header`.
        #[prost(message, tag = "1")]
        HeaderParameterSubSchema(super::SimpleParameter),
        /// `in: formData`.
        #[prost(message, tag = "2")]
        FormDataParameterSubSchema(super::FormDataParameter),
        /// `in: query`.
        #[prost(message, tag = "3")]
        QueryParameterSubSchema(super::FormDataParameter),
        /// `in: path`.
        #[prost(message, tag = "4")]
        PathParameterSubSchema(super::SimpleParameter),
    }
}

/// `HeaderParameterSubSchema` and `PathParameterSubSchema` (the same fields and numbers).
#[derive(Clone, PartialEq, Message)]
pub struct SimpleParameter {
    /// `required`.
    #[prost(bool, tag = "1")]
    pub required: bool,
    /// `in`.
    #[prost(string, tag = "2")]
    pub r#in: String,
    /// `description`.
    #[prost(string, tag = "3")]
    pub description: String,
    /// `name`.
    #[prost(string, tag = "4")]
    pub name: String,
    /// `type`.
    #[prost(string, tag = "5")]
    pub r#type: String,
    /// `format`.
    #[prost(string, tag = "6")]
    pub format: String,
    /// `items`.
    #[prost(message, optional, tag = "7")]
    pub items: Option<PrimitivesItems>,
    /// `collectionFormat`.
    #[prost(string, tag = "8")]
    pub collection_format: String,
    /// `default`.
    #[prost(message, optional, tag = "9")]
    pub default: Option<Any>,
    /// `maximum`.
    #[prost(double, tag = "10")]
    pub maximum: f64,
    /// `exclusiveMaximum`.
    #[prost(bool, tag = "11")]
    pub exclusive_maximum: bool,
    /// `minimum`.
    #[prost(double, tag = "12")]
    pub minimum: f64,
    /// `exclusiveMinimum`.
    #[prost(bool, tag = "13")]
    pub exclusive_minimum: bool,
    /// `maxLength`.
    #[prost(int64, tag = "14")]
    pub max_length: i64,
    /// `minLength`.
    #[prost(int64, tag = "15")]
    pub min_length: i64,
    /// `pattern`.
    #[prost(string, tag = "16")]
    pub pattern: String,
    /// `maxItems`.
    #[prost(int64, tag = "17")]
    pub max_items: i64,
    /// `minItems`.
    #[prost(int64, tag = "18")]
    pub min_items: i64,
    /// `uniqueItems`.
    #[prost(bool, tag = "19")]
    pub unique_items: bool,
    /// `enum`.
    #[prost(message, repeated, tag = "20")]
    pub r#enum: Vec<Any>,
    /// `multipleOf`.
    #[prost(double, tag = "21")]
    pub multiple_of: f64,
    /// `x-*`.
    #[prost(message, repeated, tag = "22")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `FormDataParameterSubSchema` and `QueryParameterSubSchema` (the same fields and
/// numbers, with `allowEmptyValue`).
#[derive(Clone, PartialEq, Message)]
pub struct FormDataParameter {
    /// `required`.
    #[prost(bool, tag = "1")]
    pub required: bool,
    /// `in`.
    #[prost(string, tag = "2")]
    pub r#in: String,
    /// `description`.
    #[prost(string, tag = "3")]
    pub description: String,
    /// `name`.
    #[prost(string, tag = "4")]
    pub name: String,
    /// `allowEmptyValue`.
    #[prost(bool, tag = "5")]
    pub allow_empty_value: bool,
    /// `type`.
    #[prost(string, tag = "6")]
    pub r#type: String,
    /// `format`.
    #[prost(string, tag = "7")]
    pub format: String,
    /// `items`.
    #[prost(message, optional, tag = "8")]
    pub items: Option<PrimitivesItems>,
    /// `collectionFormat`.
    #[prost(string, tag = "9")]
    pub collection_format: String,
    /// `default`.
    #[prost(message, optional, tag = "10")]
    pub default: Option<Any>,
    /// `maximum`.
    #[prost(double, tag = "11")]
    pub maximum: f64,
    /// `exclusiveMaximum`.
    #[prost(bool, tag = "12")]
    pub exclusive_maximum: bool,
    /// `minimum`.
    #[prost(double, tag = "13")]
    pub minimum: f64,
    /// `exclusiveMinimum`.
    #[prost(bool, tag = "14")]
    pub exclusive_minimum: bool,
    /// `maxLength`.
    #[prost(int64, tag = "15")]
    pub max_length: i64,
    /// `minLength`.
    #[prost(int64, tag = "16")]
    pub min_length: i64,
    /// `pattern`.
    #[prost(string, tag = "17")]
    pub pattern: String,
    /// `maxItems`.
    #[prost(int64, tag = "18")]
    pub max_items: i64,
    /// `minItems`.
    #[prost(int64, tag = "19")]
    pub min_items: i64,
    /// `uniqueItems`.
    #[prost(bool, tag = "20")]
    pub unique_items: bool,
    /// `enum`.
    #[prost(message, repeated, tag = "21")]
    pub r#enum: Vec<Any>,
    /// `multipleOf`.
    #[prost(double, tag = "22")]
    pub multiple_of: f64,
    /// `x-*`.
    #[prost(message, repeated, tag = "23")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `PrimitivesItems` (also the shape of `Header`'s first 17 fields).
#[derive(Clone, PartialEq, Message)]
pub struct PrimitivesItems {
    /// `type`.
    #[prost(string, tag = "1")]
    pub r#type: String,
    /// `format`.
    #[prost(string, tag = "2")]
    pub format: String,
    /// `items`.
    #[prost(message, optional, boxed, tag = "3")]
    pub items: Option<Box<PrimitivesItems>>,
    /// `collectionFormat`.
    #[prost(string, tag = "4")]
    pub collection_format: String,
    /// `default`.
    #[prost(message, optional, tag = "5")]
    pub default: Option<Any>,
    /// `maximum`.
    #[prost(double, tag = "6")]
    pub maximum: f64,
    /// `exclusiveMaximum`.
    #[prost(bool, tag = "7")]
    pub exclusive_maximum: bool,
    /// `minimum`.
    #[prost(double, tag = "8")]
    pub minimum: f64,
    /// `exclusiveMinimum`.
    #[prost(bool, tag = "9")]
    pub exclusive_minimum: bool,
    /// `maxLength`.
    #[prost(int64, tag = "10")]
    pub max_length: i64,
    /// `minLength`.
    #[prost(int64, tag = "11")]
    pub min_length: i64,
    /// `pattern`.
    #[prost(string, tag = "12")]
    pub pattern: String,
    /// `maxItems`.
    #[prost(int64, tag = "13")]
    pub max_items: i64,
    /// `minItems`.
    #[prost(int64, tag = "14")]
    pub min_items: i64,
    /// `uniqueItems`.
    #[prost(bool, tag = "15")]
    pub unique_items: bool,
    /// `enum`.
    #[prost(message, repeated, tag = "16")]
    pub r#enum: Vec<Any>,
    /// `multipleOf`.
    #[prost(double, tag = "17")]
    pub multiple_of: f64,
    /// `x-*`.
    #[prost(message, repeated, tag = "18")]
    pub vendor_extension: Vec<NamedAny>,
}

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

/// `ResponseValue.oneof`.
pub mod response_value {
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

/// `SchemaItem.oneof`.
pub mod schema_item {
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

/// `Examples`.
#[derive(Clone, PartialEq, Message)]
pub struct Examples {
    /// By media type.
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedAny>,
}

/// `Definitions`.
#[derive(Clone, PartialEq, Message)]
pub struct Definitions {
    /// By name.
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedSchema>,
}

/// `NamedSchema`.
#[derive(Clone, PartialEq, Message)]
pub struct NamedSchema {
    /// Name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Schema.
    #[prost(message, optional, tag = "2")]
    pub value: Option<Schema>,
}

/// `Schema`.
#[derive(Clone, PartialEq, Message)]
pub struct Schema {
    /// `$ref`.
    #[prost(string, tag = "1")]
    pub xref: String,
    /// `format`.
    #[prost(string, tag = "2")]
    pub format: String,
    /// `title`.
    #[prost(string, tag = "3")]
    pub title: String,
    /// `description`.
    #[prost(string, tag = "4")]
    pub description: String,
    /// `default`.
    #[prost(message, optional, tag = "5")]
    pub default: Option<Any>,
    /// `multipleOf`.
    #[prost(double, tag = "6")]
    pub multiple_of: f64,
    /// `maximum`.
    #[prost(double, tag = "7")]
    pub maximum: f64,
    /// `exclusiveMaximum`.
    #[prost(bool, tag = "8")]
    pub exclusive_maximum: bool,
    /// `minimum`.
    #[prost(double, tag = "9")]
    pub minimum: f64,
    /// `exclusiveMinimum`.
    #[prost(bool, tag = "10")]
    pub exclusive_minimum: bool,
    /// `maxLength`.
    #[prost(int64, tag = "11")]
    pub max_length: i64,
    /// `minLength`.
    #[prost(int64, tag = "12")]
    pub min_length: i64,
    /// `pattern`.
    #[prost(string, tag = "13")]
    pub pattern: String,
    /// `maxItems`.
    #[prost(int64, tag = "14")]
    pub max_items: i64,
    /// `minItems`.
    #[prost(int64, tag = "15")]
    pub min_items: i64,
    /// `uniqueItems`.
    #[prost(bool, tag = "16")]
    pub unique_items: bool,
    /// `maxProperties`.
    #[prost(int64, tag = "17")]
    pub max_properties: i64,
    /// `minProperties`.
    #[prost(int64, tag = "18")]
    pub min_properties: i64,
    /// `required`.
    #[prost(string, repeated, tag = "19")]
    pub required: Vec<String>,
    /// `enum`.
    #[prost(message, repeated, tag = "20")]
    pub r#enum: Vec<Any>,
    /// `additionalProperties`.
    #[prost(message, optional, boxed, tag = "21")]
    pub additional_properties: Option<Box<AdditionalPropertiesItem>>,
    /// `type`.
    #[prost(message, optional, tag = "22")]
    pub r#type: Option<TypeItem>,
    /// `items`.
    #[prost(message, optional, tag = "23")]
    pub items: Option<ItemsItem>,
    /// `allOf`.
    #[prost(message, repeated, tag = "24")]
    pub all_of: Vec<Schema>,
    /// `properties`.
    #[prost(message, optional, tag = "25")]
    pub properties: Option<Properties>,
    /// `discriminator`.
    #[prost(string, tag = "26")]
    pub discriminator: String,
    /// `readOnly`.
    #[prost(bool, tag = "27")]
    pub read_only: bool,
    /// `xml`.
    #[prost(message, optional, tag = "28")]
    pub xml: Option<Xml>,
    /// `externalDocs`.
    #[prost(message, optional, tag = "29")]
    pub external_docs: Option<ExternalDocs>,
    /// `example`.
    #[prost(message, optional, tag = "30")]
    pub example: Option<Any>,
    /// `x-*`.
    #[prost(message, repeated, tag = "31")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `AdditionalPropertiesItem`.
#[derive(Clone, PartialEq, Message)]
pub struct AdditionalPropertiesItem {
    /// A schema or a boolean.
    #[prost(oneof = "additional_properties_item::Oneof", tags = "1, 2")]
    pub oneof: Option<additional_properties_item::Oneof>,
}

/// `AdditionalPropertiesItem.oneof`.
pub mod additional_properties_item {
    /// The variants.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Oneof {
        /// A schema.
        #[prost(message, tag = "1")]
        Schema(super::Schema),
        /// `true` or `false`.
        #[prost(bool, tag = "2")]
        Boolean(bool),
    }
}

/// `TypeItem`.
#[derive(Clone, PartialEq, Message)]
pub struct TypeItem {
    /// One or more types.
    #[prost(string, repeated, tag = "1")]
    pub value: Vec<String>,
}

/// `ItemsItem`.
#[derive(Clone, PartialEq, Message)]
pub struct ItemsItem {
    /// One schema, or a tuple of them.
    #[prost(message, repeated, tag = "1")]
    pub schema: Vec<Schema>,
}

/// `Properties`.
#[derive(Clone, PartialEq, Message)]
pub struct Properties {
    /// By name.
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedSchema>,
}

/// `Xml`.
#[derive(Clone, PartialEq, Message)]
pub struct Xml {
    /// `name`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `namespace`.
    #[prost(string, tag = "2")]
    pub namespace: String,
    /// `prefix`.
    #[prost(string, tag = "3")]
    pub prefix: String,
    /// `attribute`.
    #[prost(bool, tag = "4")]
    pub attribute: bool,
    /// `wrapped`.
    #[prost(bool, tag = "5")]
    pub wrapped: bool,
    /// `x-*`.
    #[prost(message, repeated, tag = "6")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `ParameterDefinitions`.
#[derive(Clone, PartialEq, Message)]
pub struct ParameterDefinitions {
    /// By name.
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedParameter>,
}

/// `NamedParameter`.
#[derive(Clone, PartialEq, Message)]
pub struct NamedParameter {
    /// Name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Parameter.
    #[prost(message, optional, tag = "2")]
    pub value: Option<Parameter>,
}

/// `ResponseDefinitions`.
#[derive(Clone, PartialEq, Message)]
pub struct ResponseDefinitions {
    /// By name.
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedResponse>,
}

/// `NamedResponse`.
#[derive(Clone, PartialEq, Message)]
pub struct NamedResponse {
    /// Name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Response.
    #[prost(message, optional, tag = "2")]
    pub value: Option<Response>,
}

/// `SecurityRequirement`.
#[derive(Clone, PartialEq, Message)]
pub struct SecurityRequirement {
    /// Scheme name to scopes.
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedStringArray>,
}

/// `NamedStringArray`.
#[derive(Clone, PartialEq, Message)]
pub struct NamedStringArray {
    /// Name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Strings.
    #[prost(message, optional, tag = "2")]
    pub value: Option<StringArray>,
}

/// `StringArray`.
#[derive(Clone, PartialEq, Message)]
pub struct StringArray {
    /// The strings.
    #[prost(string, repeated, tag = "1")]
    pub value: Vec<String>,
}

/// `SecurityDefinitions`.
#[derive(Clone, PartialEq, Message)]
pub struct SecurityDefinitions {
    /// By name.
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedSecurityDefinitionsItem>,
}

/// `NamedSecurityDefinitionsItem`.
#[derive(Clone, PartialEq, Message)]
pub struct NamedSecurityDefinitionsItem {
    /// Name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Scheme.
    #[prost(message, optional, tag = "2")]
    pub value: Option<SecurityDefinitionsItem>,
}

/// `SecurityDefinitionsItem`.
#[derive(Clone, PartialEq, Message)]
pub struct SecurityDefinitionsItem {
    /// By `type`.
    #[prost(oneof = "security_definitions_item::Oneof", tags = "1, 2")]
    pub oneof: Option<security_definitions_item::Oneof>,
}

/// `SecurityDefinitionsItem.oneof` (basic and API-key schemes; OAuth2 ones are dropped).
pub mod security_definitions_item {
    /// The variants.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Oneof {
        /// `type: basic`.
        #[prost(message, tag = "1")]
        BasicAuthenticationSecurity(super::BasicAuthenticationSecurity),
        /// `type: apiKey`.
        #[prost(message, tag = "2")]
        ApiKeySecurity(super::ApiKeySecurity),
    }
}

/// `BasicAuthenticationSecurity`.
#[derive(Clone, PartialEq, Message)]
pub struct BasicAuthenticationSecurity {
    /// `type`.
    #[prost(string, tag = "1")]
    pub r#type: String,
    /// `description`.
    #[prost(string, tag = "2")]
    pub description: String,
    /// `x-*`.
    #[prost(message, repeated, tag = "3")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `ApiKeySecurity`.
#[derive(Clone, PartialEq, Message)]
pub struct ApiKeySecurity {
    /// `type`.
    #[prost(string, tag = "1")]
    pub r#type: String,
    /// `name`.
    #[prost(string, tag = "2")]
    pub name: String,
    /// `in`.
    #[prost(string, tag = "3")]
    pub r#in: String,
    /// `description`.
    #[prost(string, tag = "4")]
    pub description: String,
    /// `x-*`.
    #[prost(message, repeated, tag = "5")]
    pub vendor_extension: Vec<NamedAny>,
}

// ---- JSON -> messages ------------------------------------------------------------------

fn s(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn b(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn f(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

fn i(v: &Value, key: &str) -> i64 {
    v.get(key).and_then(Value::as_i64).unwrap_or(0)
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    match v.get(key) {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    }
}

fn any(v: &Value) -> Any {
    Any {
        value: None,
        yaml: serde_yaml_ng::to_string(v).unwrap_or_default(),
    }
}

fn any_at(v: &Value, key: &str) -> Option<Any> {
    v.get(key).map(any)
}

fn anys(v: &Value, key: &str) -> Vec<Any> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().map(any).collect())
        .unwrap_or_default()
}

fn obj(v: &Value) -> Option<&Map<String, Value>> {
    v.as_object()
}

fn extensions(v: &Value) -> Vec<NamedAny> {
    obj(v)
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, v)| NamedAny {
            name: k.clone(),
            value: Some(any(v)),
        })
        .collect()
}

fn external_docs(v: &Value) -> Option<ExternalDocs> {
    v.get("externalDocs").map(|d| ExternalDocs {
        description: s(d, "description"),
        url: s(d, "url"),
        vendor_extension: extensions(d),
    })
}

fn schema(v: &Value) -> Schema {
    let additional = v.get("additionalProperties").map(|a| {
        Box::new(AdditionalPropertiesItem {
            oneof: Some(match a {
                Value::Bool(x) => additional_properties_item::Oneof::Boolean(*x),
                other => additional_properties_item::Oneof::Schema(schema(other)),
            }),
        })
    });
    let items = v.get("items").map(|it| ItemsItem {
        schema: match it {
            Value::Array(a) => a.iter().map(schema).collect(),
            one => vec![schema(one)],
        },
    });
    let properties = v.get("properties").and_then(obj).map(|p| Properties {
        additional_properties: named_schemas(p),
    });
    let types = strings(v, "type");
    Schema {
        xref: s(v, "$ref"),
        format: s(v, "format"),
        title: s(v, "title"),
        description: s(v, "description"),
        default: any_at(v, "default"),
        multiple_of: f(v, "multipleOf"),
        maximum: f(v, "maximum"),
        exclusive_maximum: b(v, "exclusiveMaximum"),
        minimum: f(v, "minimum"),
        exclusive_minimum: b(v, "exclusiveMinimum"),
        max_length: i(v, "maxLength"),
        min_length: i(v, "minLength"),
        pattern: s(v, "pattern"),
        max_items: i(v, "maxItems"),
        min_items: i(v, "minItems"),
        unique_items: b(v, "uniqueItems"),
        max_properties: i(v, "maxProperties"),
        min_properties: i(v, "minProperties"),
        required: strings(v, "required"),
        r#enum: anys(v, "enum"),
        additional_properties: additional,
        r#type: (!types.is_empty()).then_some(TypeItem { value: types }),
        items,
        all_of: v
            .get("allOf")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(schema).collect())
            .unwrap_or_default(),
        properties,
        discriminator: s(v, "discriminator"),
        read_only: b(v, "readOnly"),
        xml: v.get("xml").map(|x| Xml {
            name: s(x, "name"),
            namespace: s(x, "namespace"),
            prefix: s(x, "prefix"),
            attribute: b(x, "attribute"),
            wrapped: b(x, "wrapped"),
            vendor_extension: extensions(x),
        }),
        external_docs: external_docs(v),
        example: any_at(v, "example"),
        vendor_extension: extensions(v),
    }
}

fn named_schemas(m: &Map<String, Value>) -> Vec<NamedSchema> {
    m.iter()
        .map(|(k, v)| NamedSchema {
            name: k.clone(),
            value: Some(schema(v)),
        })
        .collect()
}

fn primitives(v: &Value) -> PrimitivesItems {
    PrimitivesItems {
        r#type: s(v, "type"),
        format: s(v, "format"),
        items: v.get("items").map(|x| Box::new(primitives(x))),
        collection_format: s(v, "collectionFormat"),
        default: any_at(v, "default"),
        maximum: f(v, "maximum"),
        exclusive_maximum: b(v, "exclusiveMaximum"),
        minimum: f(v, "minimum"),
        exclusive_minimum: b(v, "exclusiveMinimum"),
        max_length: i(v, "maxLength"),
        min_length: i(v, "minLength"),
        pattern: s(v, "pattern"),
        max_items: i(v, "maxItems"),
        min_items: i(v, "minItems"),
        unique_items: b(v, "uniqueItems"),
        r#enum: anys(v, "enum"),
        multiple_of: f(v, "multipleOf"),
        vendor_extension: extensions(v),
    }
}

fn simple_parameter(v: &Value) -> SimpleParameter {
    SimpleParameter {
        required: b(v, "required"),
        r#in: s(v, "in"),
        description: s(v, "description"),
        name: s(v, "name"),
        r#type: s(v, "type"),
        format: s(v, "format"),
        items: v.get("items").map(primitives),
        collection_format: s(v, "collectionFormat"),
        default: any_at(v, "default"),
        maximum: f(v, "maximum"),
        exclusive_maximum: b(v, "exclusiveMaximum"),
        minimum: f(v, "minimum"),
        exclusive_minimum: b(v, "exclusiveMinimum"),
        max_length: i(v, "maxLength"),
        min_length: i(v, "minLength"),
        pattern: s(v, "pattern"),
        max_items: i(v, "maxItems"),
        min_items: i(v, "minItems"),
        unique_items: b(v, "uniqueItems"),
        r#enum: anys(v, "enum"),
        multiple_of: f(v, "multipleOf"),
        vendor_extension: extensions(v),
    }
}

fn form_data_parameter(v: &Value) -> FormDataParameter {
    let p = simple_parameter(v);
    FormDataParameter {
        required: p.required,
        r#in: p.r#in,
        description: p.description,
        name: p.name,
        allow_empty_value: b(v, "allowEmptyValue"),
        r#type: p.r#type,
        format: p.format,
        items: p.items,
        collection_format: p.collection_format,
        default: p.default,
        maximum: p.maximum,
        exclusive_maximum: p.exclusive_maximum,
        minimum: p.minimum,
        exclusive_minimum: p.exclusive_minimum,
        max_length: p.max_length,
        min_length: p.min_length,
        pattern: p.pattern,
        max_items: p.max_items,
        min_items: p.min_items,
        unique_items: p.unique_items,
        r#enum: p.r#enum,
        multiple_of: p.multiple_of,
        vendor_extension: p.vendor_extension,
    }
}

fn parameter(v: &Value) -> Parameter {
    use non_body_parameter::Oneof as N;
    let oneof = match v.get("in").and_then(Value::as_str) {
        Some("body") => parameter::Oneof::BodyParameter(BodyParameter {
            description: s(v, "description"),
            name: s(v, "name"),
            r#in: s(v, "in"),
            required: b(v, "required"),
            schema: v.get("schema").map(schema),
            vendor_extension: extensions(v),
        }),
        Some("header") => parameter::Oneof::NonBodyParameter(NonBodyParameter {
            oneof: Some(N::HeaderParameterSubSchema(simple_parameter(v))),
        }),
        Some("formData") => parameter::Oneof::NonBodyParameter(NonBodyParameter {
            oneof: Some(N::FormDataParameterSubSchema(form_data_parameter(v))),
        }),
        Some("path") => parameter::Oneof::NonBodyParameter(NonBodyParameter {
            oneof: Some(N::PathParameterSubSchema(simple_parameter(v))),
        }),
        _ => parameter::Oneof::NonBodyParameter(NonBodyParameter {
            oneof: Some(N::QueryParameterSubSchema(form_data_parameter(v))),
        }),
    };
    Parameter { oneof: Some(oneof) }
}

fn parameters_items(v: &Value) -> Vec<ParametersItem> {
    v.get("parameters")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|p| ParametersItem {
                    oneof: Some(match p.get("$ref").and_then(Value::as_str) {
                        Some(r) => parameters_item::Oneof::JsonReference(JsonReference {
                            xref: r.to_owned(),
                            description: s(p, "description"),
                        }),
                        None => parameters_item::Oneof::Parameter(parameter(p)),
                    }),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn response(v: &Value) -> Response {
    Response {
        description: s(v, "description"),
        schema: v.get("schema").map(|sch| SchemaItem {
            oneof: Some(if sch.get("type").and_then(Value::as_str) == Some("file") {
                schema_item::Oneof::FileSchema(FileSchema {
                    format: s(sch, "format"),
                    title: s(sch, "title"),
                    description: s(sch, "description"),
                    default: any_at(sch, "default"),
                    required: strings(sch, "required"),
                    r#type: s(sch, "type"),
                    read_only: b(sch, "readOnly"),
                    external_docs: external_docs(sch),
                    example: any_at(sch, "example"),
                    vendor_extension: extensions(sch),
                })
            } else {
                schema_item::Oneof::Schema(schema(sch))
            }),
        }),
        headers: v.get("headers").and_then(obj).map(|h| Headers {
            additional_properties: h
                .iter()
                .map(|(k, x)| NamedHeader {
                    name: k.clone(),
                    value: Some(Header {
                        r#type: s(x, "type"),
                        format: s(x, "format"),
                        items: x.get("items").map(primitives),
                        collection_format: s(x, "collectionFormat"),
                        default: any_at(x, "default"),
                        description: s(x, "description"),
                        vendor_extension: extensions(x),
                    }),
                })
                .collect(),
        }),
        examples: v.get("examples").and_then(obj).map(|e| Examples {
            additional_properties: e
                .iter()
                .map(|(k, x)| NamedAny {
                    name: k.clone(),
                    value: Some(any(x)),
                })
                .collect(),
        }),
        vendor_extension: extensions(v),
    }
}

fn operation(v: &Value) -> Operation {
    Operation {
        tags: strings(v, "tags"),
        summary: s(v, "summary"),
        description: s(v, "description"),
        external_docs: external_docs(v),
        operation_id: s(v, "operationId"),
        produces: strings(v, "produces"),
        consumes: strings(v, "consumes"),
        parameters: parameters_items(v),
        responses: v.get("responses").and_then(obj).map(|r| Responses {
            response_code: r
                .iter()
                .filter(|(k, _)| !k.starts_with("x-"))
                .map(|(k, x)| NamedResponseValue {
                    name: k.clone(),
                    value: Some(ResponseValue {
                        oneof: Some(match x.get("$ref").and_then(Value::as_str) {
                            Some(r) => response_value::Oneof::JsonReference(JsonReference {
                                xref: r.to_owned(),
                                description: s(x, "description"),
                            }),
                            None => response_value::Oneof::Response(response(x)),
                        }),
                    }),
                })
                .collect(),
            vendor_extension: extensions(&Value::Object(r.clone())),
        }),
        schemes: strings(v, "schemes"),
        deprecated: b(v, "deprecated"),
        security: security(v),
        vendor_extension: extensions(v),
    }
}

fn security(v: &Value) -> Vec<SecurityRequirement> {
    v.get("security")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(obj)
                .map(|req| SecurityRequirement {
                    additional_properties: req
                        .iter()
                        .map(|(k, scopes)| NamedStringArray {
                            name: k.clone(),
                            value: Some(StringArray {
                                value: scopes
                                    .as_array()
                                    .into_iter()
                                    .flatten()
                                    .filter_map(|x| x.as_str().map(str::to_owned))
                                    .collect(),
                            }),
                        })
                        .collect(),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn path_item(v: &Value) -> PathItem {
    let op = |k: &str| v.get(k).map(operation);
    PathItem {
        xref: s(v, "$ref"),
        get: op("get"),
        put: op("put"),
        post: op("post"),
        delete: op("delete"),
        options: op("options"),
        head: op("head"),
        patch: op("patch"),
        parameters: parameters_items(v),
        vendor_extension: extensions(v),
    }
}

/// The gnostic `Document` of a Swagger 2.0 JSON document. Fields of the wrong JSON type
/// read as empty; nothing fails.
pub fn document(v: &Value) -> Document {
    Document {
        swagger: s(v, "swagger"),
        info: v.get("info").map(|x| Info {
            title: s(x, "title"),
            version: s(x, "version"),
            description: s(x, "description"),
            terms_of_service: s(x, "termsOfService"),
            contact: x.get("contact").map(|c| Contact {
                name: s(c, "name"),
                url: s(c, "url"),
                email: s(c, "email"),
                vendor_extension: extensions(c),
            }),
            license: x.get("license").map(|l| License {
                name: s(l, "name"),
                url: s(l, "url"),
                vendor_extension: extensions(l),
            }),
            vendor_extension: extensions(x),
        }),
        host: s(v, "host"),
        base_path: s(v, "basePath"),
        schemes: strings(v, "schemes"),
        consumes: strings(v, "consumes"),
        produces: strings(v, "produces"),
        paths: v.get("paths").and_then(obj).map(|p| Paths {
            vendor_extension: extensions(&Value::Object(p.clone())),
            path: p
                .iter()
                .filter(|(k, _)| !k.starts_with("x-"))
                .map(|(k, x)| NamedPathItem {
                    name: k.clone(),
                    value: Some(path_item(x)),
                })
                .collect(),
        }),
        definitions: v.get("definitions").and_then(obj).map(|d| Definitions {
            additional_properties: named_schemas(d),
        }),
        parameters: v
            .get("parameters")
            .and_then(obj)
            .map(|p| ParameterDefinitions {
                additional_properties: p
                    .iter()
                    .map(|(k, x)| NamedParameter {
                        name: k.clone(),
                        value: Some(parameter(x)),
                    })
                    .collect(),
            }),
        responses: v
            .get("responses")
            .and_then(obj)
            .map(|r| ResponseDefinitions {
                additional_properties: r
                    .iter()
                    .map(|(k, x)| NamedResponse {
                        name: k.clone(),
                        value: Some(response(x)),
                    })
                    .collect(),
            }),
        security: security(v),
        security_definitions: v.get("securityDefinitions").and_then(obj).map(|d| {
            SecurityDefinitions {
                additional_properties: d
                    .iter()
                    .filter_map(|(k, x)| {
                        let item = match x.get("type").and_then(Value::as_str) {
                            Some("basic") => {
                                security_definitions_item::Oneof::BasicAuthenticationSecurity(
                                    BasicAuthenticationSecurity {
                                        r#type: s(x, "type"),
                                        description: s(x, "description"),
                                        vendor_extension: extensions(x),
                                    },
                                )
                            }
                            Some("apiKey") => {
                                security_definitions_item::Oneof::ApiKeySecurity(ApiKeySecurity {
                                    r#type: s(x, "type"),
                                    name: s(x, "name"),
                                    r#in: s(x, "in"),
                                    description: s(x, "description"),
                                    vendor_extension: extensions(x),
                                })
                            }
                            _ => return None,
                        };
                        Some(NamedSecurityDefinitionsItem {
                            name: k.clone(),
                            value: Some(SecurityDefinitionsItem { oneof: Some(item) }),
                        })
                    })
                    .collect(),
            }
        }),
        tags: v
            .get("tags")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|t| Tag {
                        name: s(t, "name"),
                        description: s(t, "description"),
                        external_docs: external_docs(t),
                        vendor_extension: extensions(t),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        external_docs: external_docs(v),
        vendor_extension: extensions(v),
    }
}

/// The protobuf encoding of a Swagger 2.0 JSON document (kube-openapi `ToProtoBinary`).
pub fn encode(v: &Value) -> Vec<u8> {
    document(v).encode_to_vec()
}

#[cfg(test)]
mod tests {
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
