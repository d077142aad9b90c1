//! Server side of the connection phase: the initial handshake (protocol v10) we send to a
//! client and the HandshakeResponse41 it answers with.

use mysql_common::constants::{CapabilityFlags, MariadbCapabilities, StatusFlags};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{AuthSwitchRequest, HandshakePacket, HandshakeResponse};
use mysql_common::proto::{MyDeserialize, MySerialize};
use rand::Rng;

use crate::error::{Error, Result};

pub use super::auth::NATIVE_PLUGIN;

/// Capabilities the proxy offers to clients (CLIENT_SSL is added when TLS is configured). No
/// CLIENT_LOCAL_FILES (LOAD DATA
/// LOCAL is refused), no compression, no MariaDB extensions (bulk execute, progress reports).
pub fn server_capabilities() -> CapabilityFlags {
    CapabilityFlags::CLIENT_LONG_PASSWORD
        | CapabilityFlags::CLIENT_FOUND_ROWS
        | CapabilityFlags::CLIENT_LONG_FLAG
        | CapabilityFlags::CLIENT_CONNECT_WITH_DB
        | CapabilityFlags::CLIENT_NO_SCHEMA
        | CapabilityFlags::CLIENT_IGNORE_SPACE
        | CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_INTERACTIVE
        | CapabilityFlags::CLIENT_IGNORE_SIGPIPE
        | CapabilityFlags::CLIENT_TRANSACTIONS
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_MULTI_STATEMENTS
        | CapabilityFlags::CLIENT_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PS_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_CONNECT_ATTRS
        | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | CapabilityFlags::CLIENT_SESSION_TRACK
        | CapabilityFlags::CLIENT_DEPRECATE_EOF
}

/// MariaDB's extended capabilities the proxy can offer (when the backend offers them too):
/// metadata caching, which spares every execute of a prepared statement its column
/// definitions on both legs while they have not changed.
pub fn mariadb_capabilities() -> MariadbCapabilities {
    MariadbCapabilities::MARIADB_CLIENT_CACHE_METADATA
}

/// A 20-byte scramble of printable ASCII (clients treat it as a NUL-terminated string).
pub fn new_scramble() -> [u8; 20] {
    let mut rng = rand::rng();
    let mut s = [0u8; 20];
    for b in &mut s {
        *b = rng.random_range(33u8..127);
    }
    s
}

/// The initial handshake packet payload, announcing `plugin` (what the scramble is for). With
/// MariaDB capabilities to offer, CLIENT_MYSQL is left out, as a MariaDB server does: that is
/// what makes clients read them.
pub fn initial_handshake(
    server_version: &[u8],
    connection_id: u32,
    scramble: &[u8; 20],
    collation: u8,
    mut capabilities: CapabilityFlags,
    mariadb: MariadbCapabilities,
    plugin: &[u8],
) -> Vec<u8> {
    if !mariadb.is_empty() {
        capabilities.remove(CapabilityFlags::CLIENT_LONG_PASSWORD);
    }
    let mut part2 = scramble[8..].to_vec();
    part2.push(0);
    let mut s1 = [0u8; 8];
    s1.copy_from_slice(&scramble[..8]);
    let packet = HandshakePacket::new(
        10,
        server_version,
        connection_id,
        s1,
        Some(part2),
        capabilities,
        collation,
        StatusFlags::SERVER_STATUS_AUTOCOMMIT,
        Some(plugin),
    )
    .with_mariadb_ext_capabilities(mariadb);
    let mut out = Vec::with_capacity(128);
    packet.serialize(&mut out);
    out
}

/// What a client said in its HandshakeResponse41.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHello {
    /// Capabilities both sides support (client's ∩ ours).
    pub capabilities: CapabilityFlags,
    /// MariaDB's extended capabilities the client asked for (none unless it cleared
    /// CLIENT_MYSQL); the session keeps those it was offered.
    pub mariadb: MariadbCapabilities,
    pub collation: u8,
    pub user: String,
    pub database: Option<String>,
    /// The auth plugin the client used for `auth_response`, if it named one.
    pub plugin: Option<Vec<u8>>,
    pub auth_response: Vec<u8>,
}

/// Parses a HandshakeResponse41 payload.
pub fn parse_handshake_response(payload: &[u8]) -> Result<ClientHello> {
    if payload.len() < 32 {
        return Err(Error::malformed("handshake response too short"));
    }
    let client_caps = u32::from_le_bytes([payload[0], payload[1], payload[2], payload[3]]);
    if client_caps & CapabilityFlags::CLIENT_PROTOCOL_41.bits() == 0 {
        return Err(Error::fatal(
            1047,
            b"08S01",
            "Clients older than protocol 4.1 are not supported",
        ));
    }
    let resp = HandshakeResponse::deserialize((), &mut ParseBuf(payload))
        .map_err(|e| Error::malformed(format!("handshake response: {e}")))?;
    let capabilities = resp.capabilities() & server_capabilities();
    Ok(ClientHello {
        capabilities,
        mariadb: super::mariadb_caps(resp.capabilities(), resp.mariadb_ext_capabilities()),
        collation: resp.collation(),
        user: String::from_utf8_lossy(resp.user()).into_owned(),
        database: resp
            .db_name()
            .filter(|d| !d.is_empty())
            .map(|d| String::from_utf8_lossy(d).into_owned()),
        plugin: resp.auth_plugin().map(|p| p.as_bytes().to_vec()),
        auth_response: resp.scramble_buf().to_vec(),
    })
}

/// Whether a client's first packet is an SSLRequest: the first 32 bytes of a handshake
/// response with CLIENT_SSL set and nothing after them (the rest follows over TLS).
pub fn is_ssl_request(payload: &[u8]) -> bool {
    payload.len() == 32
        && u32::from_le_bytes([payload[0], payload[1], payload[2], payload[3]])
            & CapabilityFlags::CLIENT_SSL.bits()
            != 0
}

/// An AuthSwitchRequest asking for `plugin` over `scramble`.
pub fn auth_switch(plugin: &[u8], scramble: &[u8; 20]) -> Vec<u8> {
    let mut data = scramble.to_vec();
    data.push(0);
    let mut out = Vec::new();
    AuthSwitchRequest::new(plugin, data).serialize(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mysql_common::packets::AuthPlugin;

    #[test]
    fn handshake_parses_back_with_the_same_scramble() {
        let scramble = new_scramble();
        let payload = initial_handshake(
            b"10.11.6-MariaDB-shoal",
            42,
            &scramble,
            45,
            server_capabilities(),
            MariadbCapabilities::empty(),
            NATIVE_PLUGIN,
        );
        let hs = HandshakePacket::deserialize((), &mut ParseBuf(&payload)).unwrap();
        assert_eq!(hs.connection_id(), 42);
        // Nothing of MariaDB's offered: a MySQL server's greeting, CLIENT_MYSQL set.
        assert!(
            hs.capabilities()
                .contains(CapabilityFlags::CLIENT_LONG_PASSWORD)
        );
        assert_eq!(hs.nonce(), scramble.to_vec());
        assert_eq!(hs.auth_plugin_name_ref(), Some(NATIVE_PLUGIN));
        assert!(
            hs.capabilities()
                .contains(CapabilityFlags::CLIENT_DEPRECATE_EOF)
        );
        assert!(!hs.capabilities().contains(CapabilityFlags::CLIENT_SSL));
    }

    #[test]
    fn parses_a_client_response() {
        let scramble = new_scramble();
        let auth = mysql_common::scramble::scramble_native(&scramble, b"secret").unwrap();
        let caps = CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_SECURE_CONNECTION
            | CapabilityFlags::CLIENT_PLUGIN_AUTH
            | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
            | CapabilityFlags::CLIENT_DEPRECATE_EOF
            | CapabilityFlags::CLIENT_SSL_VERIFY_SERVER_CERT;
        let resp = HandshakeResponse::new(
            Some(&auth[..]),
            (8, 0, 0),
            Some(&b"app"[..]),
            Some(&b"shop"[..]),
            Some(AuthPlugin::MysqlNativePassword),
            caps,
            None,
            1 << 24,
        );
        let mut payload = Vec::new();
        resp.serialize(&mut payload);
        let hello = parse_handshake_response(&payload).unwrap();
        assert_eq!(hello.user, "app");
        assert_eq!(hello.database.as_deref(), Some("shop"));
        assert_eq!(hello.auth_response, auth.to_vec());
        assert_eq!(hello.plugin.as_deref(), Some(NATIVE_PLUGIN));
        assert!(
            hello
                .capabilities
                .contains(CapabilityFlags::CLIENT_DEPRECATE_EOF)
        );
        // Capabilities we never offered are not negotiated.
        assert!(
            !hello
                .capabilities
                .contains(CapabilityFlags::CLIENT_SSL_VERIFY_SERVER_CERT)
        );
        assert!(
            hello
                .capabilities
                .contains(CapabilityFlags::CLIENT_CONNECT_WITH_DB)
        );
    }

    #[test]
    fn mariadb_capabilities_are_offered_as_mariadb_offers_them() {
        let payload = initial_handshake(
            b"10.11.6-MariaDB",
            1,
            &new_scramble(),
            45,
            server_capabilities(),
            mariadb_capabilities(),
            NATIVE_PLUGIN,
        );
        let hs = HandshakePacket::deserialize((), &mut ParseBuf(&payload)).unwrap();
        assert!(
            !hs.capabilities()
                .contains(CapabilityFlags::CLIENT_LONG_PASSWORD)
        );
        assert_eq!(
            crate::wire::mariadb_caps(hs.capabilities(), hs.mariadb_ext_capabilities()),
            MariadbCapabilities::MARIADB_CLIENT_CACHE_METADATA
        );
    }

    #[test]
    fn a_client_asks_for_mariadb_capabilities_only_without_client_mysql() {
        let caps = CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_SECURE_CONNECTION
            | CapabilityFlags::CLIENT_PLUGIN_AUTH;
        let hello = |caps| {
            let resp = HandshakeResponse::new(
                Some(&b""[..]),
                (10, 11, 6),
                Some(&b"app"[..]),
                None::<&[u8]>,
                Some(AuthPlugin::MysqlNativePassword),
                caps,
                None,
                1 << 24,
            )
            .with_mariadb_ext_capabilities(MariadbCapabilities::MARIADB_CLIENT_CACHE_METADATA);
            let mut payload = Vec::new();
            resp.serialize(&mut payload);
            parse_handshake_response(&payload).unwrap().mariadb
        };
        assert_eq!(
            hello(caps),
            MariadbCapabilities::MARIADB_CLIENT_CACHE_METADATA
        );
        // With CLIENT_MYSQL set the reserved bytes are MySQL's: not read.
        assert!(hello(caps | CapabilityFlags::CLIENT_LONG_PASSWORD).is_empty());
    }

    #[test]
    fn truncated_response_is_malformed() {
        assert!(parse_handshake_response(&[0x0d, 0xa2]).is_err());
        let mut junk = [0u8; 40];
        junk[1] = 0x02; // PROTOCOL_41
        junk[32] = b'u'; // user without its NUL terminator
        assert!(parse_handshake_response(&junk[..33]).is_err());
    }
}
