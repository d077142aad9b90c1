//! The connection phase with a client, and COM_CHANGE_USER, which repeats it mid-session.

use mysql_common::constants::CapabilityFlags;
use tracing::debug;

use super::{Pins, Session, charset_vars};
use crate::error::{Error, Result};
use crate::wire::auth::verify_native;
use crate::wire::handshake::{
    NATIVE_PLUGIN, auth_switch_to_native, initial_handshake, new_scramble, parse_handshake_response,
};
use crate::wire::packet::is_too_large;

/// The parts of a COM_CHANGE_USER payload the proxy needs.
pub(crate) struct ChangeUser {
    user: String,
    auth: Vec<u8>,
    database: Option<String>,
    collation: Option<u8>,
    plugin: Option<Vec<u8>>,
}

fn take_nul<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
    let n = buf.iter().position(|b| *b == 0)?;
    let s = &buf[..n];
    *buf = &buf[n + 1..];
    Some(s)
}

pub(crate) fn parse_change_user(payload: &[u8], caps: CapabilityFlags) -> Result<ChangeUser> {
    let bad = || Error::malformed("COM_CHANGE_USER");
    let mut b = payload.get(1..).ok_or_else(bad)?;
    let user = String::from_utf8_lossy(take_nul(&mut b).ok_or_else(bad)?).into_owned();
    let auth = if caps.contains(CapabilityFlags::CLIENT_SECURE_CONNECTION) {
        let n = *b.first().ok_or_else(bad)? as usize;
        let a = b.get(1..1 + n).ok_or_else(bad)?.to_vec();
        b = &b[1 + n..];
        a
    } else {
        take_nul(&mut b).ok_or_else(bad)?.to_vec()
    };
    let database = take_nul(&mut b)
        .filter(|d| !d.is_empty())
        .map(|d| String::from_utf8_lossy(d).into_owned());
    let mut collation = None;
    let mut plugin = None;
    if b.len() >= 2 {
        collation = Some(b[0]);
        b = &b[2..];
        if caps.contains(CapabilityFlags::CLIENT_PLUGIN_AUTH) {
            plugin = take_nul(&mut b).map(|p| p.to_vec());
        }
    }
    Ok(ChangeUser {
        user,
        auth,
        database,
        collation,
        plugin,
    })
}

impl Session {
    fn password_ok(&self, user: &str, auth: &[u8]) -> bool {
        match self.shared.config.user(user) {
            Some(u) => verify_native(&self.scramble, &u.password, auth),
            None => false,
        }
    }

    /// Asks the client to answer with `mysql_native_password` if it used another plugin;
    /// returns the auth response to verify and the next sequence id.
    async fn native_auth_response(
        &mut self,
        plugin: Option<&[u8]>,
        auth: Vec<u8>,
        seq: u8,
    ) -> Result<(Vec<u8>, u8)> {
        match plugin {
            Some(p) if p != NATIVE_PLUGIN => {
                let mut s = seq;
                self.client
                    .write_packet(&mut s, &auth_switch_to_native(&self.scramble));
                self.client.flush().await.map_err(Error::ClientIo)?;
                let info = self.client.next_packet().await.map_err(Error::ClientIo)?;
                let auth = self.client.packet_payload().into_owned();
                Ok((auth, info.last_seq.wrapping_add(1)))
            }
            _ => Ok((auth, seq)),
        }
    }

    pub(super) async fn login(&mut self, connection_id: u32) -> Result<()> {
        self.scramble = new_scramble();
        let hs = initial_handshake(
            &self.shared.server_version,
            connection_id,
            &self.scramble,
            super::BACKEND_COLLATION,
            self.shared.capabilities,
        );
        let mut seq = 0;
        self.client.write_packet(&mut seq, &hs);
        self.client.flush().await.map_err(Error::ClientIo)?;

        let info = match self.client.next_packet().await {
            Ok(i) => i,
            Err(e) if is_too_large(&e) => return Err(Error::packet_too_large()),
            Err(e) => return Err(Error::ClientIo(e)),
        };
        let seq = info.last_seq.wrapping_add(1);
        let hello = match parse_handshake_response(&self.client.packet_payload()) {
            Ok(h) => h,
            Err(e) => return self.fail(seq, e).await,
        };
        self.caps = hello.capabilities & self.shared.capabilities;
        let (auth, seq) = self
            .native_auth_response(hello.plugin.as_deref(), hello.auth_response, seq)
            .await?;
        if !self.password_ok(&hello.user, &auth) {
            let e = Error::access_denied(&hello.user, &self.peer_host, !auth.is_empty());
            return self.fail(seq, e).await;
        }
        if self
            .shared
            .config
            .user(&hello.user)
            .is_some_and(|u| u.read_only)
        {
            let e = Error::fatal(
                1045,
                b"28000",
                format!(
                    "Access denied for user '{}': read-only users are not supported by this \
                     version of Shoal yet",
                    hello.user
                ),
            );
            return self.fail(seq, e).await;
        }
        self.user = hello.user;
        self.want.multi_statements = self.caps.contains(CapabilityFlags::CLIENT_MULTI_STATEMENTS);
        self.initial_vars = charset_vars(hello.collation);
        self.want.vars = self.initial_vars.clone();
        if let Err(e) = self.enter_schema(hello.database).await {
            return self.fail(seq, e).await;
        }
        self.send_ok(seq).await
    }

    /// Sets the schema a (re)authenticated session starts in, checking a requested one
    /// against the user's list and the backend.
    async fn enter_schema(&mut self, requested: Option<String>) -> Result<()> {
        if self.shared.config.routing.is_some() {
            // The router plans in logical schemas; connections get their datanode's database.
            if let Some(db) = &requested {
                self.check_schema_allowed(db)?;
            }
            self.logical = requested;
            return Ok(());
        }
        match requested {
            Some(db) => {
                self.check_schema_allowed(&db)?;
                let physical = self
                    .shared
                    .config
                    .physical_schema(&db)
                    .ok_or_else(|| Error::unknown_database(&db))?
                    .to_string();
                self.want.schema = Some(physical);
                self.ensure_backend().await.map(|_| ())
            }
            None => {
                self.want.schema = self.shared.pool.spec().database.clone();
                Ok(())
            }
        }
    }

    async fn fail(&mut self, seq: u8, e: Error) -> Result<()> {
        if let Some((code, state, msg)) = e.as_reply() {
            let (msg, state) = (msg.to_string(), *state);
            let _ = self.send_error(seq, code, &state, &msg).await;
        }
        Err(match e {
            Error::Reply {
                code,
                state,
                message,
            } => Error::Fatal {
                code,
                state,
                message,
            },
            other => other,
        })
    }

    /// COM_CHANGE_USER: authenticates again, then starts over like a new connection.
    pub(crate) async fn change_user(&mut self, reply_seq: u8) -> Result<()> {
        let req = parse_change_user(&self.client.packet_payload(), self.caps)?;
        let (auth, seq) = self
            .native_auth_response(req.plugin.as_deref(), req.auth, reply_seq)
            .await?;
        if !self.password_ok(&req.user, &auth) {
            let e = Error::access_denied(&req.user, &self.peer_host, !auth.is_empty());
            return self.fail(seq, e).await;
        }
        debug!(from = %self.user, to = %req.user, "change user");
        if self.pins.any()
            && let Some(b) = self.backend.as_mut()
            && b.reset().await.is_err()
        {
            self.backend = None;
        }
        self.pins = Pins::default();
        self.txn_begin = None;
        self.statements = Default::default();
        self.release_conns(true).await;
        self.user = req.user;
        if let Some(c) = req.collation {
            self.initial_vars = charset_vars(c);
        }
        self.want.vars = self.initial_vars.clone();
        self.want.last_insert_id = 0;
        self.status = mysql_common::constants::StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits();
        if let Err(e) = self.enter_schema(req.database).await {
            return self.fail(seq, e).await;
        }
        self.send_ok(seq).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_change_user() {
        let mut p = vec![0x11];
        p.extend_from_slice(b"bob\0");
        p.push(3);
        p.extend_from_slice(b"abc");
        p.extend_from_slice(b"shop\0");
        p.extend_from_slice(&[33, 0]);
        p.extend_from_slice(b"mysql_native_password\0");
        let caps = CapabilityFlags::CLIENT_SECURE_CONNECTION | CapabilityFlags::CLIENT_PLUGIN_AUTH;
        let c = parse_change_user(&p, caps).unwrap();
        assert_eq!(c.user, "bob");
        assert_eq!(c.auth, b"abc");
        assert_eq!(c.database.as_deref(), Some("shop"));
        assert_eq!(c.collation, Some(33));
        assert_eq!(c.plugin.as_deref(), Some(&b"mysql_native_password"[..]));
    }

    #[test]
    fn truncated_change_user_is_malformed() {
        let caps = CapabilityFlags::CLIENT_SECURE_CONNECTION;
        assert!(parse_change_user(&[0x11, b'b'], caps).is_err());
        assert!(parse_change_user(&[0x11, b'b', 0, 9, 1], caps).is_err());
    }
}
