//! TLS on the wire: a connection as plain TCP or TLS (one type for the packet layer, to clients
//! and to backends), and TLS to clients: the rustls server configuration read from PEM files.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A connection as the packet layer reads and writes it: plain TCP until the handshake's SSL
/// request, then TLS over it (`T`: the server or the client side of a rustls stream).
pub enum MaybeTls<T> {
    Plain(TcpStream),
    Tls(Box<T>),
    /// Only while the stream is taken out to be wrapped in TLS.
    Detached,
}

/// A client connection: plain until the client asks for TLS in the handshake.
pub type ClientStream = MaybeTls<TlsStream<Rewind>>;

/// A TCP stream with bytes already read from it put back in front (a client may send its TLS
/// ClientHello right behind the SSL request, into the packet layer's read buffer).
pub struct Rewind {
    prefix: BytesMut,
    inner: TcpStream,
}

impl Rewind {
    pub fn new(prefix: BytesMut, inner: TcpStream) -> Self {
        Rewind { prefix, inner }
    }
}

impl AsyncRead for Rewind {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

fn detached() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "stream detached")
}

impl<T> MaybeTls<T> {
    pub fn is_tls(&self) -> bool {
        matches!(self, MaybeTls::Tls(_))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for MaybeTls<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_read(cx, buf),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            MaybeTls::Detached => Poll::Ready(Err(detached())),
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for MaybeTls<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_write(cx, buf),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            MaybeTls::Detached => Poll::Ready(Err(detached())),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_flush(cx),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            MaybeTls::Detached => Poll::Ready(Err(detached())),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_shutdown(cx),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            MaybeTls::Detached => Poll::Ready(Ok(())),
        }
    }
}

/// TLS settings of a running proxy.
#[derive(Clone)]
pub struct ClientTls {
    pub acceptor: TlsAcceptor,
    /// Plain clients are refused with error 3159.
    pub required: bool,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("required", &self.required)
            .finish()
    }
}

/// The ring provider, installed once as the process default (rustls refuses to pick one when
/// several could be compiled in).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A TLS 1.2/1.3 server configuration from a PEM certificate chain and key.
pub fn load_server_config(cert_path: &str, key_path: &str) -> Result<ServerConfig, String> {
    install_crypto_provider();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_path)
        .map_err(|e| format!("server.tls.cert {cert_path}: {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("server.tls.cert {cert_path}: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "server.tls.cert {cert_path}: no certificate in the file"
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key_path)
        .map_err(|e| format!("server.tls.key {key_path}: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("server.tls: certificate and key do not fit: {e}"))
}

/// A self-signed CA and a server certificate it signs for `names` (PEM: ca cert, server cert,
/// server key), for demos and tests (`shoal gen-cert`).
pub fn generate_demo_certs(names: &[String]) -> Result<(String, String, String), String> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let e = |e: rcgen::Error| e.to_string();
    let ca_key = KeyPair::generate().map_err(e)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Shoal demo CA");
    let ca_cert = ca_params.self_signed(&ca_key).map_err(e)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().map_err(e)?;
    let mut params = CertificateParams::new(names.to_vec()).map_err(e)?;
    params.distinguished_name.push(
        DnType::CommonName,
        names.first().map(String::as_str).unwrap_or("shoal"),
    );
    let cert = params.signed_by(&key, &issuer).map_err(e)?;
    Ok((ca_cert.pem(), cert.pem(), key.serialize_pem()))
}
