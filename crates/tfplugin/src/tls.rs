//! AutoMTLS: a fresh self-signed server certificate per process, and a client verifier that
//! accepts exactly the certificate Terraform put in PLUGIN_CLIENT_CERT.

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
        ExactClientCert { expected, algorithms: provider.signature_verification_algorithms }
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
            Err(rustls::Error::General("client certificate is not the one Terraform announced".into()))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
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
    params.distinguished_name.push(rcgen::DnType::OrganizationName, "HashiCorp");
    params.distinguished_name.push(rcgen::DnType::CommonName, "localhost");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::DigitalSignature,
        rcgen::KeyUsagePurpose::KeyEncipherment,
        rcgen::KeyUsagePurpose::KeyCertSign,
    ];
    params.extended_key_usages =
        vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth, rcgen::ExtendedKeyUsagePurpose::ServerAuth];
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
    Ok(ServerTls { config: Arc::new(config), cert_der })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn pem(der: &[u8]) -> String {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        let body: Vec<String> = b64.as_bytes().chunks(64).map(|c| String::from_utf8_lossy(c).into_owned()).collect();
        format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n", body.join("\n"))
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
        fn verify_tls12_signature(&self, m: &[u8], c: &CertificateDer<'_>, d: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
            verify_tls12_signature(m, c, d, &self.1)
        }
        fn verify_tls13_signature(&self, m: &[u8], c: &CertificateDer<'_>, d: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
            verify_tls13_signature(m, c, d, &self.1)
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.1.supported_schemes()
        }
    }

    /// A TLS client like Terraform's: trusts the server's own cert, presents its client cert.
    async fn connect(server: &ServerTls, client: Option<(Vec<u8>, Vec<u8>)>) -> Result<Vec<u8>, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let acceptor = tokio_rustls::TlsAcceptor::from(server.config.clone());
        let srv = tokio::spawn(async move {
            let (s, _) = listener.accept().await.map_err(|e| e.to_string())?;
            let mut tls = acceptor.accept(s).await.map_err(|e| e.to_string())?;
            tls.write_all(b"ok").await.map_err(|e| e.to_string())?;
            tls.shutdown().await.map_err(|e| e.to_string())
        });
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = Arc::new(ExactServerCert(server.cert_der.clone(), provider.signature_verification_algorithms));
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
        assert!(connect(&server, Some(other)).await.is_err(), "a different client cert must be refused");
        assert!(connect(&server, None).await.is_err(), "no client cert must be refused");
    }

    #[test]
    fn bad_pem_is_explained() {
        assert!(parse_client_certs("garbage").expect_err("empty").contains("no certificate"));
    }
}
