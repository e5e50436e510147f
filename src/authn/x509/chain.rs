//! The verification of a presented chain against the client CA, with the verdicts of
//! recent chains remembered, and the CA bundle replaced in place when it is reloaded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls_pki_types::{CertificateDer, UnixTime};
use x509_parser::prelude::{FromDer, X509Certificate};

use super::{InvalidClientCa, go_reason, user_from_certificate, verification_error};
use crate::authn::{AuthenticationError, UserInfo};

/// Verifies presented chains against one CA bundle, ClientAuth EKU required
/// (`x509.DefaultVerifyOptions`).
///
/// Verdicts are remembered for the rest of the current minute, by the presented chain: a client sends the same chain on every request of a connection, and
/// checking its signatures again each time would cost tens of microseconds per request.
/// A remembered success still requires the leaf to be within its validity at `now`, and
/// carries what the authenticators read from the leaf, so it is not parsed again.
///
/// The CA bundle can be replaced at run time ([`ChainVerifier::set_pem`]); remembered
/// verdicts are forgotten then.
#[derive(Clone)]
pub(crate) struct ChainVerifier {
    trust: Arc<arc_swap::ArcSwap<Trust>>,
    verdicts: Arc<Mutex<Verdicts>>,
}

/// One CA bundle: its verifier and the anchors as given.
pub(super) struct Trust {
    verifier: Arc<dyn ClientCertVerifier>,
    /// For the check that the client CA and the request-header CA share no certificate
    /// ([`RequestHeaderAuthenticator::check_client_ca_overlap`](super::RequestHeaderAuthenticator::check_client_ca_overlap)).
    anchors: Arc<[CertificateDer<'static>]>,
}

/// Verdicts of one minute (`minute` = Unix seconds / 60); cleared when the minute changes
/// or when full.
#[derive(Default)]
pub(super) struct Verdicts {
    minute: u64,
    /// Bumped when the CA bundle changes: a verdict reached under an older bundle is not
    /// remembered.
    trust_generation: u64,
    by_chain: HashMap<u64, Remembered>,
}

/// A verdict and the chain it is for (compared whole on lookup, so a key collision is a
/// miss, never a wrong verdict).
pub(super) struct Remembered {
    chain: Box<[CertificateDer<'static>]>,
    verdict: Result<Arc<VerifiedLeaf>, AuthenticationError>,
}

/// What a verified leaf says, read once per chain.
#[derive(Debug)]
pub(crate) struct VerifiedLeaf {
    /// Validity, Unix seconds.
    not_before: i64,
    not_after: i64,
    /// The last subject CN ("" when none or not a string), for allowed-names checks.
    pub(crate) common_name: String,
    /// The x509 user conversion of the leaf.
    pub(crate) user: Result<Option<UserInfo>, AuthenticationError>,
}

/// Verdicts remembered per minute: past it the map is cleared, so a flood of distinct
/// certificates costs memory for at most this many.
pub(super) const MAX_VERDICTS: usize = 4096;

/// A cheap key for a chain: its shape and the leaf's last 64 bytes, which lie in the
/// signature and so differ between certificates. Hashing every byte of the chain (a
/// SHA-256 of 1-3 KB) cost more than the rest of a request's authentication; a lookup
/// compares the remembered chain with the presented one instead.
pub(super) fn chain_key(chain: &[CertificateDer<'static>]) -> u64 {
    use std::hash::Hasher as _;
    let mut h = fnv::FnvHasher::default();
    h.write_usize(chain.len());
    for cert in chain {
        h.write_usize(cert.len());
    }
    if let Some(leaf) = chain.first() {
        h.write(&leaf[leaf.len().saturating_sub(64)..]);
    }
    h.finish()
}

impl std::fmt::Debug for ChainVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainVerifier")
            .field("anchors", &self.trust.load().anchors.len())
            .finish_non_exhaustive()
    }
}

impl Trust {
    /// The verifier for `ca_certificates` (with the client-auth usage checked by
    /// rustls' WebPKI verifier), keeping the anchors for the overlap check.
    ///
    /// # Errors
    ///
    /// [`InvalidClientCa`] for no certificate, or one rustls cannot use as a root.
    fn new(
        ca_certificates: impl IntoIterator<Item = CertificateDer<'static>>,
    ) -> Result<Trust, InvalidClientCa> {
        let mut roots = RootCertStore::empty();
        let mut anchors = Vec::new();
        for cert in ca_certificates {
            roots
                .add(cert.clone())
                .map_err(|e| InvalidClientCa(e.to_string()))?;
            anchors.push(cert);
        }
        if roots.is_empty() {
            return Err(InvalidClientCa("no CA certificates".into()));
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .map_err(|e| InvalidClientCa(e.to_string()))?;
        Ok(Trust {
            verifier,
            anchors: anchors.into(),
        })
    }
}

/// Every certificate of a PEM bundle; an error with upstream's wording when a block does
/// not parse.
pub(super) fn parse_pem(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, InvalidClientCa> {
    use rustls_pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| InvalidClientCa(format!("unable to parse bytes as PEM block: {e}")))
}

impl ChainVerifier {
    pub(crate) fn new(
        ca_certificates: impl IntoIterator<Item = CertificateDer<'static>>,
    ) -> Result<Self, InvalidClientCa> {
        Ok(ChainVerifier {
            trust: Arc::new(arc_swap::ArcSwap::from_pointee(Trust::new(
                ca_certificates,
            )?)),
            verdicts: Arc::default(),
        })
    }

    pub(crate) fn from_pem(pem: &[u8]) -> Result<Self, InvalidClientCa> {
        Self::new(parse_pem(pem)?)
    }

    /// The trust anchors of the current bundle, as given.
    pub(crate) fn anchors(&self) -> Arc<[CertificateDer<'static>]> {
        self.trust.load().anchors.clone()
    }

    /// Trusts the CA certificates of `pem` from now on instead of the current bundle,
    /// which stays when `pem` has no usable certificate; remembered verdicts are dropped.
    pub(crate) fn set_pem(&self, pem: &[u8]) -> Result<(), InvalidClientCa> {
        let trust = Trust::new(parse_pem(pem)?)?;
        let mut v = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
        self.trust.store(Arc::new(trust));
        v.trust_generation += 1;
        v.by_chain.clear();
        Ok(())
    }

    /// Verifies `chain` (leaf first) at `now`; returns what the leaf says, `None` for an
    /// empty chain.
    pub(crate) fn verify(
        &self,
        chain: &[CertificateDer<'static>],
        now: UnixTime,
    ) -> Result<Option<Arc<VerifiedLeaf>>, AuthenticationError> {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Ok(None);
        };
        let minute = now.as_secs() / 60;
        let key = chain_key(chain);
        let (remembered, trust_generation, trust) = {
            let mut v = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
            if v.minute != minute {
                v.minute = minute;
                v.by_chain.clear();
            }
            let remembered = v
                .by_chain
                .get(&key)
                .filter(|r| *r.chain == *chain)
                .map(|r| r.verdict.clone());
            (remembered, v.trust_generation, self.trust.load_full())
        };
        let secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        match remembered {
            Some(Ok(facts)) if facts.not_before <= secs && secs <= facts.not_after => {
                return Ok(Some(facts));
            }
            Some(Err(e)) => return Err(e),
            _ => {}
        }
        let (_, cert) = X509Certificate::from_der(leaf)
            .map_err(|e| AuthenticationError::CertificateParse(e.to_string()))?;
        let verdict = match trust.verifier.verify_client_cert(leaf, intermediates, now) {
            Ok(_) => {
                let common_name = match cert.subject().iter_common_name().last().map(|a| a.as_str())
                {
                    Some(Ok(cn)) => cn.to_owned(),
                    _ => String::new(),
                };
                Ok(Arc::new(VerifiedLeaf {
                    not_before: cert.validity().not_before.timestamp(),
                    not_after: cert.validity().not_after.timestamp(),
                    common_name,
                    user: user_from_certificate(&cert, leaf),
                }))
            }
            Err(e) => Err(verification_error(&cert, &go_reason(&e, now))),
        };
        {
            let mut v = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
            if v.trust_generation == trust_generation {
                if v.by_chain.len() >= MAX_VERDICTS {
                    v.by_chain.clear();
                }
                v.by_chain.insert(
                    key,
                    Remembered {
                        chain: chain.into(),
                        verdict: verdict.clone(),
                    },
                );
            }
        }
        verdict.map(Some)
    }
}
