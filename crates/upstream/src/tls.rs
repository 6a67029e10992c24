//! TLS to the servers of a group: one rustls client configuration per group, built at start-up
//! from the group's `tls` settings (or the defaults `https://` servers get).
//!
//! - **Trust.** The system's roots (read once per process with `rustls-native-certs`, which on
//!   Debian is `/etc/ssl/certs`), or only the CAs of the `ca` file. `insecure_skip_verify`
//!   accepts any certificate but still checks the handshake's signatures, so the connection is
//!   at least bound to the key the server showed.
//! - **Name.** Each server's host, or the group's `server_name`. A DNS name is sent as SNI and
//!   verified; an IP address is not sent (RFC 6066 §3: "Literal IPv4 and IPv6 addresses are not
//!   permitted in HostName") and is verified against the certificate's IP SANs.
//! - **ALPN.** `h2` alone when the group has `http2 = true`, else `http/1.1`. A server that does
//!   not select `h2` when it was asked for fails the connection: RFC 9113 §3.3 allows HTTP/2
//!   over TLS only after ALPN agreed on it, and a server that ignored ALPN may well not speak it.
//! - **Resumption.** The configuration's session store (rustls' in-memory one) is shared by
//!   every connection of the group, so a new connection to a server resumes the last session
//!   (TLS 1.3 tickets, TLS 1.2 tickets or ids) instead of a full handshake.

use std::io;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, WebPkiServerVerifier};
use rustls::crypto::{CryptoProvider, ring};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use sluice_config::{UpstreamAddress, UpstreamTls};

/// Why a group's TLS could not be set up (a file that does not parse, no trust anchors).
#[derive(Debug)]
pub struct TlsSetupError(pub String);

impl std::fmt::Display for TlsSetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsSetupError {}

/// Sessions kept for resumption, per group (rustls' own default).
const RESUMPTION_SESSIONS: usize = 256;

/// What a group's connector needs for TLS: the shared configuration and each peer's name.
#[derive(Clone)]
pub struct UpstreamTlsConnector {
    connector: tokio_rustls::TlsConnector,
    /// Per peer: the name to verify (and send as SNI when it is a DNS name).
    names: Arc<[Option<ServerName<'static>>]>,
    /// ALPN must select `h2`.
    require_h2: bool,
}

impl UpstreamTlsConnector {
    pub fn new(
        tls: &UpstreamTls,
        addresses: &[UpstreamAddress],
        http2: bool,
    ) -> Result<Self, TlsSetupError> {
        let config = client_config(tls, http2)?;
        let configured = tls
            .server_name
            .as_deref()
            .map(|name| {
                ServerName::try_from(name.to_owned())
                    .map_err(|e| TlsSetupError(format!("server_name `{name}`: {e}")))
            })
            .transpose()?;
        let names = addresses
            .iter()
            .map(|address| configured.clone().or_else(|| peer_name(address)))
            .collect();
        Ok(Self {
            connector: tokio_rustls::TlsConnector::from(config),
            names,
            require_h2: http2,
        })
    }

    /// The TLS handshake with peer `index` over `io`.
    pub(crate) async fn handshake<IO>(
        &self,
        index: usize,
        io: IO,
    ) -> io::Result<tokio_rustls::client::TlsStream<IO>>
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        let name = self.names.get(index).cloned().flatten().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "no name to verify this server's certificate against: set the group's tls.server_name",
            )
        })?;
        let stream = self.connector.connect(name, io).await?;
        if self.require_h2 {
            let (_, session) = stream.get_ref();
            if session.alpn_protocol() != Some(b"h2") {
                let chosen = session.alpn_protocol().map_or_else(
                    || "none".to_owned(),
                    |p| String::from_utf8_lossy(p).into_owned(),
                );
                return Err(io::Error::other(format!(
                    "the server did not agree to HTTP/2 over TLS (ALPN offered h2, it chose {chosen}); RFC 9113 §3.3 needs ALPN for h2: set http2 = false for this group, or enable h2 on the server"
                )));
            }
        }
        Ok(stream)
    }
}

/// The host of a `host:port` address as a TLS name: a DNS name or an IP address.
fn peer_name(address: &UpstreamAddress) -> Option<ServerName<'static>> {
    let UpstreamAddress::Tcp(host_port) = address else {
        return None;
    };
    let (host, _port) = host_port.rsplit_once(':')?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    ServerName::try_from(host.to_owned()).ok()
}

/// The group's rustls configuration.
pub fn client_config(tls: &UpstreamTls, http2: bool) -> Result<Arc<ClientConfig>, TlsSetupError> {
    let provider = Arc::new(ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsSetupError(format!("TLS protocol versions: {e}")))?;
    let builder = if tls.insecure_skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoCertificateCheck(provider)))
    } else {
        let roots = match &tls.ca {
            Some(ca) => ca_file(ca)?,
            None => system_roots()?,
        };
        let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| TlsSetupError(format!("certificate verifier: {e}")))?;
        builder.with_webpki_verifier(verifier)
    };
    let mut config = match &tls.client_cert {
        None => builder.with_no_client_auth(),
        Some(files) => {
            let chain = certificates(&files.cert)?;
            let key = PrivateKeyDer::from_pem_file(&files.key)
                .map_err(|e| TlsSetupError(format!("client key {}: {e}", files.key.display())))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| TlsSetupError(format!("client certificate: {e}")))?
        }
    };
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    // Shared by every connection made with this configuration, i.e. by the whole group.
    config.resumption = Resumption::in_memory_sessions(RESUMPTION_SESSIONS);
    Ok(Arc::new(config))
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| TlsSetupError(format!("{}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(TlsSetupError(format!(
            "{}: no PEM certificate in the file",
            path.display()
        )));
    }
    Ok(certs)
}

fn ca_file(path: &Path) -> Result<Arc<RootCertStore>, TlsSetupError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(path)? {
        roots
            .add(cert)
            .map_err(|e| TlsSetupError(format!("CA file {}: {e}", path.display())))?;
    }
    Ok(Arc::new(roots))
}

/// The system's trust store, read once per process: it does not change while we run, and
/// reading a few hundred certificates per group on every reload would be waste. A failure is
/// not kept, so installing the certificates and reloading is enough.
fn system_roots() -> Result<Arc<RootCertStore>, TlsSetupError> {
    static ROOTS: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    if let Some(roots) = ROOTS.get() {
        return Ok(roots.clone());
    }
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    // Certificates the store holds but webpki cannot use are skipped, as browsers do.
    let (_added, _ignored) = roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        let why = found
            .errors
            .first()
            .map_or_else(String::new, |e| format!(" ({e})"));
        return Err(TlsSetupError(format!(
            "no CA certificates found in the system's trust store{why}: install ca-certificates, or set the group's tls.ca"
        )));
    }
    Ok(ROOTS.get_or_init(|| Arc::new(roots)).clone())
}

/// `insecure_skip_verify`: any certificate is accepted, but the handshake signatures are still
/// checked with the provider's algorithms (a server must hold the key of the certificate it
/// shows, whatever that certificate is).
#[derive(Debug)]
struct NoCertificateCheck(Arc<CryptoProvider>);

impl ServerCertVerifier for NoCertificateCheck {
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

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The rustls error behind a failed connection, if TLS is what failed (a certificate the
/// group does not trust, a handshake alert): the proxy counts and logs these apart.
pub fn tls_failure<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(tls) = error.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        // io::Error hides its payload from `source()`; look inside it.
        if let Some(inner) = error
            .downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(inner);
        }
        next = error.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_host_and_ips_stay_ips() {
        let name = |a: &str| peer_name(&UpstreamAddress::Tcp(a.into()));
        assert!(
            matches!(name("api.internal:443"), Some(ServerName::DnsName(d)) if d.as_ref() == "api.internal")
        );
        assert!(matches!(
            name("127.0.0.1:8443"),
            Some(ServerName::IpAddress(_))
        ));
        assert!(matches!(name("[::1]:8443"), Some(ServerName::IpAddress(_))));
        assert!(peer_name(&UpstreamAddress::Unix("/run/a.sock".into())).is_none());
    }

    #[test]
    fn the_system_store_is_found() {
        // The machine has Debian's ca-certificates; without it this says what to install.
        let config = client_config(&UpstreamTls::default(), false);
        assert!(config.is_ok(), "{:?}", config.err());
        assert_eq!(config.unwrap().alpn_protocols, [b"http/1.1".to_vec()]);
        let h2 = client_config(&UpstreamTls::default(), true).unwrap();
        assert_eq!(h2.alpn_protocols, [b"h2".to_vec()]);
    }

    #[test]
    fn a_rustls_error_is_found_inside_io_errors() {
        let rustls_error =
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io_error = io::Error::new(io::ErrorKind::InvalidData, rustls_error.clone());
        assert_eq!(tls_failure(&io_error), Some(&rustls_error));
        let plain = io::Error::new(io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(tls_failure(&plain), None);
    }
}
