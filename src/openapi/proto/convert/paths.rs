//! The paths of a Swagger 2.0 document into the gnostic messages: operations, their
//! parameters, responses and security requirements.

use serde_json::Value;

use super::{
    any, any_at, anys, b, entries, extensions, external_docs, f, i, not_extensions, obj, s, schema,
    strings,
};
use crate::openapi::proto::*;

pub(super) fn primitives(v: &Value) -> PrimitivesItems {
    with_validations!(PrimitivesItems, v, {
        r#type: s(v, "type"),
        items: v.get("items").map(|x| Box::new(primitives(x))),
        collection_format: s(v, "collectionFormat"),
        vendor_extension: extensions(v),
    })
}

/// A non-body parameter message (`SimpleParameter`, `FormDataParameter`): its `in`,
/// name and type besides the validation keywords, read from `v`, and the other fields
/// as given.
macro_rules! simple_parameter {
    ($message:ident, $v:expr $(, $field:ident: $value:expr)*) => {{
        let v: &Value = $v;
        with_validations!($message, v, {
            required: b(v, "required"),
            r#in: s(v, "in"),
            description: s(v, "description"),
            name: s(v, "name"),
            r#type: s(v, "type"),
            items: v.get("items").map(primitives),
            collection_format: s(v, "collectionFormat"),
            vendor_extension: extensions(v),
            $($field: $value,)*
        })
    }};
}

pub(super) fn simple_parameter(v: &Value) -> SimpleParameter {
    simple_parameter!(SimpleParameter, v)
}

pub(super) fn form_data_parameter(v: &Value) -> FormDataParameter {
    simple_parameter!(FormDataParameter, v, allow_empty_value: b(v, "allowEmptyValue"))
}

/// An inline parameter, by its `in`: `body`, `header`, `formData`, `path`, and anything
/// else (`query` or missing) as a query parameter.
pub(super) fn parameter(v: &Value) -> Parameter {
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

pub(super) fn parameters_items(v: &Value) -> Vec<ParametersItem> {
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

/// A response object; a schema of `type: file` becomes a `FileSchema`.
pub(super) fn response(v: &Value) -> Response {
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
            additional_properties: entries(h, |x| Header {
                r#type: s(x, "type"),
                format: s(x, "format"),
                items: x.get("items").map(primitives),
                collection_format: s(x, "collectionFormat"),
                default: any_at(x, "default"),
                description: s(x, "description"),
                vendor_extension: extensions(x),
            }),
        }),
        examples: v.get("examples").and_then(obj).map(|e| Examples {
            additional_properties: entries(e, any),
        }),
        vendor_extension: extensions(v),
    }
}

pub(super) fn operation(v: &Value) -> Operation {
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
            response_code: entries(not_extensions(r), |x| ResponseValue {
                oneof: Some(match x.get("$ref").and_then(Value::as_str) {
                    Some(r) => response_value::Oneof::JsonReference(JsonReference {
                        xref: r.to_owned(),
                        description: s(x, "description"),
                    }),
                    None => response_value::Oneof::Response(response(x)),
                }),
            }),
            vendor_extension: extensions(&Value::Object(r.clone())),
        }),
        schemes: strings(v, "schemes"),
        deprecated: b(v, "deprecated"),
        security: security(v),
        vendor_extension: extensions(v),
    }
}

pub(super) fn security(v: &Value) -> Vec<SecurityRequirement> {
    v.get("security")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(obj)
                .map(|req| SecurityRequirement {
                    additional_properties: entries(req, |scopes| StringArray {
                        value: scopes
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|x| x.as_str().map(str::to_owned))
                            .collect(),
                    }),
                })
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn path_item(v: &Value) -> PathItem {
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
