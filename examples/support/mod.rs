//! Code shared by the examples and the end-to-end tests: a kube-apiserver-like gateway
//! embedding the aggregator, a metrics-server-like extension server, a demo PKI, and the
//! fixed cluster data both serve.
#![allow(unreachable_pub)]

pub mod api_status;
pub mod cluster;
pub mod core_api;
pub mod core_openapi;
pub mod crud;
pub mod custom_metrics;
pub mod demo;
pub mod demo_servers;
pub mod extension_server;
pub mod flags;
pub mod gateway;
pub mod metrics_openapi;
pub mod metrics_server;
pub mod openapi_doc;
pub mod pki;
pub mod policy;
pub mod selector;
pub mod tenant_dir;
