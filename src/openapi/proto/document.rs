//! The document, its metadata, paths and operations (gnostic `OpenAPIv2.proto`).

// The oneofs mirror the .proto.
#![allow(clippy::large_enum_variant)]

use prost::Message;

use super::*;

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
