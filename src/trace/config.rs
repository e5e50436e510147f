//! kube-apiserver's `--tracing-config-file`: a `TracingConfiguration` of
//! `apiserver.config.k8s.io` (k8s.io/apiserver `pkg/server/options/tracing.go`,
//! k8s.io/component-base `tracing/api/v1`), read, validated with upstream's messages, and
//! with the `otlp` feature turned into an OTLP/gRPC tracer provider as
//! component-base's `tracing.NewProvider` builds it.

use std::path::Path;

use serde::Deserialize;

/// Where upstream's OTLP/gRPC exporter sends spans when the configuration names no
/// endpoint (`otlptracegrpc`'s default).
pub const DEFAULT_ENDPOINT: &str = "localhost:4317";

/// The tracing configuration (`apiVersion: apiserver.config.k8s.io/v1`, `v1beta1` or
/// `v1alpha1`; `kind: TracingConfiguration`).
///
/// ```
/// use kube_aggregator::trace::TracingConfiguration;
///
/// let config = TracingConfiguration::from_bytes(
///     b"apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\n\
///       endpoint: otel-collector.monitoring:4317\nsamplingRatePerMillion: 100\n",
/// )
/// .unwrap();
/// assert_eq!(config.endpoint(), "otel-collector.monitoring:4317");
/// assert_eq!(config.sampling_rate_per_million, Some(100));
///
/// let err = TracingConfiguration::from_bytes(
///     b"apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\n\
///       samplingRatePerMillion: 2000000\n",
/// )
/// .unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "failed to validate tracing configuration: samplingRatePerMillion: Invalid value: \
///      2000000: sampling rate per million must be less than or equal to one million"
/// );
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TracingConfiguration {
    /// The collector's gRPC target: `host:port`, `dns:///host:port` (or `unix://path`,
    /// which upstream accepts and this crate's exporter does not dial). `None` is
    /// [`DEFAULT_ENDPOINT`].
    pub endpoint: Option<String>,
    /// How many requests in a million start a trace when no privileged caller's
    /// `traceparent` decided it; `None` and 0 sample none (upstream's default).
    pub sampling_rate_per_million: Option<i32>,
}

/// Why a tracing configuration was refused, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TracingConfigError(String);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    endpoint: Option<String>,
    #[serde(default)]
    sampling_rate_per_million: Option<i64>,
}

const VERSIONS: [&str; 3] = [
    "apiserver.config.k8s.io/v1",
    "apiserver.config.k8s.io/v1beta1",
    "apiserver.config.k8s.io/v1alpha1",
];

impl TracingConfiguration {
    /// Reads `--tracing-config-file`.
    ///
    /// # Errors
    ///
    /// A [`TracingConfigError`]: the file cannot be read (`failed to read tracing config:
    /// unable to read tracing configuration from "<path>": <cause>`), or
    /// [`TracingConfiguration::from_bytes`] refuses it.
    pub fn from_file(path: &Path) -> Result<TracingConfiguration, TracingConfigError> {
        let bytes = std::fs::read(path).map_err(|e| {
            TracingConfigError(format!(
                "failed to read tracing config: unable to read tracing configuration from {:?}: {e}",
                path.display().to_string()
            ))
        })?;
        TracingConfiguration::from_bytes(&bytes)
    }

    /// Parses a configuration (YAML or JSON) and validates it as upstream does.
    ///
    /// # Errors
    ///
    /// A [`TracingConfigError`]: not a document, or not a `TracingConfiguration` of
    /// `apiserver.config.k8s.io` (`failed to read tracing config: unable to decode tracing
    /// configuration data: ...`); or each invalid field named (`failed to validate tracing
    /// configuration: samplingRatePerMillion: Invalid value: -1: sampling rate must be
    /// positive`; several in brackets).
    pub fn from_bytes(bytes: &[u8]) -> Result<TracingConfiguration, TracingConfigError> {
        let undecodable = |why: String| {
            TracingConfigError(format!(
                "failed to read tracing config: unable to decode tracing configuration data: {why}"
            ))
        };
        let raw: Raw = crate::gocompat::yaml::from_slice(bytes).map_err(undecodable)?;
        if raw.kind.is_empty() {
            return Err(undecodable("Object 'Kind' is missing".into()));
        }
        if !VERSIONS.contains(&raw.api_version.as_str()) || raw.kind != "TracingConfiguration" {
            return Err(undecodable(format!(
                "no kind {:?} is registered for version {:?}",
                raw.kind, raw.api_version
            )));
        }
        let mut errors = Vec::new();
        let rate = raw.sampling_rate_per_million.map(|rate| {
            if rate < 0 {
                errors.push(format!(
                    "samplingRatePerMillion: Invalid value: {rate}: sampling rate must be positive"
                ));
            }
            if rate > 1_000_000 {
                errors.push(format!(
                    "samplingRatePerMillion: Invalid value: {rate}: sampling rate per million \
                     must be less than or equal to one million"
                ));
            }
            i32::try_from(rate).unwrap_or(i32::MAX)
        });
        if let Some(endpoint) = &raw.endpoint {
            // gRPC's naming: no scheme is `dns`.
            let named = if endpoint.contains("//") {
                endpoint.clone()
            } else {
                format!("dns://{endpoint}")
            };
            let scheme = named.split_once("://").map_or("", |(scheme, _)| scheme);
            if !matches!(scheme, "dns" | "unix" | "unix-abstract") {
                errors.push(format!(
                    "endpoint: Invalid value: {named:?}: unsupported scheme: {scheme}.  Options \
                     are none, dns, unix, or unix-abstract.  See \
                     https://github.com/grpc/grpc/blob/master/doc/naming.md"
                ));
            }
        }
        match errors.len() {
            0 => Ok(TracingConfiguration {
                endpoint: raw.endpoint,
                sampling_rate_per_million: rate,
            }),
            1 => Err(TracingConfigError(format!(
                "failed to validate tracing configuration: {}",
                errors[0]
            ))),
            _ => Err(TracingConfigError(format!(
                "failed to validate tracing configuration: [{}]",
                errors.join(", ")
            ))),
        }
    }

    /// The collector's gRPC target, [`DEFAULT_ENDPOINT`] when none was given.
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_deref().unwrap_or(DEFAULT_ENDPOINT)
    }

    /// The share of requests sampled without a deciding parent, from 0 to 1.
    pub fn sampling_ratio(&self) -> f64 {
        f64::from(
            self.sampling_rate_per_million
                .unwrap_or(0)
                .clamp(0, 1_000_000),
        ) / 1e6
    }

    /// The collector's address as an `http://host:port` URL for a gRPC client: the
    /// endpoint without its `dns:` scheme and DNS authority.
    ///
    /// # Errors
    ///
    /// A `unix` or `unix-abstract` endpoint: upstream dials those, this crate's exporter
    /// does not.
    pub fn collector_url(&self) -> Result<String, TracingConfigError> {
        let endpoint = self.endpoint();
        let target = match endpoint.split_once("://") {
            None => endpoint,
            // `dns:[//authority/]host:port`: the authority names a DNS server.
            Some(("dns", rest)) => rest.split_once('/').map_or(rest, |(_, target)| target),
            Some((scheme, _)) => {
                return Err(TracingConfigError(format!(
                    "tracing endpoint {endpoint:?}: the {scheme} scheme is not supported by \
                     this exporter; give host:port or dns:///host:port"
                )));
            }
        };
        Ok(format!("http://{target}"))
    }

    /// A tracer provider exporting over OTLP/gRPC to [`TracingConfiguration::endpoint`]
    /// in batches, sampling as component-base's `tracing.NewProvider` does
    /// (`ParentBased(TraceIDRatioBased(rate / 1e6))`, never sampling at rate 0), with
    /// `service.name` and `service.instance.id` as the resource. Must be called within a
    /// tokio runtime (the gRPC client's connection runs on it).
    ///
    /// # Errors
    ///
    /// The endpoint cannot be dialled ([`TracingConfiguration::collector_url`]) or the
    /// exporter cannot be built.
    #[cfg(feature = "otlp")]
    pub fn tracer_provider(
        &self,
        service_name: &str,
        service_instance_id: &str,
    ) -> Result<opentelemetry_sdk::trace::SdkTracerProvider, TracingConfigError> {
        use opentelemetry_otlp::WithExportConfig as _;
        use opentelemetry_sdk::trace::Sampler;

        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(self.collector_url()?)
            .build()
            .map_err(|e| TracingConfigError(format!("the OTLP exporter: {e}")))?;
        let ratio = self.sampling_ratio();
        let root = if ratio > 0.0 {
            Sampler::TraceIdRatioBased(ratio)
        } else {
            Sampler::AlwaysOff
        };
        let resource = opentelemetry_sdk::Resource::builder_empty()
            .with_service_name(service_name.to_owned())
            .with_attribute(opentelemetry::KeyValue::new(
                "service.instance.id",
                service_instance_id.to_owned(),
            ))
            .build();
        Ok(opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_sampler(Sampler::ParentBased(Box::new(root)))
            .with_resource(resource)
            .with_batch_exporter(exporter)
            .build())
    }
}

#[cfg(test)]
mod tests {
    use super::TracingConfiguration;

    fn refusal(yaml: &str) -> String {
        TracingConfiguration::from_bytes(yaml.as_bytes())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn fields_are_validated_with_upstreams_messages() {
        let head = "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: TracingConfiguration\n";
        assert_eq!(
            TracingConfiguration::from_bytes(head.as_bytes()).unwrap(),
            TracingConfiguration::default()
        );
        assert_eq!(
            refusal(&format!("{head}samplingRatePerMillion: -1\n")),
            "failed to validate tracing configuration: samplingRatePerMillion: Invalid value: \
             -1: sampling rate must be positive"
        );
        assert_eq!(
            refusal(&format!(
                "{head}endpoint: http://collector:4317\nsamplingRatePerMillion: 1000001\n"
            )),
            "failed to validate tracing configuration: [samplingRatePerMillion: Invalid value: \
             1000001: sampling rate per million must be less than or equal to one million, \
             endpoint: Invalid value: \"http://collector:4317\": unsupported scheme: http.  \
             Options are none, dns, unix, or unix-abstract.  See \
             https://github.com/grpc/grpc/blob/master/doc/naming.md]"
        );
        assert!(
            refusal("apiVersion: audit.k8s.io/v1\nkind: Policy\n")
                .contains("no kind \"Policy\" is registered for version \"audit.k8s.io/v1\""),
        );
        assert!(refusal(&format!("{head}endpointt: x:1\n")).contains("endpointt"));
    }

    #[test]
    fn endpoints_become_grpc_urls() {
        let url = |endpoint: &str| {
            TracingConfiguration {
                endpoint: Some(endpoint.to_owned()),
                sampling_rate_per_million: None,
            }
            .collector_url()
        };
        assert_eq!(
            TracingConfiguration::default().collector_url().unwrap(),
            "http://localhost:4317"
        );
        assert_eq!(url("127.0.0.1:4317").unwrap(), "http://127.0.0.1:4317");
        assert_eq!(
            url("dns:///collector:4317").unwrap(),
            "http://collector:4317"
        );
        assert_eq!(
            url("dns://10.0.0.10/collector:4317").unwrap(),
            "http://collector:4317"
        );
        assert!(
            url("unix:///run/otel.sock")
                .unwrap_err()
                .to_string()
                .contains("unix")
        );
    }

    #[test]
    fn the_rate_is_a_share_of_a_million() {
        let rate = |r| TracingConfiguration {
            endpoint: None,
            sampling_rate_per_million: r,
        };
        assert_eq!(rate(None).sampling_ratio(), 0.0);
        assert_eq!(rate(Some(250_000)).sampling_ratio(), 0.25);
        assert_eq!(rate(Some(1_000_000)).sampling_ratio(), 1.0);
    }
}
