//! The MySQL wire protocol as the proxy speaks it: framing, the connection phase and the small
//! packets it builds or inspects. Knows nothing of sessions, pools or routing.

pub mod auth;
pub mod command;
pub mod handshake;
pub mod messages;
pub mod packet;
pub mod response;
pub mod resultset;
pub mod rsa_key;
pub mod tls;

use mysql_common::constants::{CapabilityFlags, MariadbCapabilities};

/// What one end of a connection negotiated that changes the bytes of responses: the capability
/// flags (of which `backend::conn::wire_capabilities` matter) and MariaDB's extended
/// MARIADB_CLIENT_CACHE_METADATA, beyond the 32 bits, under which every column count carries a
/// "metadata follows" byte and an execute may leave its column definitions out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wire {
    pub caps: CapabilityFlags,
    pub cache_metadata: bool,
}

impl From<CapabilityFlags> for Wire {
    fn from(caps: CapabilityFlags) -> Wire {
        Wire {
            caps,
            cache_metadata: false,
        }
    }
}

/// MariaDB's extended capabilities a peer announced. They travel in 4 bytes MySQL reserves, and
/// mean something only when the peer cleared CLIENT_MYSQL (the old CLIENT_LONG_PASSWORD bit):
/// that is how a MariaDB server or client says the bytes are there.
pub fn mariadb_caps(caps: CapabilityFlags, ext: MariadbCapabilities) -> MariadbCapabilities {
    if caps.contains(CapabilityFlags::CLIENT_LONG_PASSWORD) {
        MariadbCapabilities::empty()
    } else {
        ext
    }
}
