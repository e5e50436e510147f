//! The x509 authenticator against the vectors of apiserver's `x509_test.go` (the chain
//! verifier and the user conversion). Chains are generated with rcgen in the shapes of
//! the upstream fixtures. Subjects rcgen cannot express (an attribute type
//! twice) are made by renaming a second attribute's OID in the DER, which leaves the
//! signature invalid: those certificates only go through the user conversion.

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, DnValue, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose,
};
use x509_parser::prelude::FromDer;

use super::*;
use crate::authn::{RequestHeaderAuthenticator, RequestHeaderConfig};

struct Ca {
    der: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

fn ca(cn: &str, eku: Option<ExtendedKeyUsagePurpose>) -> Ca {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    p.extended_key_usages = eku.into_iter().collect();
    let key = KeyPair::generate().unwrap();
    let cert = p.self_signed(&key).unwrap();
    Ca {
        der: cert.der().clone(),
        issuer: Issuer::new(p, key),
    }
}

fn sub_ca(parent: &Ca, cn: &str) -> Ca {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, &parent.issuer).unwrap();
    Ca {
        der: cert.der().clone(),
        issuer: Issuer::new(p, key),
    }
}

/// A leaf: subject attributes in order, EKU, validity (default: an hour ago to a year on).
fn leaf(
    issuer: &Ca,
    subject: &[(DnType, DnValue)],
    eku: ExtendedKeyUsagePurpose,
) -> CertificateDer<'static> {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    for (t, v) in subject {
        p.distinguished_name.push(t.clone(), v.clone());
    }
    p.extended_key_usages = vec![eku];
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let now = rcgen::date_time_ymd(1970, 1, 1) + since_epoch();
    p.not_before = now - Duration::from_secs(3600);
    p.not_after = now + Duration::from_secs(365 * 86400);
    p.serial_number = Some(rcgen::SerialNumber::from(vec![1]));
    let key = KeyPair::generate().unwrap();
    p.signed_by(&key, &issuer.issuer).unwrap().der().clone()
}

fn since_epoch() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .unwrap()
}

const CENTURY: Duration = Duration::from_secs(100 * 365 * 86400);

fn at(offset: i64) -> UnixTime {
    let now = since_epoch();
    let t = if offset >= 0 {
        now + CENTURY * offset as u32
    } else {
        now.saturating_sub(CENTURY * (-offset) as u32)
    };
    UnixTime::since_unix_epoch(t)
}

fn cn(name: &str) -> (DnType, DnValue) {
    (DnType::CommonName, DnValue::Utf8String(name.into()))
}

fn org(name: &str) -> (DnType, DnValue) {
    (DnType::OrganizationName, DnValue::Utf8String(name.into()))
}

fn uid(value: &str) -> (DnType, DnValue) {
    (
        DnType::CustomDnType(vec![1, 3, 6, 1, 4, 1, 57683, 2]),
        DnValue::Utf8String(value.into()),
    )
}

fn authn(root: &Ca) -> X509Authenticator {
    X509Authenticator::new([root.der.clone()]).unwrap()
}

fn convert(der: &CertificateDer<'static>) -> Result<Option<UserInfo>, AuthenticationError> {
    let (_, cert) = X509Certificate::from_der(der).unwrap();
    user_from_certificate(&cert, der)
}

/// A client certificate from `issuer` whose subject has two CNs (`client_cn2`, then
/// `client_cn`), an organization, a unit and the UID `uid_value`.
fn client_with_uid(issuer: &Ca, uid_value: &str) -> CertificateDer<'static> {
    let subject = [
        (
            DnType::CountryName,
            DnValue::PrintableString("US".try_into().unwrap()),
        ),
        org("My Org"),
        (
            DnType::OrganizationalUnitName,
            DnValue::Utf8String("My Unit".into()),
        ),
        cn("client_cn2"),
        cn("client_cn"),
        uid(uid_value),
    ];
    leaf(issuer, &subject, ExtendedKeyUsagePurpose::ClientAuth)
}

#[test]
fn no_certificates_is_no_opinion() {
    let root = ca("ROOT CA", None);
    assert_eq!(authn(&root).authenticate_chain(&[]), Ok(None));
}

#[test]
fn self_signed_and_server_certificates_fail_verification() {
    let root = ca("ROOT CA", None);
    let other = ca("self1", None);
    let err = authn(&root)
        .authenticate_chain(std::slice::from_ref(&other.der))
        .unwrap_err();
    assert!(
        err.to_string().starts_with("verifying certificate SN="),
        "{err}"
    );
    let server = leaf(
        &root,
        &[cn("127.0.0.1")],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let err = authn(&root).authenticate_chain(&[server]).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("failed: x509: certificate specifies an incompatible key usage"),
        "{err}"
    );
}

#[test]
fn common_name_uid_groups_and_credential_id() {
    let root = ca("ROOT CA", None);
    let der = client_with_uid(&root, "client_id");
    let u = authn(&root)
        .authenticate_chain(std::slice::from_ref(&der))
        .unwrap()
        .unwrap();
    assert_eq!(
        (u.name.as_str(), u.uid.as_str()),
        ("client_cn", "client_id")
    );
    assert_eq!(u.groups, ["My Org"]);
    let digest = ring::digest::digest(&ring::digest::SHA256, &der);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(u.extra[CREDENTIAL_ID_EXTRA], [format!("X509SHA256={hex}")]);
}

/// Replaces the first occurrence of `from` (an encoded OID) with `to` (same length).
fn rename_oid(der: &CertificateDer<'static>, from: &[u8], to: &[u8]) -> CertificateDer<'static> {
    assert_eq!(from.len(), to.len());
    let mut bytes = der.to_vec();
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("OID present");
    bytes[at..at + from.len()].copy_from_slice(to);
    CertificateDer::from(bytes)
}

// DER of OIDs 1.3.6.1.4.1.57683.2 (the UID attribute) and .3 (a stand-in).
const UID_OID: &[u8] = &[
    0x06, 0x09, 0x2b, 0x06, 0x01, 0x04, 0x01, 0x83, 0xc2, 0x53, 0x02,
];
const UID_OID_3: &[u8] = &[
    0x06, 0x09, 0x2b, 0x06, 0x01, 0x04, 0x01, 0x83, 0xc2, 0x53, 0x03,
];

#[test]
fn several_uid_attributes_are_an_error() {
    let root = ca("ROOT CA", None);
    let mut subject = vec![cn("client_cn"), uid("client_uid1")];
    subject.push((
        DnType::CustomDnType(vec![1, 3, 6, 1, 4, 1, 57683, 3]),
        DnValue::Utf8String("client_uid2".into()),
    ));
    let der = leaf(&root, &subject, ExtendedKeyUsagePurpose::ClientAuth);
    // Rename the stand-in attribute (the second one with that prefix) to the UID OID.
    let first = der
        .windows(UID_OID.len())
        .position(|w| w == UID_OID)
        .expect("UID present");
    let mut tail = CertificateDer::from(der[first + UID_OID.len()..].to_vec());
    tail = rename_oid(&tail, UID_OID_3, UID_OID);
    let der = CertificateDer::from([&der[..first + UID_OID.len()], &tail[..]].concat());
    let err = convert(&der).unwrap_err();
    assert_eq!(
        err.to_string(),
        "expected 1 UID, but found multiple: [client_uid1 client_uid2]"
    );
}

#[test]
fn certificate_identifiers_in_the_verification_error() {
    let root = ca("ROOT CA", None);
    // An intermediate CA certificate carries a subject key id (and rcgen adds the issuer's
    // as authority key id); a bare leaf carries neither, printed as empty strings.
    let inter = sub_ca(&root, "INTERMEDIATE");
    let (_, cert) = X509Certificate::from_der(&inter.der).unwrap();
    let text = verification_error(&cert, "r").to_string();
    let rest = text.strip_prefix("verifying certificate SN=").expect(&text);
    let (serial, rest) = rest.split_once(", SKID=").expect(&text);
    assert!(
        serial.chars().all(|c| c.is_ascii_digit()),
        "decimal serial: {text}"
    );
    let (skid, rest) = rest.split_once(", AKID=").expect(&text);
    let (akid, reason) = rest.split_once(" failed: ").expect(&text);
    assert_eq!(reason, "r");
    assert!(!skid.is_empty(), "{text}");
    for id in [skid, akid].into_iter().filter(|id| !id.is_empty()) {
        let hex_pairs = id.split(':').all(|b| {
            b.len() == 2
                && b.chars()
                    .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
        });
        assert!(hex_pairs, "{text}");
    }
    let der = leaf(
        &root,
        &[cn("client_cn")],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let (_, cert) = X509Certificate::from_der(&der).unwrap();
    assert_eq!(
        verification_error(&cert, "r").to_string(),
        "verifying certificate SN=1, SKID=, AKID= failed: r"
    );
}

#[test]
fn empty_and_non_string_uid_are_errors() {
    let root = ca("ROOT CA", None);
    let der = client_with_uid(&root, "");
    let err = authn(&root).authenticate_chain(&[der]).unwrap_err();
    assert_eq!(err.to_string(), "UID cannot be an empty string");
    // A UTF8String whose content is itself a DER UTF8String; retagging the outer value as
    // a SEQUENCE leaves a well-formed attribute whose value is not a string.
    let der = client_with_uid(&root, "\u{c}\u{1}a");
    let mut bytes = der.to_vec();
    let needle = [0x0c, 0x03, 0x0c, 0x01, b'a'];
    let at = bytes.windows(5).position(|w| w == needle).unwrap();
    bytes[at] = 0x30;
    let err = convert(&CertificateDer::from(bytes)).unwrap_err();
    assert_eq!(err.to_string(), "unable to parse UID into a string");
}

#[test]
fn multiple_organizations_are_groups_in_order() {
    // rcgen keeps one value per attribute type; a custom type with the Organization OID
    // (2.5.4.10) adds a second O after the first.
    let root = ca("ROOT CA", None);
    let subject = vec![
        org("My Org"),
        (
            DnType::CustomDnType(vec![2, 5, 4, 10]),
            DnValue::Utf8String("My Org 1".into()),
        ),
        cn("ROOT CA WITH GROUPS"),
    ];
    let der = leaf(&root, &subject, ExtendedKeyUsagePurpose::ClientAuth);
    let u = convert(&der).unwrap().unwrap();
    assert_eq!(u.name, "ROOT CA WITH GROUPS");
    assert_eq!(u.groups, ["My Org", "My Org 1"]);
}

#[test]
fn future_and_expired_certificates_fail() {
    let root = ca("ROOT CA", None);
    let der = leaf(
        &root,
        &[cn("client_cn")],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    for when in [-1, 1] {
        let err = authn(&root)
            .authenticate_chain_at(std::slice::from_ref(&der), at(when))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("x509: certificate has expired or is not yet valid"),
            "{err}"
        );
    }
}

#[test]
fn multi_level_chain_uses_presented_intermediates() {
    let root = ca("Root-CA", None);
    let intermediate = sub_ca(&root, "Intermediate-CA");
    let der = leaf(
        &intermediate,
        &[cn("My Client")],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let chain = [der.clone(), intermediate.der.clone()];
    let u = authn(&root).authenticate_chain(&chain).unwrap().unwrap();
    assert_eq!(u.name, "My Client");
    assert!(u.groups.is_empty());
    assert!(
        authn(&root).authenticate_chain(&[der]).is_err(),
        "no intermediate"
    );
    let err = authn(&root)
        .authenticate_chain_at(&chain, at(1))
        .unwrap_err();
    assert!(err.to_string().contains("expired"), "{err}");
}

#[test]
fn vectors_2_3_verifier() {
    let root = ca("ROOT CA", None);
    let rh = |names: &[&str]| {
        RequestHeaderAuthenticator::new([root.der.clone()], RequestHeaderConfig::default())
            .unwrap()
            .with_allowed_names(names.iter().copied())
    };
    let client = leaf(
        &root,
        &[cn("client_cn")],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let now = UnixTime::now();
    assert_eq!(rh(&[]).verify_proxy(&[], now), Ok(false));
    let other = ca("self1", None);
    assert!(
        rh(&[])
            .verify_proxy(std::slice::from_ref(&other.der), now)
            .is_err()
    );
    let server = leaf(
        &root,
        &[cn("127.0.0.1")],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    assert!(rh(&[]).verify_proxy(&[server], now).is_err());
    assert_eq!(
        rh(&[]).verify_proxy(std::slice::from_ref(&client), now),
        Ok(true)
    );
    let err = rh(&["foo", "bar"])
        .verify_proxy(std::slice::from_ref(&client), now)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "x509: subject with cn=client_cn is not in the allowed list"
    );
    assert_eq!(
        rh(&["client_cn"]).verify_proxy(std::slice::from_ref(&client), now),
        Ok(true)
    );
    assert!(
        rh(&[])
            .verify_proxy(std::slice::from_ref(&client), at(-1))
            .is_err()
    );
    assert!(rh(&[]).verify_proxy(&[client], at(1)).is_err());
    let intermediate = sub_ca(&root, "Intermediate-CA");
    let valid = leaf(
        &intermediate,
        &[cn("My Client")],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let chain = [valid, intermediate.der.clone()];
    assert_eq!(rh(&[]).verify_proxy(&chain, now), Ok(true));
    assert!(rh(&[]).verify_proxy(&chain, at(1)).is_err());
}

#[test]
fn shared_ca_without_allowed_names_is_refused() {
    let root = ca("shared", None);
    let rh = RequestHeaderAuthenticator::new([root.der.clone()], RequestHeaderConfig::default())
        .unwrap();
    let err = rh
        .check_client_ca_overlap(std::slice::from_ref(&root.der))
        .unwrap_err();
    assert!(err.to_string().contains("share the certificate"), "{err}");
    let rh = rh.with_allowed_names(["front-proxy-client"]);
    assert!(
        rh.check_client_ca_overlap(std::slice::from_ref(&root.der))
            .is_ok()
    );
}

/// The remembered verdicts: a chain verified once is not trusted past its leaf's
/// expiry, even within the same minute, and a refused chain stays refused.
#[test]
fn remembered_verdicts_respect_expiry_and_failures() {
    let root = ca("ROOT CA", None);
    let minute_start = since_epoch().as_secs() / 60 * 60;
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, "short-lived");
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    p.not_before = epoch + Duration::from_secs(minute_start - 3600);
    p.not_after = epoch + Duration::from_secs(minute_start + 30);
    let key = KeyPair::generate().unwrap();
    let der = p.signed_by(&key, &root.issuer).unwrap().der().clone();
    let a = authn(&root);
    let chain = std::slice::from_ref(&der);
    let at = |secs: u64| UnixTime::since_unix_epoch(Duration::from_secs(secs));
    assert_eq!(
        a.authenticate_chain_at(chain, at(minute_start + 1))
            .unwrap()
            .unwrap()
            .name,
        "short-lived"
    );
    // Same minute, remembered as good, but the leaf has expired since.
    assert!(
        a.authenticate_chain_at(chain, at(minute_start + 40))
            .is_err()
    );

    let stranger = ca("OTHER CA", None);
    let foreign = leaf(
        &stranger,
        &[cn("mallory")],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    for _ in 0..2 {
        let err = a
            .authenticate_chain(std::slice::from_ref(&foreign))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("certificate signed by unknown authority"),
            "{err}"
        );
    }
}
