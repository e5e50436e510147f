//! A throw-away PKI for the demo and the tests, made with rcgen: a CA per trust domain
//! and the leaf certificates a small cluster needs.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// A CA: its PEM certificate and what it needs to sign.
pub struct Ca {
    /// The CA certificate, PEM.
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

/// A leaf certificate and its key, PEM.
#[derive(Debug, Clone)]
pub struct Leaf {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PEM (PKCS#8).
    pub key_pem: String,
}

impl Ca {
    /// A new self-signed CA named `common_name`.
    pub fn new(common_name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("no SANs is valid");
        params.distinguished_name = dn(common_name, &[]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("key generation");
        let cert = params.self_signed(&key).expect("self-signed CA");
        Ca {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A serving certificate for `sans` (DNS names or IP addresses).
    pub fn server(&self, common_name: &str, sans: &[&str]) -> Leaf {
        self.leaf(common_name, &[], sans, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// [`Ca::server`] valid only from `not_before` to `not_after` (`(year, month, day)`,
    /// midnight UTC): an expired or not-yet-valid certificate.
    pub fn server_valid(
        &self,
        common_name: &str,
        sans: &[&str],
        not_before: (i32, u8, u8),
        not_after: (i32, u8, u8),
    ) -> Leaf {
        let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(sans).expect("valid SANs");
        params.distinguished_name = dn(common_name, &[]);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.not_before = rcgen::date_time_ymd(not_before.0, not_before.1, not_before.2);
        params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
        self.sign(params)
    }

    /// A client certificate: CN = user, O = groups.
    pub fn client(&self, user: &str, groups: &[&str]) -> Leaf {
        self.leaf(user, groups, &[], ExtendedKeyUsagePurpose::ClientAuth)
    }

    fn leaf(&self, cn: &str, orgs: &[&str], sans: &[&str], eku: ExtendedKeyUsagePurpose) -> Leaf {
        let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(sans).expect("valid SANs");
        params.distinguished_name = dn(cn, orgs);
        params.extended_key_usages = vec![eku];
        self.sign(params)
    }

    /// A leaf for `params` (digital signature and key encipherment usages added), signed
    /// by this CA.
    fn sign(&self, mut params: CertificateParams) -> Leaf {
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate().expect("key generation");
        let cert = params.signed_by(&key, &self.issuer).expect("signing");
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

fn dn(cn: &str, orgs: &[&str]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    for o in orgs {
        dn.push(DnType::OrganizationName, *o);
    }
    dn.push(DnType::CommonName, cn);
    dn
}

/// The certificates of `pem`, DER; panics when it does not parse (the PEM is ours).
pub fn certs(pem: &str) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    let parsed = rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes());
    parsed.collect::<Result<_, _>>().expect("PEM certificates")
}

/// The private key of `pem`, DER; panics when it does not parse.
pub fn key(pem: &str) -> rustls::pki_types::PrivateKeyDer<'static> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::PrivateKeyDer::from_pem_slice(pem.as_bytes()).expect("PEM private key")
}

/// rustls' `ring` provider, which the tests and benches build their configs with.
pub fn provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}

impl Leaf {
    /// A TLS server serving this certificate that requires a client certificate issued
    /// by one of `client_cas` (PEM) in the handshake, offering `alpn`: an extension
    /// server in front of which the aggregator must present its proxy identity.
    pub fn server_config(
        &self,
        client_cas: &[&str],
        alpn: &[&[u8]],
    ) -> std::sync::Arc<rustls::ServerConfig> {
        let mut roots = rustls::RootCertStore::empty();
        for ca in client_cas.iter().flat_map(|pem| certs(pem)) {
            roots.add(ca).expect("a client CA is a trust anchor");
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            provider(),
        );
        let verifier = verifier.build().expect("client certificate verifier");
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs(&self.cert_pem), key(&self.key_pem))
            .expect("serving certificate and key");
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        std::sync::Arc::new(config)
    }
}
