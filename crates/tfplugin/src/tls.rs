//! AutoMTLS: a fresh self-signed server certificate per process, and a client verifier that
//! accepts exactly the certificate Terraform put in PLUGIN_CLIENT_CERT.
//!
//! Terraform's client certificate uses an ECDSA P-521 key, which ring cannot verify, so
//! signatures with that scheme are checked with the pure-Rust p521 crate. A TLS client only
//! sends its certificate when the server lists a scheme its key can sign with.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

pub(crate) struct ServerTls {
    pub config: Arc<rustls::ServerConfig>,
    pub cert_der: Vec<u8>,
}

/// Requires the client to present exactly the expected certificate.
#[derive(Debug)]
pub struct ExactClientCert {
    expected: Vec<Vec<u8>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ExactClientCert {
    pub fn new(expected: Vec<Vec<u8>>, provider: &CryptoProvider) -> Self {
        ExactClientCert {
            expected,
            algorithms: provider.signature_verification_algorithms,
        }
    }
}

impl ClientCertVerifier for ExactClientCert {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if self.expected.iter().any(|c| c.as_slice() == end_entity.as_ref()) {
            Ok(ClientCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "client certificate is not the one Terraform announced".into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if dss.scheme == SignatureScheme::ECDSA_NISTP521_SHA512 {
            return verify_p521(cert, message, dss.signature());
        }
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if dss.scheme == SignatureScheme::ECDSA_NISTP521_SHA512 {
            return verify_p521(cert, message, dss.signature());
        }
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        let mut schemes = self.algorithms.supported_schemes();
        schemes.push(SignatureScheme::ECDSA_NISTP521_SHA512);
        schemes
    }
}

fn bad_cert(what: &str) -> rustls::Error {
    rustls::Error::General(format!("client certificate: {what}"))
}

/// Verifies an ECDSA P-521/SHA-512 signature (DER) over `message` with the certificate's key.
fn verify_p521(
    cert: &CertificateDer<'_>,
    message: &[u8],
    signature: &[u8],
) -> Result<HandshakeSignatureValid, rustls::Error> {
    use p521::ecdsa::signature::Verifier as _;
    let point = subject_public_key(cert.as_ref()).ok_or_else(|| bad_cert("cannot find its public key"))?;
    let key = p521::ecdsa::VerifyingKey::from_sec1_bytes(point).map_err(|_| bad_cert("not a P-521 key"))?;
    let sig = p521::ecdsa::Signature::from_der(signature).map_err(|_| bad_cert("malformed P-521 signature"))?;
    key.verify(message, &sig)
        .map_err(|_| bad_cert("P-521 signature does not verify"))?;
    Ok(HandshakeSignatureValid::assertion())
}

/// One DER element: (tag, contents, rest).
fn der_next(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// The subjectPublicKey bits of an X.509 certificate (for EC keys, the SEC1 point).
fn subject_public_key(cert: &[u8]) -> Option<&[u8]> {
    const SEQUENCE: u8 = 0x30;
    let (tag, certificate, _) = der_next(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, tbs, _) = der_next(certificate)?;
    if tag != SEQUENCE {
        return None;
    }
    // version [0] (optional), serial, signature, issuer, validity, subject, then SPKI.
    let mut rest = tbs;
    let (tag, _, after) = der_next(rest)?;
    if tag == 0xa0 {
        rest = after;
    }
    for _ in 0..5 {
        rest = der_next(rest)?.2;
    }
    let (tag, spki, _) = der_next(rest)?;
    if tag != SEQUENCE {
        return None;
    }
    let (_, _, after_alg) = der_next(spki)?;
    let (tag, bits, _) = der_next(after_alg)?;
    // BIT STRING: first byte is the number of unused bits (0 for keys).
    (tag == 0x03 && bits.first() == Some(&0)).then(|| &bits[1..])
}

/// Parses the PEM certificates Terraform passes in PLUGIN_CLIENT_CERT.
pub fn parse_client_certs(pem: &str) -> Result<Vec<Vec<u8>>, String> {
    let certs: Vec<Vec<u8>> = rustls_pemfile::certs(&mut pem.as_bytes())
        .map(|c| c.map(|c| c.as_ref().to_vec()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("PLUGIN_CLIENT_CERT is not valid PEM: {e}"))?;
    if certs.is_empty() {
        return Err("PLUGIN_CLIENT_CERT holds no certificate".into());
    }
    Ok(certs)
}

/// A self-signed certificate for `localhost`, shaped like go-plugin's own (CA bit set, so
/// the client can trust it as its own root), and its PKCS#8 key.
pub fn self_signed() -> Result<(Vec<u8>, Vec<u8>), String> {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|e| e.to_string())?;
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).map_err(|e| e.to_string())?;
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "HashiCorp");
    params.distinguished_name.push(rcgen::DnType::CommonName, "localhost");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::DigitalSignature,
        rcgen::KeyUsagePurpose::KeyEncipherment,
        rcgen::KeyUsagePurpose::KeyCertSign,
    ];
    params.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
    ];
    let now = std::time::SystemTime::now();
    params.not_before = (now - std::time::Duration::from_secs(30)).into();
    params.not_after = (now + std::time::Duration::from_secs(262_800 * 3600)).into();
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    Ok((cert.der().to_vec(), key.serialize_der()))
}

pub(crate) fn server_config(client_cert_pem: &str) -> Result<ServerTls, String> {
    let expected = parse_client_certs(client_cert_pem)?;
    let (cert_der, key_der) = self_signed()?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(ExactClientCert::new(expected, &provider));
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from(cert_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_der)),
        )
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(ServerTls {
        config: Arc::new(config),
        cert_der,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn pem(der: &[u8]) -> String {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        let body: Vec<String> = b64
            .as_bytes()
            .chunks(64)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect();
        format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            body.join("\n")
        )
    }

    /// Trusts exactly one server certificate, as go-plugin's client does with the handshake's.
    #[derive(Debug)]
    struct ExactServerCert(Vec<u8>, WebPkiSupportedAlgorithms);

    impl rustls::client::danger::ServerCertVerifier for ExactServerCert {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            if end_entity.as_ref() == self.0.as_slice() {
                Ok(rustls::client::danger::ServerCertVerified::assertion())
            } else {
                Err(rustls::Error::General("unexpected server cert".into()))
            }
        }
        fn verify_tls12_signature(
            &self,
            m: &[u8],
            c: &CertificateDer<'_>,
            d: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            verify_tls12_signature(m, c, d, &self.1)
        }
        fn verify_tls13_signature(
            &self,
            m: &[u8],
            c: &CertificateDer<'_>,
            d: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            verify_tls13_signature(m, c, d, &self.1)
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.1.supported_schemes()
        }
    }

    /// A TLS client like Terraform's: trusts the server's own cert, presents its client cert.
    async fn connect(server: &ServerTls, client: Option<(Vec<u8>, Vec<u8>)>) -> Result<Vec<u8>, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let acceptor = tokio_rustls::TlsAcceptor::from(server.config.clone());
        let srv = tokio::spawn(async move {
            let (s, _) = listener.accept().await.map_err(|e| e.to_string())?;
            let mut tls = acceptor.accept(s).await.map_err(|e| e.to_string())?;
            tls.write_all(b"ok").await.map_err(|e| e.to_string())?;
            tls.shutdown().await.map_err(|e| e.to_string())
        });
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = Arc::new(ExactServerCert(
            server.cert_der.clone(),
            provider.signature_verification_algorithms,
        ));
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut cfg = match client {
            Some((cert, key)) => builder
                .with_client_auth_cert(
                    vec![CertificateDer::from(cert)],
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
                )
                .map_err(|e| e.to_string())?,
            None => builder.with_no_client_auth(),
        };
        cfg.alpn_protocols = vec![b"h2".to_vec()];
        let connector = tokio_rustls::TlsConnector::from(Arc::new(cfg));
        let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
        let mut tls = connector.connect(name, tcp).await.map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        let read = tls.read_to_end(&mut buf).await.map_err(|e| e.to_string());
        let served = srv.await.map_err(|e| e.to_string())?;
        served?;
        read?;
        Ok(buf)
    }

    #[tokio::test]
    async fn accepts_exactly_the_announced_client_cert() {
        let (client_cert, client_key) = self_signed().expect("client cert");
        let server = server_config(&pem(&client_cert)).expect("server config");
        let got = connect(&server, Some((client_cert, client_key))).await;
        assert_eq!(got, Ok(b"ok".to_vec()));
    }

    #[tokio::test]
    async fn rejects_another_client_cert_or_none() {
        let (announced, _) = self_signed().expect("cert");
        let server = server_config(&pem(&announced)).expect("server config");
        let other = self_signed().expect("other");
        assert!(
            connect(&server, Some(other)).await.is_err(),
            "a different client cert must be refused"
        );
        assert!(connect(&server, None).await.is_err(), "no client cert must be refused");
    }

    #[test]
    fn finds_the_public_key_in_a_certificate() {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        assert_eq!(subject_public_key(cert.der()), Some(key.public_key_raw()));
        assert_eq!(subject_public_key(&[0x30, 0x01]), None);
    }

    #[test]
    fn p521_signatures_verify_and_forgeries_do_not() {
        use p521::ecdsa::signature::{Signer as _, Verifier as _};
        // A fixed, valid P-521 scalar: signing needs no randomness source (RFC 6979).
        let mut secret = [0u8; 66];
        secret[65] = 7;
        let signing = p521::ecdsa::SigningKey::from_slice(&secret).expect("key");
        let verifying = p521::ecdsa::VerifyingKey::from(&signing);
        let sig: p521::ecdsa::Signature = signing.sign(b"handshake transcript");
        let point = verifying.to_encoded_point(false);
        let key = p521::ecdsa::VerifyingKey::from_sec1_bytes(point.as_bytes()).expect("sec1");
        assert!(key.verify(b"handshake transcript", &sig).is_ok());
        assert!(key.verify(b"another transcript", &sig).is_err());
        let der = sig.to_der();
        assert!(p521::ecdsa::Signature::from_der(der.as_bytes()).is_ok());
    }

    #[test]
    fn bad_pem_is_explained() {
        assert!(parse_client_certs("garbage")
            .expect_err("empty")
            .contains("no certificate"));
    }
}
