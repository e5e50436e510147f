//! The condition message of each cause, in the words of upstream's remote availability
//! controller (`remote_available_controller.go`) and of Go's `net`, `crypto/tls` and
//! `crypto/x509` errors it quotes.

use std::fmt;
use std::time::Duration;

use super::{UnavailableCause, ours};
use crate::transport::{CertificateSummary, ServingCertificateProblem};

impl fmt::Display for UnavailableCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use UnavailableCause as C;
        let head = |f: &mut fmt::Formatter<'_>, url: &str| {
            write!(f, "failing or missing response from {url}: ")
        };
        match self {
            C::Service(e) => write!(f, "{e}"),
            C::BackendClient { message } => write!(f, "{message}"),
            C::ClientCertificateRejected { url, alert, client } => {
                head(f, url)?;
                write!(
                    f,
                    "the extension server refused our client certificate during the TLS handshake (alert {alert}): {}; ",
                    ours(client.as_ref())
                )?;
                match client {
                    Some(c) => write!(
                        f,
                        "the extension server's --requestheader-client-ca-file must contain the CA {:?} that issued it",
                        c.issuer
                    ),
                    None => write!(
                        f,
                        "the extension server's --requestheader-client-ca-file must contain the CA that issued it"
                    ),
                }
            }
            C::FrontProxyIdentityRejected {
                url,
                status,
                client,
            } => {
                head(f, url)?;
                write!(
                    f,
                    "bad status from {url}: {status}: the extension server did not accept the front-proxy identity: "
                )?;
                match client {
                    Some(c) => write!(
                        f,
                        "{}; check that its --requestheader-client-ca-file contains the CA {:?} and that its --requestheader-allowed-names, if set, lists {:?}",
                        ours(Some(c)),
                        c.issuer,
                        c.common_name.as_deref().unwrap_or("")
                    ),
                    None => write!(
                        f,
                        "no proxy client certificate is sent, so it cannot trust the X-Remote-User headers; give the aggregator one (--proxy-client-cert-file and --proxy-client-key-file) issued by a CA in the extension server's --requestheader-client-ca-file"
                    ),
                }
            }
            C::ServingCertificate { url, error } => {
                head(f, url)?;
                let cert = error.certificate.as_ref();
                match error.problem {
                    ServingCertificateProblem::NotValidForName => write!(
                        f,
                        "the serving certificate is not valid for {:?}: it has {}; reissue it with the DNS name {:?} (spec.service as <service>.<namespace>.svc)",
                        error.expected_name,
                        cert.map_or_else(|| "unknown names".to_owned(), CertificateSummary::names),
                        error.expected_name
                    ),
                    ServingCertificateProblem::UnknownAuthority => {
                        let issuer = cert.map_or("", |c| c.issuer.as_str());
                        if error.ca_bundle_subjects.is_empty() {
                            write!(
                                f,
                                "the serving certificate is issued by {issuer:?}, which the platform's trust roots do not contain (the APIService has no spec.caBundle); set spec.caBundle to the CA that issued it"
                            )
                        } else {
                            let subjects: Vec<String> = error
                                .ca_bundle_subjects
                                .iter()
                                .map(|s| format!("{s:?}"))
                                .collect();
                            write!(
                                f,
                                "the serving certificate is issued by {issuer:?}, which is not among the CAs of spec.caBundle [{}]; put the CA that issued it in spec.caBundle",
                                subjects.join(", ")
                            )
                        }
                    }
                    ServingCertificateProblem::Expired => write!(
                        f,
                        "the serving certificate ({}) expired at {} (checked at {}); renew it",
                        cert.map_or_else(String::new, |c| format!("subject {:?}", c.subject)),
                        cert.map_or_else(String::new, CertificateSummary::not_after_rfc3339),
                        humantime::format_rfc3339_seconds(error.verified_at)
                    ),
                    ServingCertificateProblem::NotYetValid => write!(
                        f,
                        "the serving certificate ({}) is not valid before {} (checked at {}); check the clocks of its signer and of this host",
                        cert.map_or_else(String::new, |c| format!("subject {:?}", c.subject)),
                        cert.map_or_else(String::new, CertificateSummary::not_before_rfc3339),
                        humantime::format_rfc3339_seconds(error.verified_at)
                    ),
                    _ => write!(
                        f,
                        "the serving certificate failed verification: {}",
                        error.detail
                    ),
                }
            }
            C::ConnectionRefused { url, address } => {
                head(f, url)?;
                write!(
                    f,
                    "dial tcp {address}: connect: connection refused: nothing listens at {address}; check that the extension server runs and that spec.service.port reaches its port"
                )
            }
            C::ConnectTimeout {
                url,
                address,
                detail,
            } => {
                head(f, url)?;
                write!(
                    f,
                    "{detail}: {address} did not complete the connection in time; check that the endpoint exists and that no network policy drops the traffic"
                )
            }
            C::NameResolutionFailed { url, name, detail } => {
                head(f, url)?;
                write!(f, "{detail}: the name {name:?} did not resolve")
            }
            C::DiscoveryTimeout {
                url,
                elapsed,
                budget,
            } => {
                head(f, url)?;
                write!(
                    f,
                    "Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers): no response in {} (the budget is {}); the extension server is slow or hung",
                    millis(*elapsed),
                    millis(*budget)
                )
            }
            C::GroupVersionNotServed { url } => {
                head(f, url)?;
                let gv = url
                    .split_once("/apis/")
                    .map(|(_, gv)| gv)
                    .or_else(|| url.split_once("/api/").map(|(_, v)| v))
                    .unwrap_or(url);
                write!(
                    f,
                    "bad status from {url}: 404: the extension server does not serve {gv}; check spec.group and spec.version against the APIs it serves, and that spec.service points at the right server"
                )
            }
            C::NotApiResourceList { url, detail } => {
                head(f, url)?;
                write!(
                    f,
                    "the response is not an APIResourceList ({detail}); spec.service may point at a server that is not this API's extension server"
                )
            }
            C::BadStatus { url, status } => {
                head(f, url)?;
                write!(f, "bad status from {url}: {status}")
            }
            C::Unreachable { url, detail } => {
                head(f, url)?;
                write!(f, "Get \"{url}\": {detail}")
            }
        }
    }
}

/// A duration in Go's style, to the millisecond: `5s`, `1.25s`, `800ms`.
pub(super) fn millis(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        let s = format!("{:.3}", d.as_secs_f64());
        format!("{}s", s.trim_end_matches('0'))
    }
}
