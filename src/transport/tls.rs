//! rustls client configuration for backends, as kube-aggregator builds its transport:
//! roots from the caBundle (or the platform's), the proxy client certificate, TLS 1.2
//! minimum, verification skipped only when `insecureSkipTLSVerify` says so.
//!
//! The crypto provider is rustls' `ring` provider, for backends and the TLS server alike.
//! The platform's roots are read once per process and shared.

mod serving;

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use rustls::client::ResolvesClientCert;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;

use super::BackendTarget;
use super::certificate::CertificateSummary;

use serving::Diagnosing;
pub(crate) use serving::serving_certificate_error;
pub use serving::{ServingCertificateError, ServingCertificateProblem};

/// The handshake-signature methods of a rustls verifier (`verify_tls12_signature`,
/// `verify_tls13_signature`, `supported_verify_schemes`), checked against the
/// `WebPkiSupportedAlgorithms` that `$algorithms` reaches from `$this` (written `self`).
/// Every verifier here, the server's client-certificate one included, proves possession
/// of the key this way whatever it decides about the chain.
macro_rules! signature_checks {
    ($this:ident => $algorithms:expr) => {
        fn verify_tls12_signature(
            &$this,
            message: &[u8],
            cert: &::rustls::pki_types::CertificateDer<'_>,
            dss: &::rustls::DigitallySignedStruct,
        ) -> Result<::rustls::client::danger::HandshakeSignatureValid, ::rustls::Error> {
            ::rustls::crypto::verify_tls12_signature(message, cert, dss, &$algorithms)
        }

        fn verify_tls13_signature(
            &$this,
            message: &[u8],
            cert: &::rustls::pki_types::CertificateDer<'_>,
            dss: &::rustls::DigitallySignedStruct,
        ) -> Result<::rustls::client::danger::HandshakeSignatureValid, ::rustls::Error> {
            ::rustls::crypto::verify_tls13_signature(message, cert, dss, &$algorithms)
        }

        fn supported_verify_schemes(&$this) -> Vec<::rustls::SignatureScheme> {
            $algorithms.supported_schemes()
        }
    };
}
pub(crate) use signature_checks;

/// The TLS configuration could not be built: what [`client_config`],
/// [`ClientCertificate::from_pem`] and [`ClientCertificate::set_pem`] return. Its text is
/// upstream's where upstream has one, since the proxy answers with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsConfigError {
    /// The caBundle has no certificate or does not parse (upstream: "unable to load root
    /// certificates: unable to parse bytes as PEM block").
    #[error("unable to load root certificates: {0}")]
    RootCertificates(String),
    /// Both a caBundle and insecureSkipTLSVerify.
    #[error("specifying a root certificates file with the insecure flag is not allowed")]
    InsecureWithCa,
    /// The client certificate or key does not parse or does not match.
    #[error("invalid proxy client certificate: {0}")]
    ClientCertificate(String),
}

/// The aggregator's proxy client certificate (`--proxy-client-cert-file` /
/// `--proxy-client-key-file`), shared by every backend's TLS config and swappable at run
/// time: [`ClientCertificate::set_pem`] takes effect on the next handshake, with no
/// transport rebuilt, so a rotated certificate reaches backends before the old one
/// expires.
///
/// Clones share one slot. Backends check it against their `requestheader-client-ca-file`
/// and `requestheader-allowed-names`, so it is what lets them trust the `X-Remote-*`
/// identity headers the proxy sends.
#[derive(Debug, Clone, Default)]
pub struct ClientCertificate {
    current: Arc<ArcSwapOption<CertifiedKey>>,
    /// The current chain as a TLS server would record it, for in-process backends.
    chain: Arc<ArcSwapOption<Arc<[CertificateDer<'static>]>>>,
    /// Bumped by every [`ClientCertificate::set_pem`]: pooled connections made with an
    /// older certificate are drained instead of reused.
    generation: Arc<std::sync::atomic::AtomicU64>,
}

impl ClientCertificate {
    /// No client certificate (backends that require one will refuse the handshake; most
    /// extension servers then answer 401 or 403 instead, trusting no identity header).
    pub fn none() -> ClientCertificate {
        ClientCertificate::default()
    }

    /// A client certificate from a PEM chain (leaf first) and a PEM private key (PKCS#8,
    /// PKCS#1 or SEC1).
    ///
    /// # Errors
    ///
    /// [`TlsConfigError::ClientCertificate`] when the chain holds no certificate, the key
    /// does not parse or is of an unsupported type, or the key does not match the leaf.
    ///
    /// ```
    /// use kube_aggregator::transport::{ClientCertificate, TlsConfigError};
    ///
    /// let key = rcgen::KeyPair::generate().unwrap();
    /// let cert = rcgen::CertificateParams::new(vec!["front-proxy-client".into()]).unwrap()
    ///     .self_signed(&key).unwrap();
    /// let proxy = ClientCertificate::from_pem(cert.pem().as_bytes(), key.serialize_pem().as_bytes()).unwrap();
    ///
    /// // A rotation with a key that is not the certificate's is refused; the old pair stays.
    /// let other = rcgen::KeyPair::generate().unwrap();
    /// let err = proxy.set_pem(cert.pem().as_bytes(), other.serialize_pem().as_bytes()).unwrap_err();
    /// assert!(matches!(err, TlsConfigError::ClientCertificate(_)));
    /// assert!(ClientCertificate::from_pem(b"", b"").is_err());
    /// ```
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<ClientCertificate, TlsConfigError> {
        let c = ClientCertificate::default();
        c.set_pem(cert_pem, key_pem)?;
        Ok(c)
    }

    /// Replaces the certificate; in-flight connections keep the old one, pooled ones made
    /// with it take no new requests, and TLS sessions resumed from before are forgotten.
    ///
    /// # Errors
    ///
    /// As [`ClientCertificate::from_pem`]; the current certificate is kept on error.
    pub fn set_pem(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<(), TlsConfigError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|e| TlsConfigError::ClientCertificate(format!("certificate: {e}")))?;
        if chain.is_empty() {
            return Err(TlsConfigError::ClientCertificate(
                "no certificate in PEM".into(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| TlsConfigError::ClientCertificate(format!("private key: {e}")))?;
        let provider = provider();
        let signing_key = provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| TlsConfigError::ClientCertificate(e.to_string()))?;
        let shared: Arc<[CertificateDer<'static>]> = Arc::from(chain.as_slice());
        let certified = CertifiedKey::new(chain, signing_key);
        certified
            .keys_match()
            .map_err(|e| TlsConfigError::ClientCertificate(e.to_string()))?;
        self.current.store(Some(Arc::new(certified)));
        self.chain.store(Some(Arc::new(shared)));
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(())
    }

    /// The current certificate chain, leaf first; `None` when there is none.
    pub(crate) fn chain(&self) -> Option<Arc<[CertificateDer<'static>]>> {
        self.chain.load().as_ref().map(|c| (**c).clone())
    }

    /// What the current certificate (the chain's leaf) says: subject, issuer, validity,
    /// usages. `None` when there is none or it does not parse.
    pub fn summary(&self) -> Option<CertificateSummary> {
        let chain = self.chain()?;
        CertificateSummary::from_der(chain.first()?).ok()
    }

    /// How many times the certificate was set; connections remember it from their
    /// handshake.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// rustls asks this on every handshake that requests a client certificate, so a
/// rotation reaches the next connection without rebuilding any `ClientConfig`.
impl ResolvesClientCert for ClientCertificate {
    fn resolve(&self, _hints: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        self.current.load_full()
    }

    fn has_certs(&self) -> bool {
        self.current.load().is_some()
    }
}

/// The crypto provider of every TLS config the crate builds, client and server: rustls'
/// `ring` provider, the only one enabled. rustls' own default, `aws-lc-rs`, was no
/// cheaper per proxied request even on a CPU with AVX-512 (`benches/load/README.md`,
/// "rustls's providers"), and needs a C build.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The rustls `ClientConfig` for `target`, offering `alpn` (e.g. `h2`, `http/1.1`).
///
/// The returned config verifies the serving certificate against the caBundle, or the
/// platform's trust roots when the bundle is empty (as upstream falls back to the system
/// pool), presents `client_cert`, and allows TLS 1.2 and 1.3. The name it is verified
/// against is the one the caller connects with (the target's `server_name` in
/// [`RustlsTransport`](crate::transport::RustlsTransport)). TLS 1.3 session tickets are
/// kept per client certificate, so a resumed session never presents a replaced one.
///
/// # Errors
///
/// - [`TlsConfigError::InsecureWithCa`] for `insecure_skip_tls_verify` with a non-empty
///   `ca_bundle`;
/// - [`TlsConfigError::RootCertificates`] (`unable to load root certificates: unable to
///   parse bytes as PEM block`) when the bundle holds no certificate or one that does not
///   parse.
pub fn client_config(
    target: &BackendTarget,
    client_cert: &ClientCertificate,
    alpn: &[&[u8]],
) -> Result<Arc<ClientConfig>, TlsConfigError> {
    if target.insecure_skip_tls_verify && !target.ca_bundle.is_empty() {
        return Err(TlsConfigError::InsecureWithCa);
    }
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsConfigError::RootCertificates(e.to_string()))?;
    let builder = if target.insecure_skip_tls_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
    } else {
        let mut roots = RootCertStore::empty();
        if target.ca_bundle.is_empty() {
            roots = platform_roots().clone();
        } else {
            let certs: Vec<CertificateDer<'static>> =
                CertificateDer::pem_slice_iter(&target.ca_bundle)
                    .collect::<Result<_, _>>()
                    .map_err(|_| {
                        TlsConfigError::RootCertificates(
                            "unable to parse bytes as PEM block".into(),
                        )
                    })?;
            if certs.is_empty() {
                return Err(TlsConfigError::RootCertificates(
                    "unable to parse bytes as PEM block".into(),
                ));
            }
            for c in certs {
                roots
                    .add(c)
                    .map_err(|e| TlsConfigError::RootCertificates(e.to_string()))?;
            }
        }
        let ca_subjects = if target.ca_bundle.is_empty() {
            Vec::new()
        } else {
            super::certificate::bundle_subjects(&target.ca_bundle)
        };
        let verifier =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| TlsConfigError::RootCertificates(e.to_string()))?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Diagnosing {
                inner: verifier,
                algorithms: provider.signature_verification_algorithms,
                ca_subjects,
            }))
    };
    let mut config = builder.with_client_cert_resolver(Arc::new(client_cert.clone()));
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config.resumption = rustls::client::Resumption::store(Arc::new(SessionsPerCertificate {
        cert: client_cert.clone(),
        current: std::sync::Mutex::new((client_cert.generation(), new_session_cache())),
    }));
    Ok(Arc::new(config))
}

/// rustls' default session cache size.
fn new_session_cache() -> Arc<rustls::client::ClientSessionMemoryCache> {
    Arc::new(rustls::client::ClientSessionMemoryCache::new(256))
}

/// TLS session tickets of the current proxy client certificate only. A resumed TLS 1.3
/// session carries the certificate of the handshake it resumes, so after a rotation a new
/// connection must not resume an old session: the backend would see the old certificate,
/// until it expired. Sessions are forgotten when the certificate changes.
#[derive(Debug)]
struct SessionsPerCertificate {
    cert: ClientCertificate,
    current: std::sync::Mutex<(u64, Arc<rustls::client::ClientSessionMemoryCache>)>,
}

impl SessionsPerCertificate {
    /// The session cache of the current certificate, started afresh (the old one
    /// dropped) the first time it is asked for after a rotation.
    fn cache(&self) -> Arc<rustls::client::ClientSessionMemoryCache> {
        let generation = self.cert.generation();
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.0 != generation {
            *current = (generation, new_session_cache());
        }
        current.1.clone()
    }
}

impl rustls::client::ClientSessionStore for SessionsPerCertificate {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: rustls::NamedGroup) {
        self.cache().set_kx_hint(server_name, group);
    }

    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<rustls::NamedGroup> {
        self.cache().kx_hint(server_name)
    }

    fn set_tls12_session(
        &self,
        server_name: ServerName<'static>,
        value: rustls::client::Tls12ClientSessionValue,
    ) {
        self.cache().set_tls12_session(server_name, value);
    }

    fn tls12_session(
        &self,
        server_name: &ServerName<'_>,
    ) -> Option<rustls::client::Tls12ClientSessionValue> {
        self.cache().tls12_session(server_name)
    }

    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.cache().remove_tls12_session(server_name);
    }

    fn insert_tls13_ticket(
        &self,
        server_name: ServerName<'static>,
        value: rustls::client::Tls13ClientSessionValue,
    ) {
        self.cache().insert_tls13_ticket(server_name, value);
    }

    fn take_tls13_ticket(
        &self,
        server_name: &ServerName<'static>,
    ) -> Option<rustls::client::Tls13ClientSessionValue> {
        self.cache().take_tls13_ticket(server_name)
    }
}

/// `insecureSkipTLSVerify`: accepts any serving certificate but still checks the
/// handshake signature, so the session key belongs to whoever sent the certificate.
#[derive(Debug)]
struct NoVerify(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    signature_checks!(self => self.0.signature_verification_algorithms);
}

/// The platform's trust roots, loaded once (`rustls-native-certs`); unreadable ones are skipped.
fn platform_roots() -> &'static RootCertStore {
    static ROOTS: std::sync::OnceLock<RootCertStore> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut roots = RootCertStore::empty();
        let loaded = rustls_native_certs::load_native_certs();
        let (added, _ignored) = roots.add_parsable_certificates(loaded.certs);
        tracing::debug!(added, "loaded platform trust roots");
        roots
    })
}
