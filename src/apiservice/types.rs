//! apiregistration.k8s.io/v1 `APIService` as serde types, with the upstream JSON field names
//! (kube-aggregator
//! [`pkg/apis/apiregistration/v1/types.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apis/apiregistration/v1/types.go)).
//! Serializing writes what kube-apiserver writes for the same object: empty optional
//! fields omitted, `caBundle` as base64, `groupPriorityMinimum` and `versionPriority`
//! always present.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The API group of APIService objects.
pub const API_GROUP: &str = "apiregistration.k8s.io";
/// The `apiVersion` written on APIService objects this crate produces.
pub const API_VERSION: &str = "apiregistration.k8s.io/v1";
/// The port used when `spec.service.port` is absent (v1 defaulting).
pub const DEFAULT_SERVICE_PORT: i32 = 443;

/// An `APIService` (apiregistration.k8s.io/v1): which group/version is served where.
///
/// Mirrors kube-aggregator `pkg/apis/apiregistration/v1/types.go`. Unknown fields are
/// ignored on input; `status` is optional. `v1beta1` objects read the same (the versions
/// have identical fields); the registry serves them as `v1`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiService {
    /// `apiVersion`, normally `apiregistration.k8s.io/v1` (or `v1beta1`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// `kind`, normally `APIService`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Object metadata; only `name`, labels, annotations and the timestamps are used.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What is served and by whom.
    #[serde(default)]
    pub spec: ApiServiceSpec,
    /// Conditions (only `Available` is defined).
    #[serde(default, skip_serializing_if = "ApiServiceStatus::is_empty")]
    pub status: ApiServiceStatus,
}

/// The subset of `metav1.ObjectMeta` an APIService carries.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// The object name; for an APIService it must be `<version>.<group>` (`v1.` for the
    /// legacy core group), which validation checks.
    #[serde(default)]
    pub name: String,
    /// Must be empty: APIServices are cluster-scoped.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// UID, when the host has one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Resource version, when the host has one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// RFC 3339 creation time, when known; the registry sets it on first apply when the
    /// source gives none, and keeps it across updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// Labels, validated as Kubernetes labels (qualified-name keys, label values).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations; keys are qualified names, and all of them together may hold at most
    /// 256 KiB, as apimachinery limits them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// `spec` of an APIService.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiServiceSpec {
    /// The Service that serves the group/version; `None` means a local APIService,
    /// handled by the host's own handlers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceReference>,
    /// API group name, e.g. `metrics.k8s.io`. Empty only for the legacy `v1.` APIService.
    #[serde(default)]
    pub group: String,
    /// API version, e.g. `v1beta1`.
    #[serde(default)]
    pub version: String,
    /// Skip verification of the backend's serving certificate (discouraged; refused
    /// together with a `caBundle`, and on a local APIService).
    // Upstream spells the acronym in capitals, which camelCase renaming would not.
    #[serde(
        rename = "insecureSkipTLSVerify",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub insecure_skip_tls_verify: bool,
    /// PEM CA bundle that verifies the backend's serving certificate (base64 in JSON);
    /// empty means the platform's roots. Refused on a local APIService.
    #[serde(default, with = "base64_bytes", skip_serializing_if = "Vec::is_empty")]
    pub ca_bundle: Vec<u8>,
    /// Minimum priority of the group; higher is preferred. 1..=20000. A group ranks by
    /// the highest value among its versions; `*.k8s.io` groups use about 18000, others
    /// are advised the 2000s.
    #[serde(default)]
    pub group_priority_minimum: i32,
    /// Priority of this version inside its group; higher is preferred. 1..=1000. Ties are
    /// broken by the Kubernetes version order (`v2` > `v1` > `v1beta1`).
    #[serde(default)]
    pub version_priority: i32,
}

/// `spec.service`: a reference to a Service, resolved by a [`ServiceResolver`](crate::availability::ServiceResolver).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceReference {
    /// Namespace of the Service.
    #[serde(default)]
    pub namespace: String,
    /// Name of the Service.
    #[serde(default)]
    pub name: String,
    /// Port; `None` is defaulted to 443 (see [`ServiceReference::port_or_default`]).
    /// Validation requires 1..=65535. This is the Service's port, not the pod's: the
    /// [`ServiceResolver`](crate::availability::ServiceResolver) maps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

impl ServiceReference {
    /// The port, with v1 defaulting applied (443 when absent).
    pub fn port_or_default(&self) -> i32 {
        self.port.unwrap_or(DEFAULT_SERVICE_PORT)
    }

    /// The DNS name the backend's serving certificate is checked against:
    /// `<name>.<namespace>.svc` (kube-aggregator `BuildTransportConfig`).
    ///
    /// ```
    /// use kube_aggregator::apiservice::ServiceReference;
    ///
    /// let s = ServiceReference { namespace: "kube-system".into(), name: "metrics-server".into(), port: None };
    /// assert_eq!((s.server_name().as_str(), s.port_or_default()), ("metrics-server.kube-system.svc", 443));
    /// ```
    pub fn server_name(&self) -> String {
        format!("{}.{}.svc", self.name, self.namespace)
    }
}

/// `status` of an APIService.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiServiceStatus {
    /// Conditions, a list map keyed by `type`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ApiServiceCondition>,
}

impl ApiServiceStatus {
    /// True when there are no conditions.
    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }
}

/// One entry of `status.conditions`. The registry writes them with upstream's
/// `SetAPIServiceCondition` semantics ([`ApiService::set_condition`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiServiceCondition {
    /// Condition type; only `Available` is defined.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// RFC 3339 time of the last change of `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// One CamelCase word, e.g. `Passed`, `FailedDiscoveryCheck`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// The `Available` condition type.
pub const CONDITION_AVAILABLE: &str = "Available";

/// Values of a condition's `status`. Only `True` counts as available; `Unknown` is
/// written when the Service could not even be looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    /// `True`
    True,
    /// `False`
    False,
    /// `Unknown`
    Unknown,
}

impl ConditionStatus {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl ApiService {
    /// The object name, `<version>.<group>`.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// True when the APIService has no `spec.service` and is served by the host itself.
    pub fn is_local(&self) -> bool {
        self.spec.service.is_none()
    }

    /// The `Available` condition, if any.
    pub fn available_condition(&self) -> Option<&ApiServiceCondition> {
        self.status
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_AVAILABLE)
    }

    /// True when an `Available` condition exists with status `True` (helpers.go `IsAPIServiceConditionTrue`).
    pub fn is_available(&self) -> bool {
        self.available_condition()
            .is_some_and(|c| c.status == "True")
    }

    /// Sets a condition with upstream `SetAPIServiceCondition` semantics: reason and message
    /// are always overwritten; `status` and `lastTransitionTime` change only when the status
    /// value changes. `now` is an RFC 3339 timestamp. Returns true when anything changed.
    ///
    /// ```
    /// use kube_aggregator::apiservice::{ApiService, CONDITION_AVAILABLE, ConditionStatus};
    ///
    /// let mut svc = ApiService::default();
    /// assert!(svc.set_condition(CONDITION_AVAILABLE, ConditionStatus::False,
    ///     "FailedDiscoveryCheck", "bad status from https://10.0.0.5:443/apis/g/v: 503", "2026-01-01T00:00:00Z"));
    /// // Same status, new message: the transition time stays.
    /// assert!(svc.set_condition(CONDITION_AVAILABLE, ConditionStatus::False,
    ///     "FailedDiscoveryCheck", "timed out", "2026-01-01T00:05:00Z"));
    /// let c = svc.available_condition().unwrap();
    /// assert_eq!(c.last_transition_time.as_deref(), Some("2026-01-01T00:00:00Z"));
    /// // Nothing new: nothing changed.
    /// assert!(!svc.set_condition(CONDITION_AVAILABLE, ConditionStatus::False,
    ///     "FailedDiscoveryCheck", "timed out", "2026-01-01T00:06:00Z"));
    /// ```
    pub fn set_condition(
        &mut self,
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: &str,
        now: &str,
    ) -> bool {
        let conds = &mut self.status.conditions;
        match conds.iter_mut().find(|c| c.type_ == type_) {
            None => {
                conds.push(ApiServiceCondition {
                    type_: type_.to_owned(),
                    status: status.as_str().to_owned(),
                    last_transition_time: Some(now.to_owned()),
                    reason: reason.to_owned(),
                    message: message.to_owned(),
                });
                true
            }
            Some(c) => {
                let mut changed = c.reason != reason || c.message != message;
                c.reason = reason.to_owned();
                c.message = message.to_owned();
                if c.status != status.as_str() {
                    c.status = status.as_str().to_owned();
                    c.last_transition_time = Some(now.to_owned());
                    changed = true;
                }
                changed
            }
        }
    }
}

/// A group and version pair, e.g. `metrics.k8s.io` / `v1beta1`.
///
/// ```
/// use kube_aggregator::apiservice::GroupVersion;
///
/// let gv = |g: &str, v: &str| GroupVersion { group: g.into(), version: v.into() };
/// assert_eq!(gv("metrics.k8s.io", "v1beta1").to_string(), "metrics.k8s.io/v1beta1");
/// assert_eq!(gv("", "v1").to_string(), "v1"); // the core group, as `apiVersion: v1`
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersion {
    /// Group, empty for the legacy core group.
    pub group: String,
    /// Version.
    pub version: String,
}

impl std::fmt::Display for GroupVersion {
    /// `group/version`, or just `version` for the core group.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.version)
        } else {
            write!(f, "{}/{}", self.group, self.version)
        }
    }
}

mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(v))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s: Option<String> = Option::deserialize(d)?;
        match s {
            None => Ok(Vec::new()),
            Some(s) => STANDARD.decode(s.trim()).map_err(|e| {
                serde::de::Error::custom(format!("caBundle is not valid base64: {e}"))
            }),
        }
    }
}
