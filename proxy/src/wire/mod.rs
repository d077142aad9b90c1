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
