//! What a preflight check says of the proxy client certificate before any APIService is
//! dialled: the mistakes that later show as refused handshakes or a 401 from every
//! extension server.

use std::time::{Duration, SystemTime};

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use crate::transport::CertificateSummary;

/// How close to its expiry the proxy client certificate is warned about.
const EXPIRY_WARNING: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// Warnings about the proxy client certificate `cert_pem` (its first certificate) at
/// `now`: it does not parse; it expired, is not valid yet, or expires within 30 days; it
/// lacks the `clientAuth` extended key usage; or, given the front-proxy CA bundle the
/// host publishes to extension servers (`--requestheader-client-ca-file`), none of that
/// bundle's CAs is its issuer (compared by distinguished name), so extension servers
/// that trust that bundle refuse it. Each warning is one sentence naming the values.
///
/// ```
/// use std::time::SystemTime;
/// use kube_aggregator::availability::proxy_certificate_warnings;
///
/// let warnings = proxy_certificate_warnings(b"not PEM", None, SystemTime::now());
/// assert_eq!(warnings, ["the proxy client certificate does not parse: no certificate in PEM"]);
/// ```
pub fn proxy_certificate_warnings(
    cert_pem: &[u8],
    front_proxy_ca_pem: Option<&[u8]>,
    now: SystemTime,
) -> Vec<String> {
    let der: CertificateDer<'static> = match CertificateDer::pem_slice_iter(cert_pem).next() {
        Some(Ok(der)) => der,
        Some(Err(e)) => {
            return vec![format!("the proxy client certificate does not parse: {e}")];
        }
        None => {
            return vec![
                "the proxy client certificate does not parse: no certificate in PEM".into(),
            ];
        }
    };
    let cert = match CertificateSummary::from_der(&der) {
        Ok(c) => c,
        Err(e) => return vec![format!("the proxy client certificate does not parse: {e}")],
    };
    let mut warnings = Vec::new();
    let rfc3339 = |t: SystemTime| humantime::format_rfc3339_seconds(t).to_string();
    if cert.not_after <= now {
        warnings.push(format!(
            "the proxy client certificate ({cert}) expired at {}: extension servers refuse it",
            rfc3339(cert.not_after)
        ));
    } else if cert.not_before > now {
        warnings.push(format!(
            "the proxy client certificate ({cert}) is not valid before {}: extension servers refuse it until then",
            rfc3339(cert.not_before)
        ));
    } else if let Ok(left) = cert.not_after.duration_since(now) {
        if left < EXPIRY_WARNING {
            warnings.push(format!(
                "the proxy client certificate ({cert}) expires at {}, in {} days: rotate it before then",
                rfc3339(cert.not_after),
                left.as_secs() / 86_400
            ));
        }
    }
    if !cert.client_auth {
        warnings.push(format!(
            "the proxy client certificate ({cert}) lacks the clientAuth extended key usage: extension servers refuse it in the handshake"
        ));
    }
    if let Some(bundle) = front_proxy_ca_pem {
        if !issued_by_one_of(&der, &cert, bundle) {
            let listed: Vec<String> = crate::transport::bundle_subjects(bundle)
                .iter()
                .map(|s| format!("{s:?}"))
                .collect();
            warnings.push(format!(
                "the proxy client certificate ({cert}) is not issued by a CA of --requestheader-client-ca-file [{}]: extension servers that trust that bundle refuse it",
                listed.join(", ")
            ));
        }
    }
    warnings
}

/// Whether a CA of the PEM `bundle` signed `der`: its chain verifies against the bundle
/// as roots, at a time within its validity (expiry is warned about on its own), and a
/// failure other than an unknown issuer or a bad signature (a missing `clientAuth`
/// usage, also warned about on its own) does not count against it.
fn issued_by_one_of(
    der: &CertificateDer<'static>,
    cert: &CertificateSummary,
    bundle: &[u8],
) -> bool {
    use rustls::CertificateError as E;
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(bundle).filter_map(Result::ok) {
        let _ = roots.add(ca);
    }
    if roots.is_empty() {
        return false;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let Ok(verifier) =
        rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider).build()
    else {
        return false;
    };
    let within = cert.not_before + Duration::from_secs(1);
    let when = rustls_pki_types::UnixTime::since_unix_epoch(
        within
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default(),
    );
    match verifier.verify_client_cert(der, &[], when) {
        Ok(_) => true,
        Err(rustls::Error::InvalidCertificate(E::UnknownIssuer | E::BadSignature)) => false,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA and a leaf it issued, valid from `from` to `to`, with `eku`.
    fn issued(
        eku: Vec<rcgen::ExtendedKeyUsagePurpose>,
        from: (i32, u8, u8),
        to: (i32, u8, u8),
    ) -> (String, String) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "front-proxy-ca");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let mut leaf = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        leaf.distinguished_name
            .push(rcgen::DnType::CommonName, "front-proxy-client");
        leaf.extended_key_usages = eku;
        leaf.not_before = rcgen::date_time_ymd(from.0, from.1, from.2);
        leaf.not_after = rcgen::date_time_ymd(to.0, to.1, to.2);
        (leaf.signed_by(&key, &issuer).unwrap().pem(), ca_pem)
    }

    fn at(y: i32, m: u8, d: u8) -> SystemTime {
        let t = rcgen::date_time_ymd(y, m, d);
        SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(t.unix_timestamp()).unwrap())
    }

    #[test]
    fn the_mistakes_extension_servers_refuse_are_named() {
        let client = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let (cert, ca) = issued(client.clone(), (2026, 1, 1), (2027, 1, 1));
        let ours = r#"subject "CN=front-proxy-client" issued by "CN=front-proxy-ca""#;
        assert!(
            proxy_certificate_warnings(cert.as_bytes(), Some(ca.as_bytes()), at(2026, 6, 1))
                .is_empty()
        );
        assert_eq!(
            proxy_certificate_warnings(cert.as_bytes(), None, at(2026, 12, 20)),
            [format!(
                "the proxy client certificate ({ours}) expires at 2027-01-01T00:00:00Z, in 12 days: rotate it before then"
            )]
        );
        assert_eq!(
            proxy_certificate_warnings(cert.as_bytes(), None, at(2027, 2, 1)),
            [format!(
                "the proxy client certificate ({ours}) expired at 2027-01-01T00:00:00Z: extension servers refuse it"
            )]
        );
        let (_, other_ca) = issued(client, (2026, 1, 1), (2027, 1, 1));
        let other = String::from_utf8(other_ca.into_bytes()).unwrap();
        let warnings =
            proxy_certificate_warnings(cert.as_bytes(), Some(other.as_bytes()), at(2026, 6, 1));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains(
                r#"is not issued by a CA of --requestheader-client-ca-file ["CN=front-proxy-ca"]"#
            ),
            "{warnings:?}"
        );
        let (server_only, _) = issued(
            vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth],
            (2026, 1, 1),
            (2027, 1, 1),
        );
        assert_eq!(
            proxy_certificate_warnings(server_only.as_bytes(), None, at(2026, 6, 1)),
            [format!(
                "the proxy client certificate ({ours}) lacks the clientAuth extended key usage: extension servers refuse it in the handshake"
            )]
        );
    }
}
