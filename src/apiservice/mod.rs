//! The APIService object (apiregistration.k8s.io/v1): serde types with the upstream JSON
//! field names, validation with the upstream messages (kube-aggregator
//! [`pkg/apis/apiregistration/validation/validation.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apis/apiregistration/validation/validation.go)),
//! and the Kubernetes-aware version order and group/version priority sort (apimachinery
//! [`pkg/version/helpers.go`](https://github.com/kubernetes/apimachinery/blob/master/pkg/version/helpers.go), kube-aggregator
//! [`pkg/apis/apiregistration/v1/helper/helpers.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apis/apiregistration/v1/helper/helpers.go)).
//!
//! ```
//! use kube_aggregator::apiservice::{ApiService, validate};
//! let svc: ApiService = serde_json::from_str(r#"{
//!   "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
//!   "metadata": {"name": "v1beta1.metrics.k8s.io"},
//!   "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"},
//!            "group": "metrics.k8s.io", "version": "v1beta1", "insecureSkipTLSVerify": true,
//!            "groupPriorityMinimum": 100, "versionPriority": 100}}"#).unwrap();
//! assert!(validate(&svc).is_ok());
//! assert_eq!(svc.spec.service.unwrap().port_or_default(), 443);
//! ```
//!
//! Floor 1 of the import order (docs/architecture.md): uses `gocompat`; used by
//! `aggregator`, `apiregistration`, `availability`, `discovery`, `fuzz_logic`, `registry`,
//! `resolver`, `source`, `transport`.

mod construct;
mod types;
mod validation;
mod version;

pub use types::*;
pub use validation::*;
pub use version::*;
