//! Building an [`ApiService`] in code, as a host registers the APIServices it serves or
//! routes without writing their JSON: a constructor for each kind (remote, local) and
//! methods that set what a manifest would set beside them.

use super::types::{ApiService, ServiceReference};

impl ApiService {
    /// The APIService `<version>.<group>` that routes `/apis/<group>/<version>` to the
    /// Service `<name>.<namespace>.svc` on port 443, as `kubectl apply` of a manifest
    /// with `spec.service` would register it. `groupPriorityMinimum` and
    /// `versionPriority` are 100 (metrics-server's; change them with
    /// [`ApiService::priorities`]); the backend's serving certificate is verified against
    /// no CA until [`ApiService::ca_bundle`] or [`ApiService::insecure_skip_tls_verify`]
    /// says otherwise.
    ///
    /// ```
    /// use kube_aggregator::apiservice::{ApiService, validate};
    ///
    /// let svc = ApiService::remote("metrics.k8s.io", "v1beta1", "kube-system", "metrics-server")
    ///     .insecure_skip_tls_verify();
    /// assert_eq!(svc.name(), "v1beta1.metrics.k8s.io");
    /// assert!(validate(&svc).is_ok());
    /// ```
    pub fn remote(group: &str, version: &str, namespace: &str, name: &str) -> ApiService {
        let mut svc = ApiService::local(group, version);
        svc.spec.service = Some(ServiceReference {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            port: None,
        });
        svc
    }

    /// The APIService `<version>.<group>` with no `spec.service`: the host serves the
    /// group version itself (kube-apiserver's built-in groups are local APIServices).
    /// Priorities as [`ApiService::remote`].
    pub fn local(group: &str, version: &str) -> ApiService {
        let mut svc = ApiService::default();
        svc.metadata.name = format!("{version}.{group}");
        svc.spec.group = group.to_owned();
        svc.spec.version = version.to_owned();
        svc.spec.group_priority_minimum = 100;
        svc.spec.version_priority = 100;
        svc
    }

    /// With `spec.groupPriorityMinimum` and `spec.versionPriority` (both must be
    /// positive to validate).
    pub fn priorities(mut self, group_priority_minimum: i32, version_priority: i32) -> Self {
        self.spec.group_priority_minimum = group_priority_minimum;
        self.spec.version_priority = version_priority;
        self
    }

    /// With `spec.caBundle`: the PEM CA certificates the backend's serving certificate
    /// must chain to.
    pub fn ca_bundle(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.spec.ca_bundle = pem.into();
        self
    }

    /// With `spec.insecureSkipTLSVerify: true`: the backend's serving certificate is not
    /// verified (upstream warns against it; a test or a Service of the host's own).
    pub fn insecure_skip_tls_verify(mut self) -> Self {
        self.spec.insecure_skip_tls_verify = true;
        self
    }
}
