//! What a certificate says about itself, in the words an operator checks it with:
//! subject, issuer, names, validity and key usages. Read with `x509-parser`; used to
//! describe the proxy client certificate and a serving certificate that failed
//! verification, so that an availability message can name them.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::pki_types::CertificateDer;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::{FromDer, X509Certificate};

/// One certificate's identity, validity and usages, as `openssl x509 -text` would show
/// them (subject and issuer in RFC 4514 order, as Go's `pkix.Name.String` writes them:
/// `CN=front-proxy-client,O=example`).
///
/// ```
/// use kube_aggregator::transport::CertificateSummary;
/// use rustls_pki_types::CertificateDer;
/// use rustls_pki_types::pem::PemObject;
///
/// let key = rcgen::KeyPair::generate().unwrap();
/// let mut params = rcgen::CertificateParams::new(vec!["api.widgets.svc".into()]).unwrap();
/// params.distinguished_name.push(rcgen::DnType::CommonName, "widget-api");
/// let cert = params.self_signed(&key).unwrap();
/// let der = CertificateDer::from_pem_slice(cert.pem().as_bytes()).unwrap();
///
/// let summary = CertificateSummary::from_der(&der).unwrap();
/// assert_eq!(summary.subject, "CN=widget-api");
/// assert_eq!(summary.common_name.as_deref(), Some("widget-api"));
/// assert_eq!(summary.dns_names, ["api.widgets.svc"]);
/// assert_eq!(summary.names(), "DNS names [api.widgets.svc], CN widget-api");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CertificateSummary {
    /// The subject's distinguished name, e.g. `CN=front-proxy-client`.
    pub subject: String,
    /// The subject's first common name, if it has one.
    pub common_name: Option<String>,
    /// The issuer's distinguished name, e.g. `CN=front-proxy-ca`.
    pub issuer: String,
    /// DNS names of the subject alternative name extension, in certificate order.
    pub dns_names: Vec<String>,
    /// IP addresses of the subject alternative name extension, in certificate order.
    pub ip_addresses: Vec<String>,
    /// Start of validity (`notBefore`).
    pub not_before: SystemTime,
    /// End of validity (`notAfter`).
    pub not_after: SystemTime,
    /// The extended key usage allows TLS client authentication (`clientAuth`, or any
    /// usage when the extension is absent, as Go's verifier treats a certificate without
    /// it).
    pub client_auth: bool,
    /// The certificate is a CA (basic constraints `CA:TRUE`).
    pub is_ca: bool,
}

/// The DER does not hold an X.509 certificate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an X.509 certificate: {0}")]
pub struct CertificateParseError(String);

impl CertificateSummary {
    /// Reads `der`.
    ///
    /// # Errors
    ///
    /// [`CertificateParseError`] when `der` is not a DER X.509 certificate.
    pub fn from_der(der: &CertificateDer<'_>) -> Result<CertificateSummary, CertificateParseError> {
        let (_, cert) = X509Certificate::from_der(der.as_ref())
            .map_err(|e| CertificateParseError(e.to_string()))?;
        Ok(CertificateSummary::of(&cert))
    }

    fn of(cert: &X509Certificate<'_>) -> CertificateSummary {
        let mut dns_names = Vec::new();
        let mut ip_addresses = Vec::new();
        let mut client_auth = true;
        let mut is_ca = false;
        for ext in cert.extensions() {
            match ext.parsed_extension() {
                ParsedExtension::SubjectAlternativeName(san) => {
                    for name in &san.general_names {
                        match name {
                            GeneralName::DNSName(n) => dns_names.push((*n).to_owned()),
                            GeneralName::IPAddress(ip) => ip_addresses.push(ip_text(ip)),
                            _ => {}
                        }
                    }
                }
                ParsedExtension::ExtendedKeyUsage(eku) => {
                    client_auth = eku.client_auth || eku.any;
                }
                ParsedExtension::BasicConstraints(bc) => is_ca = bc.ca,
                _ => {}
            }
        }
        let time =
            |t: i64| u64::try_from(t).map_or(UNIX_EPOCH, |s| UNIX_EPOCH + Duration::from_secs(s));
        CertificateSummary {
            subject: rfc4514(cert.subject()),
            common_name: cert
                .subject()
                .iter_common_name()
                .next()
                .and_then(|cn| cn.as_str().ok())
                .map(str::to_owned),
            issuer: rfc4514(cert.issuer()),
            dns_names,
            ip_addresses,
            not_before: time(cert.validity().not_before.timestamp()),
            not_after: time(cert.validity().not_after.timestamp()),
            client_auth,
            is_ca,
        }
    }

    /// The names a client may verify the certificate as, for a message: `DNS names [a,
    /// b], IP addresses [..], CN x`; `no names` when there are none.
    pub fn names(&self) -> String {
        let mut parts = Vec::new();
        if !self.dns_names.is_empty() {
            parts.push(format!("DNS names [{}]", self.dns_names.join(", ")));
        }
        if !self.ip_addresses.is_empty() {
            parts.push(format!("IP addresses [{}]", self.ip_addresses.join(", ")));
        }
        if let Some(cn) = &self.common_name {
            parts.push(format!("CN {cn}"));
        }
        if parts.is_empty() {
            "no names".to_owned()
        } else {
            parts.join(", ")
        }
    }

    /// `notBefore` as RFC 3339 (UTC, seconds).
    pub fn not_before_rfc3339(&self) -> String {
        humantime::format_rfc3339_seconds(self.not_before).to_string()
    }

    /// `notAfter` as RFC 3339 (UTC, seconds).
    pub fn not_after_rfc3339(&self) -> String {
        humantime::format_rfc3339_seconds(self.not_after).to_string()
    }
}

impl fmt::Display for CertificateSummary {
    /// `subject "CN=x" issued by "CN=ca"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "subject {:?} issued by {:?}", self.subject, self.issuer)
    }
}

/// The subjects of the certificates in a PEM bundle, in bundle order; what does not parse
/// is left out.
pub(crate) fn bundle_subjects(pem: &[u8]) -> Vec<String> {
    use rustls_pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .filter_map(|der| CertificateSummary::from_der(&der).ok())
        .map(|s| s.subject)
        .collect()
}

/// A distinguished name most specific first, comma-separated, as Go's
/// `pkix.Name.String` and RFC 4514 write it.
fn rfc4514(name: &x509_parser::x509::X509Name<'_>) -> String {
    let mut rdns: Vec<String> = name
        .iter()
        .map(|rdn| {
            rdn.iter()
                .map(|atv| {
                    let key = x509_parser::objects::oid2abbrev(
                        atv.attr_type(),
                        x509_parser::objects::oid_registry(),
                    )
                    .map_or_else(|_| atv.attr_type().to_id_string(), str::to_owned);
                    let value = atv
                        .as_str()
                        .map_or_else(|_| "<binary>".to_owned(), str::to_owned);
                    format!("{key}={value}")
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    rdns.reverse();
    rdns.join(",")
}

fn ip_text(raw: &[u8]) -> String {
    match raw.len() {
        4 => std::net::Ipv4Addr::from(<[u8; 4]>::try_from(raw).unwrap_or_default()).to_string(),
        16 => std::net::Ipv6Addr::from(<[u8; 16]>::try_from(raw).unwrap_or_default()).to_string(),
        _ => format!("{raw:02x?}"),
    }
}
