#![doc = include_str!("../README.md")]
//!
//! # Feature flags
//!
//! - `tokio` (default): the tokio executor and timer ([`rt::Executor::tokio`],
//!   [`rt::Timer::tokio`]), the rustls backend transport
//!   ([`transport::RustlsTransport`]) and the TLS accept loop ([`server`]). Without it the
//!   crate uses no runtime: the host brings an executor, a timer and a
//!   [`transport::Transport`].
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod aggregator;
mod apiregistration;
pub mod apiservice;
pub mod audit;
pub mod authn;
pub mod authz;
pub mod availability;
pub mod body;
pub mod builder;
pub mod discovery;
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzz_logic;
mod gocompat;
mod identity;
pub mod impersonation;
pub mod inflight;
pub mod openapi;
pub mod proxy;
pub mod registry;
pub mod reload;
mod resolver;
pub mod rt;
pub mod selfreview;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub mod server;
mod sharded;
pub mod source;
pub mod status;
pub mod tenant;
#[cfg(any(test, fuzzing))]
mod testing;
pub mod timeout;
pub mod transport;
pub mod webhook;
mod worker;

pub use aggregator::{AggregatorLayer, AggregatorService};
pub use body::Body;
pub use builder::{Aggregator, AggregatorBuilder, Worker};
pub use registry::Registry;
