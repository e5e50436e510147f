//! The REST verbs, as the generic registry (apiserver `pkg/registry/generic/registry/store.go`)
//! and the endpoint handlers (`pkg/endpoints/handlers/{create,get,update,patch,delete}.go`)
//! carry them out: status codes, reasons and messages are upstream's.

// A refusal is the answer itself (a `Status` response), returned as `Err` and sent as it
// is, so the error type is the response.
#![allow(clippy::result_large_err)]

use std::time::SystemTime;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::{HeaderValue, Response, StatusCode};
use kube_aggregator::Body;
use serde_json::{Value, json};

use super::kinds::{GROUP, GROUP_VERSION, Kind, VERSION};
use super::output::{self, Form};
use super::patch;
use super::schema;
use super::store::{Key, ReadError, Store, WriteError};
use crate::support::api_status::{
    FieldError, OPTIMISTIC_LOCK, already_exists, bad_request, conflict, expired, invalid,
    not_found, too_large_resource_version, unsupported_media_type,
};
use crate::support::extension_server::{json, query_param, rfc3339};
use crate::support::selector::{FieldSelector, LabelSelector};

/// The request a verb works on.
#[derive(Debug)]
pub struct Call<'a> {
    /// The store.
    pub store: &'a Store,
    /// The kind addressed.
    pub kind: &'static Kind,
    /// The namespace in the path; empty for cluster-scoped kinds or all namespaces.
    pub namespace: &'a str,
    /// The raw query.
    pub query: Option<&'a str>,
    /// The response form the `Accept` header asked for.
    pub form: Form,
}

impl Call<'_> {
    fn param(&self, key: &str) -> Option<String> {
        query_param(self.query, key)
    }

    fn key(&self, name: &str) -> Key {
        Key {
            resource: self.kind.plural.to_owned(),
            namespace: self.namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    fn include_object(&self) -> String {
        self.param("includeObject").unwrap_or_default()
    }

    fn respond(&self, code: StatusCode, object: &Value) -> Response<Body> {
        json(
            code,
            &output::single(self.kind, self.form, object, &self.include_object()),
        )
    }

    /// `fieldValidation`: `Strict`, `Warn` (the default when absent) or `Ignore`.
    fn validation(&self) -> Result<String, Response<Body>> {
        let v = self
            .param("fieldValidation")
            .unwrap_or_else(|| "Warn".to_owned());
        match v.as_str() {
            "Strict" | "Warn" | "Ignore" => Ok(v),
            other => Err(bad_request(format!(
                "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\" not {other:?}"
            ))),
        }
    }

    fn dry_run(&self) -> bool {
        self.param("dryRun").is_some_and(|v| v == "All")
    }
}

// ---- reading the body ------------------------------------------------------------------

/// Parses a request body as JSON or YAML by its content type.
fn parse_body(content_type: &str, body: &[u8]) -> Result<Value, String> {
    if content_type.starts_with("application/yaml") {
        serde_yaml_ng::from_slice::<Value>(body).map_err(|e| e.to_string())
    } else {
        serde_json::from_slice::<Value>(body).map_err(|e| e.to_string())
    }
}

/// Decodes a create or update body as a typed server does: wrong apiVersion or kind and
/// type mismatches are 400s; unknown fields are dropped, and per `fieldValidation` refused
/// (400), warned about (`Warning` headers) or ignored. Returns the object and warnings.
fn decode(
    call: &Call<'_>,
    content_type: &str,
    body: &[u8],
) -> Result<(Value, Vec<String>), Response<Body>> {
    let kind = call.kind.kind;
    let cannot = |why: &str| {
        bad_request(format!(
            "{kind} in version \"{VERSION}\" cannot be handled as a {kind}: {why}"
        ))
    };
    if !(content_type.starts_with("application/json")
        || content_type.starts_with("application/yaml"))
    {
        return Err(unsupported_media_type(&[
            "application/json",
            "application/yaml",
        ]));
    }
    let mut object = parse_body(content_type, body).map_err(|e| {
        let summary: String = String::from_utf8_lossy(body).chars().take(30).collect();
        bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: {e} ({summary})"
        ))
    })?;
    if let Some(v) = object.get("apiVersion").and_then(Value::as_str) {
        if v != GROUP_VERSION {
            return Err(bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({GROUP_VERSION})"
            )));
        }
    }
    if let Some(k) = object.get("kind").and_then(Value::as_str) {
        if k != kind {
            return Err(bad_request(format!(
                "{k} in version \"{VERSION}\" cannot be handled as a {kind}: no kind \"{k}\" is registered for version \"{GROUP_VERSION}\" in scheme \"servicecatalog\""
            )));
        }
    }
    let decoded = schema::decode(call.kind, &object);
    if let Some(e) = decoded.type_error {
        return Err(cannot(&e));
    }
    let validation = call.validation()?;
    let warnings = match validation.as_str() {
        "Strict" if !decoded.unknown.is_empty() => {
            return Err(cannot(&format!(
                "strict decoding error: {}",
                decoded.unknown.join(", ")
            )));
        }
        "Ignore" => Vec::new(),
        _ => decoded.unknown.clone(),
    };
    prune(call.kind, &mut object);
    Ok((object, warnings))
}

/// Drops the fields the schema does not have, as decoding into the Go struct does.
fn prune(kind: &Kind, object: &mut Value) {
    use super::kinds::{Field, OBJECT_META, Ty};
    fn walk(fields: &[Field], v: &mut Value) {
        if let Some(m) = v.as_object_mut() {
            m.retain(|k, _| fields.iter().any(|f| f.name == k));
            for f in fields {
                if let (Ty::Object(inner), Some(child)) = (f.ty, m.get_mut(f.name)) {
                    walk(inner, child);
                }
            }
        }
    }
    if let Some(m) = object.as_object_mut() {
        m.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "spec"));
        if let Some(meta) = m.get_mut("metadata") {
            walk(OBJECT_META, meta);
        }
        if let Some(spec) = m.get_mut("spec") {
            walk(kind.spec, spec);
        }
    }
}

fn with_warnings(mut res: Response<Body>, warnings: &[String]) -> Response<Body> {
    for w in warnings {
        // `299 - "<text>"`, the text quoted as Go's strconv.Quote does.
        let text = serde_json::to_string(w).unwrap_or_default();
        if let Ok(v) = HeaderValue::from_str(&format!("299 - {text}")) {
            res.headers_mut().append("warning", v);
        }
    }
    res
}

// ---- system fields ---------------------------------------------------------------------

/// A random version-4 UUID, as `uuid.NewUUID` gives `metadata.uid`.
fn new_uid() -> String {
    use ring::rand::{SecureRandom, SystemRandom};
    let mut b = [0u8; 16];
    SystemRandom::new()
        .fill(&mut b)
        .expect("the system random source works");
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// `names.SimpleNameGenerator`: the prefix and five characters of
/// `bcdfghjklmnpqrstvwxz2456789`.
fn generate_name(prefix: &str) -> String {
    use ring::rand::{SecureRandom, SystemRandom};
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut b = [0u8; 5];
    SystemRandom::new()
        .fill(&mut b)
        .expect("the system random source works");
    let suffix: String = b
        .iter()
        .map(|x| ALPHABET[*x as usize % ALPHABET.len()] as char)
        .collect();
    format!("{prefix}{suffix}")
}

fn meta_str<'v>(o: &'v Value, field: &str) -> &'v str {
    o["metadata"][field].as_str().unwrap_or_default()
}

fn spec_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.as_object_mut() {
            m.remove("metadata");
        }
        v
    };
    strip(old) != strip(new)
}

// ---- create ----------------------------------------------------------------------------

/// POST to the collection: 201 with the object; 409 `AlreadyExists`; 400 and 422 for
/// bodies that do not decode or validate.
pub fn create(call: &Call<'_>, content_type: &str, body: &[u8]) -> Response<Body> {
    let (mut object, warnings) = match decode(call, content_type, body) {
        Ok(d) => d,
        Err(res) => return res,
    };
    let kind = call.kind;
    object["apiVersion"] = GROUP_VERSION.into();
    object["kind"] = kind.kind.into();
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    // rest.EnsureObjectNamespaceMatchesRequestNamespace.
    let body_ns = meta_str(&object, "namespace").to_owned();
    if kind.namespaced {
        if !body_ns.is_empty() && body_ns != call.namespace {
            return bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            );
        }
        object["metadata"]["namespace"] = call.namespace.into();
    } else if let Some(m) = object["metadata"].as_object_mut() {
        m.remove("namespace");
    }
    if meta_str(&object, "name").is_empty() && !meta_str(&object, "generateName").is_empty() {
        object["metadata"]["name"] = generate_name(meta_str(&object, "generateName")).into();
    }
    let name = meta_str(&object, "name").to_owned();
    let errors = schema::validate(kind, &object);
    if !errors.is_empty() {
        return invalid(GROUP, kind.kind, &name, &errors);
    }
    // WipeObjectMetaSystemFields, FillObjectMetaSystemFields, generation 1.
    let meta = &mut object["metadata"];
    for f in [
        "uid",
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "managedFields",
    ] {
        if let Some(m) = meta.as_object_mut() {
            m.remove(f);
        }
    }
    meta["uid"] = new_uid().into();
    meta["generation"] = 1.into();
    meta["creationTimestamp"] = rfc3339(SystemTime::now()).into();
    if call.dry_run() {
        return with_warnings(call.respond(StatusCode::CREATED, &object), &warnings);
    }
    let written = call.store.write(&call.key(&name), |current| match current {
        Some(_) => Err(WriteError::AlreadyExists),
        None => Ok(Some(object.clone())),
    });
    match written {
        Ok(Some(event)) => {
            with_warnings(call.respond(StatusCode::CREATED, &event.object), &warnings)
        }
        Ok(None) | Err(_) => already_exists(GROUP, kind.plural, &name),
    }
}

// ---- get and list ----------------------------------------------------------------------

/// GET of one object: 200, or 404 `NotFound`.
pub fn get(call: &Call<'_>, name: &str) -> Response<Body> {
    match call.store.get(&call.key(name)) {
        Some(o) => call.respond(StatusCode::OK, &o),
        None => not_found(GROUP, call.kind.plural, name),
    }
}

/// The list options, validated as `ValidateListOptions` does (422 on `ListOptions`).
#[derive(Debug)]
pub struct ListOptions {
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
    /// `resourceVersion`, parsed; `None` when absent or `""`.
    pub resource_version: Option<u64>,
    /// `resourceVersionMatch`.
    pub rv_match: String,
    /// `limit`, 0 for none.
    pub limit: usize,
    /// `continue`.
    pub continue_token: String,
    /// `watch=true` (also `1`, `True`, as Go's `ParseBool`).
    pub watch: bool,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `sendInitialEvents`, when given.
    pub send_initial_events: Option<bool>,
    /// `timeoutSeconds`, when given.
    pub timeout_seconds: Option<u64>,
}

fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// Reads and validates the list and watch options of `call`.
pub fn list_options(call: &Call<'_>) -> Result<ListOptions, Response<Body>> {
    let p = |k: &str| call.param(k);
    let labels =
        LabelSelector::parse(&p("labelSelector").unwrap_or_default()).map_err(bad_request)?;
    let fields =
        FieldSelector::parse(&p("fieldSelector").unwrap_or_default()).map_err(bad_request)?;
    for t in &fields.0 {
        if !call.kind.is_selectable(&t.field) {
            return Err(bad_request(format!(
                "field label not supported: {}",
                t.field
            )));
        }
    }
    let rv_text = p("resourceVersion").unwrap_or_default();
    let resource_version = match rv_text.as_str() {
        "" => None,
        v => Some(
            v.parse::<u64>()
                .map_err(|_| bad_request(format!("invalid resource version: \"{v}\"")))?,
        ),
    };
    let bool_param = |k: &str| -> Result<Option<bool>, Response<Body>> {
        match p(k) {
            None => Ok(None),
            Some(v) => parse_bool(&v).map(Some).ok_or_else(|| {
                bad_request(format!("strconv.ParseBool: parsing {v:?}: invalid syntax"))
            }),
        }
    };
    let opts = ListOptions {
        labels,
        fields,
        resource_version,
        rv_match: p("resourceVersionMatch").unwrap_or_default(),
        limit: p("limit").and_then(|l| l.parse().ok()).unwrap_or(0),
        continue_token: p("continue").unwrap_or_default(),
        watch: bool_param("watch")?.unwrap_or(false),
        bookmarks: bool_param("allowWatchBookmarks")?.unwrap_or(false),
        send_initial_events: bool_param("sendInitialEvents")?,
        timeout_seconds: p("timeoutSeconds").and_then(|t| t.parse().ok()),
    };
    let mut errors = Vec::new();
    let m = opts.rv_match.as_str();
    if opts.watch {
        if opts.send_initial_events.is_some() && m != "NotOlderThan" {
            errors.push(FieldError::forbidden(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !m.is_empty() {
            if opts.send_initial_events.is_none() {
                errors.push(FieldError::forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
            }
            if m != "NotOlderThan" {
                errors.push(FieldError::not_supported(
                    "resourceVersionMatch",
                    m,
                    &["NotOlderThan"],
                ));
            }
        }
    } else {
        if !m.is_empty() {
            if rv_text.is_empty() {
                errors.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if !opts.continue_token.is_empty() {
                errors.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if m != "Exact" && m != "NotOlderThan" {
                errors.push(FieldError::not_supported(
                    "resourceVersionMatch",
                    m,
                    &["Exact", "NotOlderThan", ""],
                ));
            }
            if m == "Exact" && rv_text == "0" {
                errors.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if opts.send_initial_events.is_some() {
            errors.push(FieldError::forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
    }
    if !errors.is_empty() {
        return Err(invalid("meta.k8s.io", "ListOptions", "", &errors));
    }
    Ok(opts)
}

/// Whether `object` passes the label and field selectors.
pub fn selected(kind: &Kind, opts: &ListOptions, object: &Value) -> bool {
    let labels = object["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default();
    opts.labels.matches(&labels) && opts.fields.matches(|f| kind.field_value(object, f))
}

/// The continue token apimachinery writes: unpadded URL-safe base64 of
/// `{"v":"meta.k8s.io/v1","rv":<rv>,"start":"<key>\u0000"}`.
fn encode_continue(rv: u64, key: &Key) -> String {
    let start = format!("{}/{}\u{0}", key.namespace, key.name);
    URL_SAFE_NO_PAD.encode(json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start}).to_string())
}

fn decode_continue(token: &str) -> Result<(u64, String), String> {
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|e| e.to_string())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    if v["v"] != "meta.k8s.io/v1" {
        return Err("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)".to_owned());
    }
    let rv = v["rv"]
        .as_u64()
        .ok_or("continue key is not valid: no resourceVersion")?;
    Ok((
        rv,
        v["start"]
            .as_str()
            .unwrap_or_default()
            .trim_end_matches('\u{0}')
            .to_owned(),
    ))
}

/// GET of the collection: the selected objects at the resourceVersion asked for, in
/// pages of `limit` with a continue token (`remainingItemCount` when nothing filters).
pub fn list(call: &Call<'_>, opts: &ListOptions) -> Response<Body> {
    let namespace = (!call.namespace.is_empty()).then_some(call.namespace);
    let (at, start) = if opts.continue_token.is_empty() {
        let at = match (opts.resource_version, opts.rv_match.as_str()) {
            (Some(rv), "Exact") => Some(rv),
            (Some(rv), _) if rv > call.store.current() => {
                return too_large_resource_version(rv, call.store.current());
            }
            _ => None,
        };
        (at, None)
    } else {
        match decode_continue(&opts.continue_token) {
            Ok((rv, start)) => (Some(rv), Some(start)),
            Err(e) => return bad_request(e),
        }
    };
    let (objects, rv) = match call.store.list(call.kind.plural, namespace, at) {
        Ok(listed) => listed,
        Err(ReadError::TooNew(asked, current)) => {
            return too_large_resource_version(asked, current);
        }
        Err(ReadError::TooOld(..)) if start.is_some() => {
            return expired(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
            );
        }
        Err(ReadError::TooOld(..)) => {
            return expired("The resourceVersion for the provided list is too old.");
        }
    };
    let after_start = |k: &Key| {
        start
            .as_ref()
            .is_none_or(|s| format!("{}/{}", k.namespace, k.name) > *s)
    };
    let matching: Vec<(Key, Value)> = objects
        .into_iter()
        .filter(|(k, o)| after_start(k) && selected(call.kind, opts, o))
        .collect();
    let mut meta = json!({"resourceVersion": rv.to_string()});
    let page: Vec<Value> = if opts.limit > 0 && matching.len() > opts.limit {
        let last = &matching[opts.limit - 1].0;
        meta["continue"] = encode_continue(rv, last).into();
        if opts.labels.is_empty() && opts.fields.0.is_empty() {
            meta["remainingItemCount"] = (matching.len() - opts.limit).into();
        }
        matching[..opts.limit]
            .iter()
            .map(|(_, o)| o.clone())
            .collect()
    } else {
        matching.into_iter().map(|(_, o)| o).collect()
    };
    json(
        StatusCode::OK,
        &output::list(call.kind, call.form, &page, meta, &call.include_object()),
    )
}

// ---- update and patch ------------------------------------------------------------------

/// Finishes an update of `current` to `new` as `rest.BeforeUpdate` does: system fields
/// kept (uid, creationTimestamp, deletionTimestamp), `generation` bumped when anything
/// but metadata changed, then validation. A cleared last finalizer of an object being
/// deleted deletes it (`None`).
fn prepare_update(
    kind: &Kind,
    current: &Value,
    mut new: Value,
    name: &str,
) -> Result<Option<Value>, Response<Body>> {
    new["apiVersion"] = GROUP_VERSION.into();
    new["kind"] = kind.kind.into();
    let new_uid = meta_str(&new, "uid").to_owned();
    if !new_uid.is_empty() && new_uid != meta_str(current, "uid") {
        let e = FieldError::invalid(
            "metadata.uid",
            &format!("{new_uid:?}"),
            "field is immutable",
        );
        return Err(invalid(GROUP, kind.kind, name, &[e]));
    }
    for f in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
    ] {
        match current["metadata"].get(f) {
            Some(v) => new["metadata"][f] = v.clone(),
            None => {
                if let Some(m) = new["metadata"].as_object_mut() {
                    m.remove(f);
                }
            }
        }
    }
    let generation = current["metadata"]["generation"].as_i64().unwrap_or(1);
    let bumped = if spec_changed(current, &new) {
        generation + 1
    } else {
        generation
    };
    new["metadata"]["generation"] = bumped.into();
    let errors = schema::validate(kind, &new);
    if !errors.is_empty() {
        return Err(invalid(GROUP, kind.kind, name, &errors));
    }
    let deleting = !current["metadata"]["deletionTimestamp"].is_null();
    let finalizers_left = new["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty());
    if deleting && !finalizers_left {
        return Ok(None);
    }
    Ok(Some(new))
}

/// `checkName`: the object's name and namespace must be the URL's.
fn check_name(call: &Call<'_>, object: &Value, name: &str) -> Result<(), Response<Body>> {
    let object_name = meta_str(object, "name");
    if object_name != name {
        return Err(bad_request(format!(
            "the name of the object ({object_name}) does not match the name on the URL ({name})"
        )));
    }
    let ns = meta_str(object, "namespace");
    if call.kind.namespaced && !ns.is_empty() && ns != call.namespace {
        return Err(bad_request(format!(
            "the namespace of the object ({ns}) does not match the namespace on the request ({})",
            call.namespace
        )));
    }
    Ok(())
}

/// Commits `new` (already prepared) unless the object changed since `based_on`.
fn commit(
    call: &Call<'_>,
    name: &str,
    based_on: &str,
    new: Option<Value>,
    warnings: &[String],
) -> Response<Body> {
    let kind = call.kind;
    if call.dry_run() {
        return with_warnings(
            call.respond(StatusCode::OK, new.as_ref().unwrap_or(&Value::Null)),
            warnings,
        );
    }
    let written = call.store.write(&call.key(name), |current| match current {
        None => Err(WriteError::NotFound),
        Some(c) if meta_str(c, "resourceVersion") != based_on => Err(WriteError::Conflict),
        Some(_) => Ok(new.clone()),
    });
    match written {
        Ok(Some(event)) => with_warnings(call.respond(StatusCode::OK, &event.object), warnings),
        Ok(None) => match call.store.get(&call.key(name)) {
            Some(unchanged) => with_warnings(call.respond(StatusCode::OK, &unchanged), warnings),
            None => not_found(GROUP, kind.plural, name),
        },
        Err(WriteError::NotFound) => not_found(GROUP, kind.plural, name),
        Err(_) => conflict(GROUP, kind.plural, name, OPTIMISTIC_LOCK),
    }
}

/// PUT: 200 with the stored object; 404 for a missing one (no create on update); 422
/// without a resourceVersion; 409 `Conflict` for a stale one.
pub fn update(call: &Call<'_>, name: &str, content_type: &str, body: &[u8]) -> Response<Body> {
    let (new, warnings) = match decode(call, content_type, body) {
        Ok(d) => d,
        Err(res) => return res,
    };
    if let Err(res) = check_name(call, &new, name) {
        return res;
    }
    let kind = call.kind;
    let Some(current) = call.store.get(&call.key(name)) else {
        return not_found(GROUP, kind.plural, name);
    };
    let rv = meta_str(&new, "resourceVersion").to_owned();
    if rv.is_empty() {
        // Upstream builds this Invalid from the resource, not the kind (store.go).
        let e = FieldError::invalid(
            "metadata.resourceVersion",
            "0",
            "must be specified for an update",
        );
        return invalid(GROUP, kind.plural, name, &[e]);
    }
    if rv != meta_str(&current, "resourceVersion") {
        return conflict(GROUP, kind.plural, name, OPTIMISTIC_LOCK);
    }
    match prepare_update(kind, &current, new, name) {
        Ok(new) => commit(call, name, &rv, new, &warnings),
        Err(res) => res,
    }
}

/// PATCH: the patch applied to the current object, then the update rules; retried when
/// another write lands in between (as `GuaranteedUpdate` retries), unless the patch itself
/// names a resourceVersion.
pub fn patch(call: &Call<'_>, name: &str, content_type: &str, body: &[u8]) -> Response<Body> {
    let patch_type = content_type.split(';').next().unwrap_or_default().trim();
    if !patch::PATCH_TYPES.contains(&patch_type) {
        return unsupported_media_type(&patch::PATCH_TYPES);
    }
    let validation = match call.validation() {
        Ok(v) => v,
        Err(res) => return res,
    };
    let patch_doc: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return bad_request(e.to_string()),
    };
    let kind = call.kind;
    for _attempt in 0..5 {
        let Some(current) = call.store.get(&call.key(name)) else {
            return not_found(GROUP, kind.plural, name);
        };
        let current_rv = meta_str(&current, "resourceVersion").to_owned();
        let mut patched = output::ordered(kind, &current);
        let shown_value = match patch_type {
            "application/json-patch+json" => {
                if !patch_doc.is_array() {
                    return bad_request(format!(
                        "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
                        if patch_doc.is_object() {
                            "object"
                        } else {
                            "value"
                        }
                    ));
                }
                if patch::json_patch(&mut patched, &patch_doc).is_err() {
                    // NewGenericServerResponse(422, ...): the patch error is not repeated.
                    let status = kube_aggregator::status::Status::failure(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "Invalid",
                        "the server rejected our request due to an error in our request",
                    )
                    .with_details(Default::default());
                    return status.into_response();
                }
                None
            }
            "application/merge-patch+json" => {
                patch::merge_patch(&mut patched, &patch_doc);
                None
            }
            _ => {
                if let Err(e) = patch::strategic_merge_patch(&mut patched, &patch_doc) {
                    return bad_request(e);
                }
                Some(patch::go_format(&patch_doc))
            }
        };
        // The patched object is decoded like a body; its errors are 422s on "patch".
        let decoded = schema::decode(kind, &patched);
        let shown = shown_value.clone().unwrap_or_else(|| sorted_json(&patched));
        let patch_invalid = |why: String| {
            let e = FieldError::invalid("patch", &format!("{shown:?}"), &why);
            invalid("", "", "", &[e])
        };
        if let Some(e) = decoded.type_error {
            return patch_invalid(e);
        }
        let warnings = match validation.as_str() {
            "Strict" if !decoded.unknown.is_empty() => {
                return patch_invalid(format!(
                    "strict decoding error: {}",
                    decoded.unknown.join(", ")
                ));
            }
            "Ignore" => Vec::new(),
            _ => decoded.unknown.clone(),
        };
        prune(kind, &mut patched);
        if let Err(res) = check_name(call, &patched, name) {
            return res;
        }
        let patched_rv = meta_str(&patched, "resourceVersion").to_owned();
        if !patched_rv.is_empty() && patched_rv != current_rv {
            return conflict(GROUP, kind.plural, name, OPTIMISTIC_LOCK);
        }
        let new = match prepare_update(kind, &current, patched, name) {
            Ok(new) => new,
            Err(res) => return res,
        };
        let res = commit(call, name, &current_rv, new, &warnings);
        if res.status() == StatusCode::CONFLICT && patched_rv.is_empty() {
            continue;
        }
        return res;
    }
    conflict(GROUP, kind.plural, name, OPTIMISTIC_LOCK)
}

/// JSON with object keys sorted, as Go marshals the map a patch produced.
fn sorted_json(v: &Value) -> String {
    fn sort(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sort(&m[k]))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(v).to_string()
}

// ---- delete ----------------------------------------------------------------------------

/// DELETE of one object: without finalizers it goes at once and the answer is a
/// `Success` Status naming it (the generic registry's `ReturnDeletedObject: false`);
/// with finalizers it gets a `deletionTimestamp` and the answer is the object. 404 for a
/// missing one, 409 when the body's preconditions do not hold.
pub fn delete(call: &Call<'_>, name: &str, body: &[u8]) -> Response<Body> {
    let options: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let kind = call.kind;
    let pre_uid = options["preconditions"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let pre_rv = options["preconditions"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut precondition_failed = None;
    let written = call.store.write(&call.key(name), |current| {
        let Some(c) = current else { return Err(WriteError::NotFound) };
        let (uid, rv) = (meta_str(c, "uid"), meta_str(c, "resourceVersion"));
        if !pre_uid.is_empty() && pre_uid != uid {
            precondition_failed = Some(format!("Precondition failed: UID in precondition: {pre_uid}, UID in object meta: {uid}"));
            return Err(WriteError::Conflict);
        }
        if !pre_rv.is_empty() && pre_rv != rv {
            precondition_failed = Some(format!("Precondition failed: ResourceVersion in precondition: {pre_rv}, ResourceVersion in object meta: {rv}"));
            return Err(WriteError::Conflict);
        }
        if call.dry_run() {
            return Ok(Some(c.clone()));
        }
        let finalizers = c["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
        if finalizers {
            let mut marked = c.clone();
            if marked["metadata"]["deletionTimestamp"].is_null() {
                marked["metadata"]["deletionTimestamp"] = rfc3339(SystemTime::now()).into();
                marked["metadata"]["deletionGracePeriodSeconds"] = 0.into();
            }
            return Ok(Some(marked));
        }
        Ok(None)
    });
    match written {
        Err(WriteError::NotFound) => not_found(GROUP, kind.plural, name),
        Err(_) => conflict(
            GROUP,
            kind.plural,
            name,
            &precondition_failed.unwrap_or_default(),
        ),
        Ok(Some(event)) if event.kind != super::store::EventType::Deleted => {
            call.respond(StatusCode::OK, &event.object)
        }
        Ok(Some(event)) => deleted_status(kind, name, meta_str(&event.object, "uid")),
        Ok(None) => match call.store.get(&call.key(name)) {
            Some(o) => call.respond(StatusCode::OK, &o),
            None => not_found(GROUP, kind.plural, name),
        },
    }
}

/// `{"kind":"Status",...,"status":"Success","details":{"name","group","kind","uid"}}`,
/// `kind` being the resource (upstream's comment: "Yes we set Kind field to resource").
fn deleted_status(kind: &Kind, name: &str, uid: &str) -> Response<Body> {
    json(
        StatusCode::OK,
        &json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": name, "group": GROUP, "kind": kind.plural, "uid": uid},
        }),
    )
}

/// DELETE of the collection: every selected object deleted as [`delete`] would; the
/// answer lists them as they were.
pub fn delete_collection(call: &Call<'_>, opts: &ListOptions) -> Response<Body> {
    let namespace = (!call.namespace.is_empty()).then_some(call.namespace);
    let Ok((objects, _)) = call.store.list(call.kind.plural, namespace, None) else {
        return expired("The resourceVersion for the provided list is too old.");
    };
    let mut gone = Vec::new();
    for (key, object) in objects
        .into_iter()
        .filter(|(_, o)| selected(call.kind, opts, o))
    {
        let per_object = Call {
            namespace: &key.namespace,
            ..*call
        };
        let res = delete(&per_object, &key.name, b"");
        if res.status().is_success() {
            gone.push(object);
        }
    }
    let meta = json!({"resourceVersion": call.store.current().to_string()});
    json(
        StatusCode::OK,
        &output::list(call.kind, Form::Object, &gone, meta, ""),
    )
}

impl Clone for Call<'_> {
    fn clone(&self) -> Self {
        *self
    }
}
impl Copy for Call<'_> {}
