//! Why an APIService is unavailable, typed: what an availability check or a proxied
//! request found, with the values an operator needs to fix it.
//!
//! Upstream kube-aggregator reports almost every failure as `FailedDiscoveryCheck` with
//! the Go error text (`failing or missing response from <url>: ...`). The condition's
//! `reason` stays upstream's (so alerts and tools keep working); the message begins as
//! upstream's and goes on to say what is wrong and which setting to change.

mod message;

use std::time::Duration;

use crate::apiservice::ServiceReference;
use crate::availability::ResolveError;
use crate::transport::{
    CertificateSummary, ConnectError, ServingCertificateError, ServingCertificateProblem,
};

/// The cause of a failed availability check or of a passive flip (a proxied request that
/// found the backend unreachable).
///
/// [`UnavailableCause::reason`] is the condition reason upstream writes,
/// [`UnavailableCause::name`] the cause's own name (the `cause` label of
/// `aggregator_unavailable_apiservice_cause_total`), and `Display` the condition message.
/// [`UnavailableCause::is_soft`] tells a failure that may pass by itself (a timeout, a
/// 5xx: the APIService is degraded first) from one that needs a change (a refused
/// connection, a certificate, a 401: unavailable at once).
///
/// ```
/// use kube_aggregator::availability::UnavailableCause;
///
/// let cause = UnavailableCause::from_status("https://10.0.0.5:443/apis/metrics.k8s.io/v1beta1", 404, None);
/// assert_eq!((cause.reason(), cause.name()), ("FailedDiscoveryCheck", "GroupVersionNotServed"));
/// assert!(!cause.is_soft());
/// assert!(cause.to_string().starts_with("failing or missing response from https://10.0.0.5:443/apis/metrics.k8s.io/v1beta1: bad status from"));
/// assert!(cause.to_string().contains("does not serve metrics.k8s.io/v1beta1"));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum UnavailableCause {
    /// The Service did not resolve (upstream's `ServiceNotFound`, `ServicePortError`,
    /// `EndpointsNotFound`, `MissingEndpoints`, `ServiceAccessError`).
    Service(ResolveError),
    /// No backend client could be built for the APIService (a `caBundle` that is not PEM,
    /// `caBundle` with `insecureSkipTLSVerify`): the transport's error text.
    BackendClient {
        /// The transport's error text (upstream's).
        message: String,
    },
    /// The backend sent a TLS alert about our client certificate (`bad_certificate`,
    /// `unknown_ca`, `certificate_required`, ...): it does not trust the proxy client
    /// certificate's issuer, or got none.
    ClientCertificateRejected {
        /// The discovery URL checked.
        url: String,
        /// The alert, in the TLS specification's words (`unknown_ca`).
        alert: String,
        /// Our proxy client certificate, when the transport knows it.
        client: Option<CertificateSummary>,
    },
    /// The backend answered 401 or 403 to the discovery request made as
    /// `system:kube-aggregator` with the proxy client certificate: it did not accept the
    /// front-proxy identity.
    FrontProxyIdentityRejected {
        /// The discovery URL checked.
        url: String,
        /// 401 or 403.
        status: u16,
        /// Our proxy client certificate, when the transport knows it.
        client: Option<CertificateSummary>,
    },
    /// Our verification of the backend's serving certificate failed.
    ServingCertificate {
        /// The discovery URL checked.
        url: String,
        /// What failed and the values.
        error: ServingCertificateError,
    },
    /// The TCP connection was refused: nothing listens at the address.
    ConnectionRefused {
        /// The discovery URL checked (or the request's group-version URL).
        url: String,
        /// The address dialled.
        address: String,
    },
    /// The TCP connection or the TLS handshake did not complete within the transport's
    /// timeout.
    ConnectTimeout {
        /// The discovery URL checked.
        url: String,
        /// The address dialled.
        address: String,
        /// The transport's words (`dial tcp ...: i/o timeout`, `net/http: TLS handshake
        /// timeout`).
        detail: String,
    },
    /// The backend's host name did not resolve.
    NameResolutionFailed {
        /// The discovery URL checked.
        url: String,
        /// The host name looked up.
        name: String,
        /// The resolver's words.
        detail: String,
    },
    /// The discovery request got no response within the check's budget.
    DiscoveryTimeout {
        /// The discovery URL checked.
        url: String,
        /// How long the check waited.
        elapsed: Duration,
        /// The budget ([`AvailabilityConfig::probe_timeout`](super::AvailabilityConfig::probe_timeout)).
        budget: Duration,
    },
    /// The backend answered 404: it does not serve the APIService's group-version.
    GroupVersionNotServed {
        /// The discovery URL checked.
        url: String,
    },
    /// The backend answered 2xx with something that is not an `APIResourceList`.
    NotApiResourceList {
        /// The discovery URL checked.
        url: String,
        /// What came instead (`kind "Status"`, `not JSON: ...`, `Content-Type text/html`).
        detail: String,
    },
    /// Another non-2xx status (5xx, 429, a redirect, 304).
    BadStatus {
        /// The discovery URL checked.
        url: String,
        /// The status code.
        status: u16,
    },
    /// Any other failure to get a response; the error chain's text, as upstream writes it.
    Unreachable {
        /// The discovery URL checked.
        url: String,
        /// The error chain.
        detail: String,
    },
}

impl UnavailableCause {
    /// The cause of a response with `status` (not 2xx) to the discovery request at `url`;
    /// `client` names our proxy client certificate in a 401/403's message.
    pub fn from_status(
        url: &str,
        status: u16,
        client: Option<CertificateSummary>,
    ) -> UnavailableCause {
        let url = url.to_owned();
        match status {
            401 | 403 => UnavailableCause::FrontProxyIdentityRejected {
                url,
                status,
                client,
            },
            404 => UnavailableCause::GroupVersionNotServed { url },
            _ => UnavailableCause::BadStatus { url, status },
        }
    }

    /// The cause of `err`, the error of a request to `url` that got no response at all,
    /// dialled at `address`. Looks through the error's source chain for a
    /// [`ConnectError`], a [`ServingCertificateError`], a TLS alert and the I/O error.
    pub fn from_error(
        url: &str,
        address: &str,
        err: &(dyn std::error::Error + 'static),
        client: Option<CertificateSummary>,
    ) -> UnavailableCause {
        let url = url.to_owned();
        let address = address.to_owned();
        let sources: Vec<&(dyn std::error::Error + 'static)> =
            crate::transport::error_sources(err).collect();
        if let Some(e) = sources
            .iter()
            .find_map(|e| e.downcast_ref::<ServingCertificateError>())
        {
            return UnavailableCause::ServingCertificate {
                url,
                error: e.clone(),
            };
        }
        if let Some(e) = crate::transport::serving_certificate_error(err) {
            return UnavailableCause::ServingCertificate { url, error: e };
        }
        let detail = crate::status::error_chain(err);
        let alert = match crate::transport::find_rustls_error(err) {
            Some(rustls::Error::AlertReceived(alert)) => certificate_alert(*alert),
            // Over HTTP/2 an alert that arrives after the handshake (TLS 1.3 servers check
            // the client certificate then) reaches us as text only: h2 keeps a connection's
            // I/O error as its kind and message for every stream.
            _ => alert_in_text(&detail),
        };
        if let Some(alert) = alert {
            return UnavailableCause::ClientCertificateRejected {
                url,
                alert: alert.to_owned(),
                client,
            };
        }
        let connect = sources
            .iter()
            .find_map(|e| e.downcast_ref::<ConnectError>());
        if connect.is_some() {
            let io_kind = sources
                .iter()
                .find_map(|e| e.downcast_ref::<std::io::Error>())
                .map(std::io::Error::kind);
            if io_kind == Some(std::io::ErrorKind::ConnectionRefused) {
                return UnavailableCause::ConnectionRefused { url, address };
            }
            if detail.contains("dns error") || detail.contains("failed to lookup address") {
                let name = address
                    .rsplit_once(':')
                    .map_or(address.as_str(), |(host, _)| host)
                    .to_owned();
                return UnavailableCause::NameResolutionFailed { url, name, detail };
            }
            if io_kind == Some(std::io::ErrorKind::TimedOut)
                || detail.contains("timeout")
                || detail.contains("timed out")
            {
                return UnavailableCause::ConnectTimeout {
                    url,
                    address,
                    detail,
                };
            }
        }
        UnavailableCause::Unreachable { url, detail }
    }

    /// The cause of a failed resolution: a Service name that did not resolve is
    /// [`UnavailableCause::NameResolutionFailed`] (upstream fails the same way when it
    /// dials the name), with the group-version URL the check would have asked; every
    /// other resolver failure is [`UnavailableCause::Service`].
    pub(crate) fn of_resolve_error(
        e: ResolveError,
        service: &ServiceReference,
        gv_path: &str,
    ) -> UnavailableCause {
        match e {
            ResolveError::NameResolutionFailed { host, detail, .. } => {
                let port = service.port_or_default();
                UnavailableCause::NameResolutionFailed {
                    url: format!("https://{host}:{port}{gv_path}"),
                    name: host,
                    detail,
                }
            }
            e => UnavailableCause::Service(e),
        }
    }

    /// The condition reason upstream writes for it: the resolver's for
    /// [`UnavailableCause::Service`], `FailedDiscoveryCheck` for every other.
    pub fn reason(&self) -> &'static str {
        match self {
            UnavailableCause::Service(e) => e.reason(),
            _ => "FailedDiscoveryCheck",
        }
    }

    /// The cause's name, one CamelCase word: the `cause` label of the metrics and what
    /// the gateway's `check` prints (`ClientCertificateRejected`,
    /// `FrontProxyIdentityRejected`, `ServingCertificateNotValidForName`, ...; a
    /// resolver failure is named by its reason).
    pub fn name(&self) -> &'static str {
        match self {
            UnavailableCause::Service(e) => e.reason(),
            UnavailableCause::BackendClient { .. } => "InvalidBackendConfig",
            UnavailableCause::ClientCertificateRejected { .. } => "ClientCertificateRejected",
            UnavailableCause::FrontProxyIdentityRejected { .. } => "FrontProxyIdentityRejected",
            UnavailableCause::ServingCertificate { error, .. } => match error.problem {
                ServingCertificateProblem::NotValidForName => "ServingCertificateNotValidForName",
                ServingCertificateProblem::UnknownAuthority => "ServingCertificateUnknownAuthority",
                ServingCertificateProblem::Expired => "ServingCertificateExpired",
                ServingCertificateProblem::NotYetValid => "ServingCertificateNotYetValid",
                _ => "ServingCertificateInvalid",
            },
            UnavailableCause::ConnectionRefused { .. } => "ConnectionRefused",
            UnavailableCause::ConnectTimeout { .. } => "ConnectTimeout",
            UnavailableCause::NameResolutionFailed { .. } => "NameResolutionFailed",
            UnavailableCause::DiscoveryTimeout { .. } => "DiscoveryTimeout",
            UnavailableCause::GroupVersionNotServed { .. } => "GroupVersionNotServed",
            UnavailableCause::NotApiResourceList { .. } => "NotAPIResourceList",
            UnavailableCause::BadStatus { .. } => "BadStatus",
            UnavailableCause::Unreachable { .. } => "Unreachable",
        }
    }

    /// True for a failure that may pass without a change (the check timed out, a 5xx or
    /// 429): the APIService is first degraded and turns unavailable only when it repeats
    /// ([`AvailabilityConfig::soft_failure_threshold`](super::AvailabilityConfig::soft_failure_threshold)).
    /// Everything else (refused connections, certificates, 401/403, 404, a wrong body, a
    /// resolver failure) is hard and turns it unavailable at once.
    pub fn is_soft(&self) -> bool {
        match self {
            UnavailableCause::DiscoveryTimeout { .. } => true,
            UnavailableCause::BadStatus { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }

    /// True when the condition is `Unknown` rather than `False` (upstream: the Service
    /// lookup itself failed).
    pub fn is_unknown(&self) -> bool {
        matches!(self, UnavailableCause::Service(e) if e.is_unknown())
    }
}

/// The TLS alerts a server sends about the client's certificate, by their names in the
/// TLS specification; `None` for the others.
fn certificate_alert(alert: rustls::AlertDescription) -> Option<&'static str> {
    use rustls::AlertDescription as A;
    Some(match alert {
        A::BadCertificate => "bad_certificate",
        A::UnsupportedCertificate => "unsupported_certificate",
        A::CertificateRevoked => "certificate_revoked",
        A::CertificateExpired => "certificate_expired",
        A::CertificateUnknown => "certificate_unknown",
        A::UnknownCA => "unknown_ca",
        A::AccessDenied => "access_denied",
        A::CertificateRequired => "certificate_required",
        _ => return None,
    })
}

/// The certificate alert named in rustls' text of a received alert (`received fatal
/// alert: UnknownCA`), in the TLS specification's words; `None` for the others.
fn alert_in_text(text: &str) -> Option<&'static str> {
    use rustls::AlertDescription as A;
    let (_, rest) = text.split_once("received fatal alert: ")?;
    let name: String = rest
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    [
        A::BadCertificate,
        A::UnsupportedCertificate,
        A::CertificateRevoked,
        A::CertificateExpired,
        A::CertificateUnknown,
        A::UnknownCA,
        A::AccessDenied,
        A::CertificateRequired,
    ]
    .into_iter()
    .find(|a| format!("{a:?}") == name)
    .and_then(certificate_alert)
}

/// `subject "..." issued by "..."` of our certificate, or that there is none.
fn ours(client: Option<&CertificateSummary>) -> String {
    match client {
        Some(c) => format!("the proxy client certificate has {c}"),
        None => {
            "the aggregator sent no client certificate (see --proxy-client-cert-file)".to_owned()
        }
    }
}
