//! The review kinds' messages on the wire, field for field as their `generated.proto`
//! (k8s.io/api `authorization/v1` and `authentication/v1`, k8s.io/apimachinery `runtime`
//! and `meta/v1`), with only the fields the reviews read or write.

use std::collections::BTreeMap;

/// apimachinery `runtime.Unknown`: the object's type and its bytes.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Unknown {
    #[prost(message, optional, tag = "1")]
    pub type_meta: Option<TypeMeta>,
    #[prost(bytes = "vec", tag = "2")]
    pub raw: Vec<u8>,
    #[prost(string, tag = "3")]
    pub content_encoding: String,
    #[prost(string, tag = "4")]
    pub content_type: String,
}

/// apimachinery `runtime.TypeMeta`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct TypeMeta {
    #[prost(string, tag = "1")]
    pub api_version: String,
    #[prost(string, tag = "2")]
    pub kind: String,
}

/// meta/v1 `ObjectMeta`: only `creationTimestamp` (8) is written here.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ObjectMeta {
    #[prost(message, optional, tag = "8")]
    pub creation_timestamp: Option<Time>,
}

/// meta/v1 `Time`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Time {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// authorization/v1 `SelfSubjectAccessReview`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SelfSubjectAccessReview {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<SelfSubjectAccessReviewSpec>,
    #[prost(message, optional, tag = "3")]
    pub status: Option<SubjectAccessReviewStatus>,
}

/// authorization/v1 `SelfSubjectAccessReviewSpec`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SelfSubjectAccessReviewSpec {
    #[prost(message, optional, tag = "1")]
    pub resource_attributes: Option<ResourceAttributes>,
    #[prost(message, optional, tag = "2")]
    pub non_resource_attributes: Option<NonResourceAttributes>,
}

/// authorization/v1 `ResourceAttributes`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ResourceAttributes {
    #[prost(string, tag = "1")]
    pub namespace: String,
    #[prost(string, tag = "2")]
    pub verb: String,
    #[prost(string, tag = "3")]
    pub group: String,
    #[prost(string, tag = "4")]
    pub version: String,
    #[prost(string, tag = "5")]
    pub resource: String,
    #[prost(string, tag = "6")]
    pub subresource: String,
    #[prost(string, tag = "7")]
    pub name: String,
    #[prost(message, optional, tag = "8")]
    pub field_selector: Option<SelectorAttributes>,
    #[prost(message, optional, tag = "9")]
    pub label_selector: Option<SelectorAttributes>,
}

/// authorization/v1 `FieldSelectorAttributes` and `LabelSelectorAttributes`, which
/// have the same fields.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SelectorAttributes {
    #[prost(string, tag = "1")]
    pub raw_selector: String,
    #[prost(message, repeated, tag = "2")]
    pub requirements: Vec<SelectorRequirement>,
}

/// meta/v1 `FieldSelectorRequirement` and `LabelSelectorRequirement`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SelectorRequirement {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub operator: String,
    #[prost(string, repeated, tag = "3")]
    pub values: Vec<String>,
}

/// authorization/v1 `NonResourceAttributes`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct NonResourceAttributes {
    #[prost(string, tag = "1")]
    pub path: String,
    #[prost(string, tag = "2")]
    pub verb: String,
}

/// authorization/v1 `SubjectAccessReviewStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SubjectAccessReviewStatus {
    #[prost(bool, tag = "1")]
    pub allowed: bool,
    #[prost(string, tag = "2")]
    pub reason: String,
    #[prost(string, tag = "3")]
    pub evaluation_error: String,
    #[prost(bool, tag = "4")]
    pub denied: bool,
}

/// authorization/v1 `SelfSubjectRulesReview`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SelfSubjectRulesReview {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<SelfSubjectRulesReviewSpec>,
    #[prost(message, optional, tag = "3")]
    pub status: Option<SubjectRulesReviewStatus>,
}

/// authorization/v1 `SelfSubjectRulesReviewSpec`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SelfSubjectRulesReviewSpec {
    #[prost(string, tag = "1")]
    pub namespace: String,
}

/// authorization/v1 `SubjectRulesReviewStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SubjectRulesReviewStatus {
    #[prost(message, repeated, tag = "1")]
    pub resource_rules: Vec<ResourceRule>,
    #[prost(message, repeated, tag = "2")]
    pub non_resource_rules: Vec<NonResourceRule>,
    #[prost(bool, tag = "3")]
    pub incomplete: bool,
    #[prost(string, tag = "4")]
    pub evaluation_error: String,
}

/// authorization/v1 `ResourceRule`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ResourceRule {
    #[prost(string, repeated, tag = "1")]
    pub verbs: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub api_groups: Vec<String>,
    #[prost(string, repeated, tag = "3")]
    pub resources: Vec<String>,
    #[prost(string, repeated, tag = "4")]
    pub resource_names: Vec<String>,
}

/// authorization/v1 `NonResourceRule`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct NonResourceRule {
    #[prost(string, repeated, tag = "1")]
    pub verbs: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub non_resource_urls: Vec<String>,
}

/// authentication/v1 `SelfSubjectReview`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SelfSubjectReview {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub status: Option<SelfSubjectReviewStatus>,
}

/// authentication/v1 `SelfSubjectReviewStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SelfSubjectReviewStatus {
    #[prost(message, optional, tag = "1")]
    pub user_info: Option<UserInfo>,
}

/// authentication/v1 `UserInfo`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct UserInfo {
    #[prost(string, tag = "1")]
    pub username: String,
    #[prost(string, tag = "2")]
    pub uid: String,
    #[prost(string, repeated, tag = "3")]
    pub groups: Vec<String>,
    #[prost(btree_map = "string, message", tag = "4")]
    pub extra: BTreeMap<String, ExtraValue>,
}

/// authentication/v1 `ExtraValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ExtraValue {
    #[prost(string, repeated, tag = "1")]
    pub items: Vec<String>,
}
