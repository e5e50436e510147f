//! What the layers behind the audit layer add to a request's audit event: annotations
//! (`authorization.k8s.io/decision`, ...) and the impersonated user. A leaf, so the
//! authorization and impersonation layers can record into it without importing the audit
//! layer that reads it; public as [`crate::audit::AuditContext`].
//!
//! Floor 2 of the import order (docs/architecture.md): uses `identity`; used by `audit`,
//! `authz`, `impersonation`, `selfreview`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::identity::UserInfo;

/// The part of a request's audit event that layers behind the
/// [`AuditLayer`](crate::audit::AuditLayer) fill in, found in the request extensions of
/// every request that is audited (at `Metadata` level or above) and only of those.
///
/// Mirrors k8s.io/apiserver `pkg/audit/context.go` (`AddAuditAnnotation`,
/// `LogImpersonatedUser`): an annotation keeps its first value (a second, different one
/// is refused with a warning, as upstream logs it).
///
/// ```
/// use kube_aggregator::audit::AuditContext;
///
/// let context = AuditContext::default();
/// context.annotate("authorization.k8s.io/decision", "allow");
/// context.annotate("authorization.k8s.io/decision", "forbid"); // refused: already set
/// assert_eq!(context.annotations()["authorization.k8s.io/decision"], "allow");
/// ```
#[derive(Debug, Clone, Default)]
pub struct AuditContext {
    recorded: Arc<Mutex<Recorded>>,
    bodies: Bodies,
}

/// Which bodies the request's level records.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Bodies {
    /// `Request` or `RequestResponse`: the request object.
    pub(crate) request: bool,
    /// `RequestResponse`: the response object.
    pub(crate) response: bool,
    /// The policy's `omitManagedFields`: objects lose `metadata.managedFields`.
    pub(crate) omit_managed_fields: bool,
}

/// What was recorded.
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    /// The event's `annotations`.
    pub(crate) annotations: BTreeMap<String, String>,
    /// The event's `impersonatedUser`.
    pub(crate) impersonated_user: Option<UserInfo>,
    /// The event's `requestObject`.
    pub(crate) request_object: Option<serde_json::Value>,
    /// The event's `responseObject`.
    pub(crate) response_object: Option<serde_json::Value>,
}

impl AuditContext {
    /// A context recording the bodies `bodies` asks for.
    pub(crate) fn new(bodies: Bodies) -> AuditContext {
        AuditContext {
            recorded: Arc::default(),
            bodies,
        }
    }

    /// Records the object a request carried, as JSON (upstream's `LogRequestObject`): kept
    /// only when the request is audited at `Request` level or above, without
    /// `metadata.managedFields` when the policy omits them. For handlers that decode the
    /// body (the self reviews do); proxied bodies are not decoded, so, as upstream,
    /// they are not recorded.
    pub fn log_request_object(&self, object: serde_json::Value) {
        if self.bodies.request {
            self.lock().request_object = Some(self.trimmed(object));
        }
    }

    /// Records the object a handler answered with, as JSON (upstream's
    /// `LogResponseObject`): kept only at `RequestResponse` level, trimmed as
    /// [`AuditContext::log_request_object`] trims.
    pub fn log_response_object(&self, object: serde_json::Value) {
        if self.bodies.response {
            self.lock().response_object = Some(self.trimmed(object));
        }
    }

    /// Whether the request's level records the request object: a handler can skip
    /// building one that would not be kept.
    pub fn records_request_object(&self) -> bool {
        self.bodies.request
    }

    /// Whether the request's level records the response object.
    pub fn records_response_object(&self) -> bool {
        self.bodies.response
    }

    /// `object` without managed fields when the policy says so: its own, and those of
    /// a list's items (upstream's `copyWithoutManagedFields`).
    fn trimmed(&self, mut object: serde_json::Value) -> serde_json::Value {
        fn strip(object: &mut serde_json::Value) {
            if let Some(metadata) = object.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                metadata.remove("managedFields");
            }
        }
        if self.bodies.omit_managed_fields {
            strip(&mut object);
            if let Some(items) = object.get_mut("items").and_then(|i| i.as_array_mut()) {
                items.iter_mut().for_each(strip);
            }
        }
        object
    }

    /// Adds an annotation to the event; a key already set to another value keeps it.
    pub fn annotate(&self, key: &str, value: &str) {
        let mut recorded = self.lock();
        match recorded.annotations.get(key) {
            Some(v) if v != value => {
                tracing::warn!(key, value, set = %v, "audit annotation already set; kept");
            }
            Some(_) => {}
            None => {
                recorded
                    .annotations
                    .insert(key.to_owned(), value.to_owned());
            }
        }
    }

    /// Records the user the request runs as after impersonation (`impersonatedUser`).
    pub fn log_impersonated_user(&self, user: &UserInfo) {
        self.lock().impersonated_user = Some(user.clone());
    }

    /// The annotations recorded so far.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        self.lock().annotations.clone()
    }

    /// The impersonated user recorded, if any.
    pub fn impersonated_user(&self) -> Option<UserInfo> {
        self.lock().impersonated_user.clone()
    }

    /// Everything recorded, taken out (the context is left empty).
    pub(crate) fn take(&self) -> Recorded {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> MutexGuard<'_, Recorded> {
        // A panic elsewhere while holding the lock leaves plain data behind: keep using it.
        self.recorded.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Adds annotations to the request's audit event, if it is audited.
pub(crate) fn annotate(extensions: &http::Extensions, pairs: &[(&str, &str)]) {
    if let Some(context) = extensions.get::<AuditContext>() {
        for (k, v) in pairs {
            context.annotate(k, v);
        }
    }
}
