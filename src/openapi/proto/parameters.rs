//! Parameters (gnostic `OpenAPIv2.proto`).

// The oneofs mirror the .proto; boxing their large variants would only change the
// in-memory shape of messages that are built once per document.
#![allow(clippy::large_enum_variant)]

use prost::Message;

use super::*;

/// `ParametersItem`.
#[derive(Clone, PartialEq, Message)]
pub struct ParametersItem {
    /// A parameter or a reference to one.
    #[prost(oneof = "parameters_item::Oneof", tags = "1, 2")]
    pub oneof: Option<parameters_item::Oneof>,
}

pub mod parameters_item {
    //! `ParametersItem.oneof`: an operation's parameter is written inline or as a `$ref` to
    //! the spec's `parameters`, and gnostic keeps which.
    //!
    //! ```
    //! use kube_aggregator::openapi::proto::document;
    //! use serde_json::json;
    //! use kube_aggregator::openapi::proto::parameters_item::Oneof;
    //!
    //! let doc = document(&json!({"swagger": "2.0", "paths": {"/apis/g/v/things": {"get": {
    //!     "parameters": [{"$ref": "#/parameters/limit"}, {"name": "watch", "in": "query", "type": "boolean"}],
    //!     "responses": {"200": {"description": "OK"}}}}}}));
    //! let get = doc.paths.unwrap().path[0].value.clone().unwrap().get.unwrap();
    //! assert!(matches!(&get.parameters[0].oneof, Some(Oneof::JsonReference(r)) if r.xref == "#/parameters/limit"));
    //! assert!(matches!(&get.parameters[1].oneof, Some(Oneof::Parameter(_))));
    //! ```

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

pub mod parameter {
    //! `Parameter.oneof`: a parameter `in: body` carries a schema; every other kind is a
    //! [`NonBodyParameter`](super::NonBodyParameter).
    //!
    //! ```
    //! use kube_aggregator::openapi::proto::document;
    //! use serde_json::json;
    //! use kube_aggregator::openapi::proto::{parameter, parameters_item};
    //!
    //! let doc = document(&json!({"swagger": "2.0", "paths": {"/apis/g/v/things": {"post": {
    //!     "parameters": [{"name": "body", "in": "body", "required": true, "schema": {"type": "object"}}],
    //!     "responses": {"201": {"description": "Created"}}}}}}));
    //! let post = doc.paths.unwrap().path[0].value.clone().unwrap().post.unwrap();
    //! let Some(parameters_item::Oneof::Parameter(p)) = &post.parameters[0].oneof else { panic!() };
    //! assert!(matches!(&p.oneof, Some(parameter::Oneof::BodyParameter(b)) if b.name == "body" && b.required));
    //! ```

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

pub mod non_body_parameter {
    //! `NonBodyParameter.oneof`: by `in`. Query and form-data parameters share one message
    //! (they may say `allowEmptyValue`), as header and path parameters share another.
    //!
    //! ```
    //! use kube_aggregator::openapi::proto::document;
    //! use serde_json::json;
    //! use kube_aggregator::openapi::proto::{non_body_parameter::Oneof, parameter, parameters_item};
    //!
    //! let doc = document(&json!({"swagger": "2.0", "paths": {"/apis/g/v/namespaces/{namespace}/things": {"get": {
    //!     "parameters": [{"name": "namespace", "in": "path", "required": true, "type": "string"}],
    //!     "responses": {"200": {"description": "OK"}}}}}}));
    //! let get = doc.paths.unwrap().path[0].value.clone().unwrap().get.unwrap();
    //! let Some(parameters_item::Oneof::Parameter(p)) = &get.parameters[0].oneof else { panic!() };
    //! let Some(parameter::Oneof::NonBodyParameter(n)) = &p.oneof else { panic!() };
    //! assert!(matches!(&n.oneof, Some(Oneof::PathParameterSubSchema(s)) if s.name == "namespace"));
    //! ```

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
