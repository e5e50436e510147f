//! Schemas, definitions and security (gnostic `OpenAPIv2.proto`).

// The oneofs mirror the .proto.
#![allow(clippy::large_enum_variant)]

use prost::Message;

use super::*;

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

pub mod additional_properties_item {
    //! `AdditionalPropertiesItem.oneof`: `additionalProperties` is a schema (a map of that
    //! type, e.g. a resource list's `usage`) or a boolean.
    //!
    //! ```
    //! use kube_aggregator::openapi::proto::document;
    //! use serde_json::json;
    //! use kube_aggregator::openapi::proto::additional_properties_item::Oneof;
    //!
    //! let doc = document(&json!({"swagger": "2.0", "paths": {}, "definitions": {
    //!     "Usage": {"type": "object", "additionalProperties": {"type": "string"}},
    //!     "Closed": {"type": "object", "additionalProperties": false}}}));
    //! let defs = doc.definitions.unwrap().additional_properties;
    //! let kind = |name: &str| defs.iter().find(|d| d.name == name).unwrap()
    //!     .value.as_ref().unwrap().additional_properties.as_ref().unwrap().oneof.clone();
    //! assert!(matches!(kind("Usage"), Some(Oneof::Schema(_))));
    //! assert!(matches!(kind("Closed"), Some(Oneof::Boolean(false))));
    //! ```

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

pub mod security_definitions_item {
    //! `SecurityDefinitionsItem.oneof` (basic and API-key schemes; OAuth2 ones are dropped):
    //! what Kubernetes specs declare as `BearerToken` is an API key in the `authorization`
    //! header.
    //!
    //! ```
    //! use kube_aggregator::openapi::proto::document;
    //! use serde_json::json;
    //! use kube_aggregator::openapi::proto::security_definitions_item::Oneof;
    //!
    //! let doc = document(&json!({"swagger": "2.0", "paths": {}, "securityDefinitions": {
    //!     "BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}}}));
    //! let defs = doc.security_definitions.unwrap().additional_properties;
    //! assert!(matches!(&defs[0].value.as_ref().unwrap().oneof, Some(Oneof::ApiKeySecurity(k)) if k.name == "authorization"));
    //! ```

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
