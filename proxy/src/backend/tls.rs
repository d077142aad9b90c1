//! TLS to backends: the backend connection as plain TCP or TLS (one type for the packet layer),
//! and the rustls client configurations of the three modes (`off`, `required`, `verify_ca`).

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::config::BackendTls;
use crate::wire::packet::IdleProbe;
use crate::wire::tls::MaybeTls;

/// A connection to a backend: plain, or TLS after the SSL request of the handshake.
pub type BackendStream = MaybeTls<TlsStream<TlsSocket>>;

impl BackendStream {
    /// The connection with its socket registered with the event loop of the calling thread
    /// (deregistered from the one it was on). A socket is woken through the loop it is
    /// registered with: a session on another core would be woken through that core's thread
    /// for every response. A TLS stream keeps its session; its socket moves under it.
    pub fn rehome(self) -> io::Result<BackendStream> {
        match self {
            BackendStream::Plain(s) => Ok(BackendStream::Plain(moved(s)?)),
            BackendStream::Tls(mut s) => {
                s.get_mut().0.rehome()?;
                Ok(BackendStream::Tls(s))
            }
            BackendStream::Detached => Ok(BackendStream::Detached),
        }
    }
}

/// `socket` deregistered from its event loop and registered with the calling thread's.
fn moved(socket: TcpStream) -> io::Result<TcpStream> {
    TcpStream::from_std(socket.into_std()?)
}

/// The TCP socket under a TLS stream. tokio-rustls keeps the socket it was given for the life
/// of the stream (there is no way to rebuild one around another socket), so a move to another
/// core's event loop happens in here, in place. Empty only after such a move failed: then
/// every read and write fails, and the pool closes the connection.
pub struct TlsSocket(Option<TcpStream>);

impl TlsSocket {
    pub fn new(socket: TcpStream) -> TlsSocket {
        TlsSocket(Some(socket))
    }

    fn rehome(&mut self) -> io::Result<()> {
        let socket = self.0.take().ok_or_else(gone)?;
        self.0 = Some(moved(socket)?);
        Ok(())
    }

    /// `op` on the socket, or the error of one lost in a move.
    fn with<T>(
        self: Pin<&mut Self>,
        op: impl FnOnce(Pin<&mut TcpStream>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match self.get_mut().0.as_mut() {
            Some(s) => op(Pin::new(s)),
            None => Poll::Ready(Err(gone())),
        }
    }
}

fn gone() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        "the backend socket was lost moving to another core",
    )
}

impl AsyncRead for TlsSocket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.with(|s| s.poll_read(cx, buf))
    }
}

impl AsyncWrite for TlsSocket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.with(|s| s.poll_write(cx, buf))
    }

    // rustls hands its records over as one vectored write.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.with(|s| s.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.with(|s| s.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.with(|s| s.poll_shutdown(cx))
    }
}

impl IdleProbe for BackendStream {
    fn closed_or_spoke(&mut self) -> bool {
        match self {
            BackendStream::Plain(s) => s.closed_or_spoke(),
            BackendStream::Tls(s) => {
                let mut cx = Context::from_waker(std::task::Waker::noop());
                let Some(socket) = s.get_ref().0.0.as_ref() else {
                    return true;
                };
                // Nothing arrived on the socket: the common case, no system call.
                if socket.poll_read_ready(&mut cx).is_pending() {
                    return false;
                }
                // Something did; it may be TLS housekeeping (a TLS 1.3 session ticket), which
                // the TLS layer absorbs and reports as nothing to read. Application bytes or a
                // close mean the connection is unusable, so losing the probed bytes is fine.
                let mut probe = [0u8; 16];
                let mut buf = ReadBuf::new(&mut probe);
                !matches!(
                    Pin::new(s.as_mut()).poll_read(&mut cx, &mut buf),
                    Poll::Pending
                )
            }
            BackendStream::Detached => true,
        }
    }
}

/// Reads the CA files of the backends' TLS settings, so that a bad one stops the start.
pub fn check_backend_tls(config: &crate::config::ProxyConfig) -> std::io::Result<()> {
    let mut specs = vec![&config.backend];
    if let Some(r) = &config.routing {
        specs.extend(r.hosts.iter().map(|(s, _)| s));
        specs.extend(r.replicas.iter().flatten());
    }
    for spec in specs {
        client_config(&spec.tls)
            .map_err(|e| std::io::Error::other(format!("TLS to backend {}: {e}", spec.addr())))?;
    }
    Ok(())
}

/// The rustls client configuration for `mode` (`None` for `off`); built once per CA file and
/// shared by every connection. Errors name the setting and the file.
pub fn client_config(mode: &BackendTls) -> Result<Option<Arc<ClientConfig>>, String> {
    static CONFIGS: Mutex<Option<HashMap<BackendTls, Arc<ClientConfig>>>> = Mutex::new(None);
    if *mode == BackendTls::Off {
        return Ok(None);
    }
    let mut cache = CONFIGS.lock().unwrap_or_else(|p| p.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(c) = cache.get(mode) {
        return Ok(Some(c.clone()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match mode {
        BackendTls::Off => return Ok(None),
        BackendTls::Required => Arc::new(NoCertCheck(provider.clone())),
        BackendTls::VerifyCa(path) => Arc::new(CaOnly(load_ca(path, provider.clone())?)),
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| format!("TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    let config = Arc::new(config);
    cache.insert(mode.clone(), config.clone());
    Ok(Some(config))
}

fn load_ca(path: &str, provider: Arc<CryptoProvider>) -> Result<Arc<WebPkiServerVerifier>, String> {
    let what = |e: &dyn std::fmt::Display| format!("tls_ca {path}: {e}");
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| what(&e))? {
        roots
            .add(cert.map_err(|e| what(&e))?)
            .map_err(|e| what(&e))?;
    }
    if roots.is_empty() {
        return Err(what(&"no certificate in the file"));
    }
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| what(&e))
}

/// The name rustls checks the certificate against (never checked in these modes, but the
/// handshake needs one: it is also sent as SNI when it is a DNS name).
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string()).map_err(|e| format!("TLS server name {host:?}: {e}"))
}

/// `verify_ca`: the chain must lead to the configured CA and be valid now; the host name is
/// not checked (MySQL's `VERIFY_CA`: backends are usually reached by address).
#[derive(Debug)]
struct CaOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for CaOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // webpki checks the name only after the chain, so a name error means the chain is good.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `required`: encrypted, the certificate not checked (MySQL's `REQUIRED`); the handshake
/// signatures still are, so the session key is the certificate holder's.
#[derive(Debug)]
struct NoCertCheck(Arc<CryptoProvider>);

impl ServerCertVerifier for NoCertCheck {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
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
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn loop_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap()
    }

    /// A socket opened on one core's loop and rehomed on another's is served by the second
    /// alone: it still reads and writes once the first loop is gone (a socket left registered
    /// there fails with "the I/O driver has shut down").
    #[test]
    fn a_rehomed_socket_no_longer_needs_the_loop_it_was_opened_on() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let first = loop_thread();
        let opened = first.block_on(TcpStream::connect(addr)).unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        let second = loop_thread();
        let mut stream = second
            .block_on(async { BackendStream::Plain(opened).rehome() })
            .unwrap();
        assert!(matches!(stream, BackendStream::Plain(_)));
        drop(first);
        peer.write_all(b"ping").unwrap();
        second.block_on(async {
            let mut got = [0u8; 4];
            stream.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"ping");
            stream.write_all(b"pong").await.unwrap();
        });
        let mut back = [0u8; 4];
        std::io::Read::read_exact(&mut peer, &mut back).unwrap();
        assert_eq!(&back, b"pong");
    }

    /// A TLS stream moves too: its socket goes to the second loop under the same TLS session,
    /// which goes on encrypting and decrypting once the first loop is gone (before, a TLS
    /// stream stayed where it was and failed here).
    #[test]
    fn a_rehomed_tls_stream_keeps_its_session_on_the_new_loop() {
        let dir = std::env::temp_dir().join(format!("shoal-tls-move-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (_, cert, key) =
            crate::wire::tls::generate_demo_certs(&["localhost".to_string()]).unwrap();
        let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert_path, cert).unwrap();
        std::fs::write(&key_path, key).unwrap();
        let server_config = Arc::new(
            crate::wire::tls::load_server_config(
                cert_path.to_str().unwrap(),
                key_path.to_str().unwrap(),
            )
            .unwrap(),
        );
        std::fs::remove_dir_all(&dir).unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (tcp, _) = listener.accept().unwrap();
            let session = rustls::ServerConnection::new(server_config).unwrap();
            let mut tls = rustls::StreamOwned::new(session, tcp);
            let mut got = [0u8; 4];
            std::io::Read::read_exact(&mut tls, &mut got).unwrap();
            tls.write_all(b"pong").unwrap();
            tls.flush().unwrap();
            got
        });
        let config = client_config(&BackendTls::Required).unwrap().unwrap();
        let first = loop_thread();
        let opened = first
            .block_on(async {
                let tcp = TcpStream::connect(addr).await?;
                tokio_rustls::TlsConnector::from(config)
                    .connect(server_name("localhost").unwrap(), TlsSocket::new(tcp))
                    .await
            })
            .unwrap();
        let second = loop_thread();
        let mut stream = second
            .block_on(async { BackendStream::Tls(Box::new(opened)).rehome() })
            .unwrap();
        drop(first);
        let back = second.block_on(async {
            stream.write_all(b"ping").await.unwrap();
            stream.flush().await.unwrap();
            let mut back = [0u8; 4];
            stream.read_exact(&mut back).await.unwrap();
            back
        });
        assert_eq!(&back, b"pong");
        assert_eq!(&server.join().unwrap(), b"ping");
    }

    /// The check above can fail: without the move, the same reads fail once the loop the
    /// socket was opened on is gone.
    #[test]
    fn a_socket_left_on_a_gone_loop_fails() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let first = loop_thread();
        let mut stream = first.block_on(TcpStream::connect(addr)).unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        drop(first);
        peer.write_all(b"ping").unwrap();
        let second = loop_thread();
        let read = second.block_on(async {
            let mut got = [0u8; 4];
            stream.read_exact(&mut got).await
        });
        assert!(read.is_err());
    }
}
