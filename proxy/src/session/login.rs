//! The connection phase with a client, and COM_CHANGE_USER, which repeats it mid-session.

use mysql_common::constants::{CapabilityFlags, MariadbCapabilities};
use tracing::{debug, info, warn};

use super::{Pins, Session, charset_vars};
use crate::config::LOGIN_MAX_PACKET;
use crate::error::{Error, Result};
use crate::wire::auth::{AuthPlugin, Secret, sha256, verify_sha2_scramble};
use crate::wire::handshake::{
    NATIVE_PLUGIN, auth_switch, initial_handshake, is_ssl_request, new_scramble,
    parse_handshake_response,
};
use crate::wire::packet::is_too_large;
use crate::wire::tls::{ClientStream, Rewind};

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
    /// Authenticates `user` as the plugin configured for them, switching the client to it when
    /// it answered for another; returns whether the password was proven, whether one was given,
    /// and the next sequence id.
    async fn authenticate(
        &mut self,
        user: &str,
        client_plugin: Option<&[u8]>,
        auth: Vec<u8>,
        seq: u8,
    ) -> Result<(bool, bool, u8)> {
        let account = self.cur.rt.config.user(user).cloned();
        // Unknown users go through the native exchange, so a client cannot tell them apart
        // from a wrong password.
        let target = account.as_ref().map_or(AuthPlugin::Native, |u| u.plugin);
        let client = client_plugin
            .map(AuthPlugin::from_name)
            .unwrap_or(Some(AuthPlugin::Native));
        let (auth, mut seq) = if client == Some(target) {
            (auth, seq)
        } else {
            let mut s = seq;
            self.cur
                .client
                .write_packet(&mut s, &auth_switch(target.name(), &self.scramble));
            self.cur.client.flush().await.map_err(Error::ClientIo)?;
            let info = self.next_login_packet().await?;
            (
                self.cur.client.packet_payload().into_owned(),
                info.last_seq.wrapping_add(1),
            )
        };
        let Some(account) = account else {
            return Ok((false, !auth.is_empty(), seq));
        };
        let given = !auth.is_empty();
        let ok = match target {
            AuthPlugin::Native => account.secret.verify_native(&self.scramble, &auth),
            AuthPlugin::CachingSha2 => {
                let (ok, next) = self.sha2_auth(user, &account.secret, &auth, seq).await?;
                seq = next;
                ok
            }
        };
        Ok((ok, given, seq))
    }

    /// caching_sha2_password after the client's scramble: the fast path when the proxy knows
    /// SHA256(SHA256(password)) for the user, else a full authentication with the password
    /// sent over TLS or RSA-encrypted.
    async fn sha2_auth(
        &mut self,
        user: &str,
        secret: &Secret,
        auth: &[u8],
        seq: u8,
    ) -> Result<(bool, u8)> {
        if auth.is_empty() || auth == [0] {
            return Ok((secret.is_empty(), seq));
        }
        let mut seq = seq;
        let stage2 = secret
            .sha2_stage2()
            .or_else(|| self.cur.shared.sha2_cache.get(user));
        if let Some(stage2) = stage2
            && verify_sha2_scramble(&stage2, &self.scramble, auth)
        {
            self.cur.client.write_packet(&mut seq, &[0x01, 0x03]);
            return Ok((true, seq));
        }
        self.cur.client.write_packet(&mut seq, &[0x01, 0x04]);
        self.cur.client.flush().await.map_err(Error::ClientIo)?;
        let info = self.next_login_packet().await?;
        seq = info.last_seq.wrapping_add(1);
        let mut reply = self.cur.client.packet_payload().into_owned();
        let password = if self.cur.client.get_ref().is_tls() {
            if reply.last() == Some(&0) {
                reply.pop();
            }
            Some(reply)
        } else {
            if reply == [0x02] {
                let mut pem = vec![0x01];
                pem.extend_from_slice(self.cur.shared.rsa.public_pem.as_bytes());
                self.cur.client.write_packet(&mut seq, &pem);
                self.cur.client.flush().await.map_err(Error::ClientIo)?;
                let info = self.next_login_packet().await?;
                seq = info.last_seq.wrapping_add(1);
                reply = self.cur.client.packet_payload().into_owned();
            }
            self.cur.shared.rsa.decrypt_password(&reply, &self.scramble)
        };
        let Some(password) = password else {
            return Ok((false, seq));
        };
        let ok = secret.verify_clear(&password);
        if ok {
            self.cur
                .shared
                .sha2_cache
                .put(user, sha256(&sha256(&password)));
        }
        Ok((ok, seq))
    }

    /// The next packet of the connection phase (capped at [`LOGIN_MAX_PACKET`]).
    async fn next_login_packet(&mut self) -> Result<crate::wire::packet::PacketInfo> {
        match self.cur.client.next_packet().await {
            Ok(i) => Ok(i),
            Err(e) if is_too_large(&e) => Err(Error::packet_too_large()),
            Err(e) => Err(Error::ClientIo(e)),
        }
    }

    /// Waits before answering a login from an address with repeated failures.
    async fn throttle(&self) {
        if let Some((delay, failures)) = self.cur.shared.throttle.delay_for(&self.cur.peer_host) {
            warn!(
                client = %self.cur.peer_host,
                failures,
                delay_ms = delay.as_millis() as u64,
                "login throttled after repeated failed logins from this address"
            );
            crate::timers::sleep(delay).await;
        }
    }

    fn login_failed(&self, user: &str) {
        let failures = self.cur.shared.throttle.failed(&self.cur.peer_host);
        info!(client = %self.cur.peer_host, user, failures, "failed login");
    }

    /// The connection phase, bounded by the handshake timeout: a client that has not logged
    /// in by then is disconnected.
    pub(super) async fn login(&mut self, connection_id: u32) -> Result<()> {
        let limit = self.cur.rt.config.handshake_timeout;
        match crate::timers::timeout(limit, self.login_steps(connection_id)).await {
            Ok(r) => r,
            Err(_) => {
                debug!(connection_id, client = %self.cur.peer_host, "handshake timeout");
                Err(Error::ClientIo(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no login within the handshake timeout",
                )))
            }
        }
    }

    async fn login_steps(&mut self, connection_id: u32) -> Result<()> {
        self.cur.client.set_max_packet(LOGIN_MAX_PACKET);
        self.scramble = new_scramble();
        let mut capabilities = self.cur.shared.capabilities;
        if self.cur.shared.tls.is_some() {
            capabilities |= CapabilityFlags::CLIENT_SSL;
        }
        let hs = initial_handshake(
            &self.cur.shared.server_version,
            connection_id,
            &self.scramble,
            super::BACKEND_COLLATION,
            capabilities,
            self.cur.shared.mariadb,
            NATIVE_PLUGIN,
        );
        let mut seq = 0;
        self.cur.client.write_packet(&mut seq, &hs);
        self.cur.client.flush().await.map_err(Error::ClientIo)?;

        let mut info = match self.next_login_packet().await {
            Ok(i) => i,
            Err(e) => return self.fail(1, e).await,
        };
        if is_ssl_request(&self.cur.client.packet_payload()) {
            let Some(tls) = self.cur.shared.tls.clone() else {
                let e = Error::fatal(
                    1043,
                    b"08S01",
                    "Bad handshake: TLS is not configured on this proxy",
                );
                return self.fail(info.last_seq.wrapping_add(1), e).await;
            };
            let unread = self.cur.client.take_unread();
            let ClientStream::Plain(tcp) =
                std::mem::replace(self.cur.client.stream_mut(), ClientStream::Detached)
            else {
                return Err(Error::malformed("second SSL request"));
            };
            let stream = tls
                .acceptor
                .accept(Rewind::new(unread, tcp))
                .await
                .map_err(Error::ClientIo)?;
            *self.cur.client.stream_mut() = ClientStream::Tls(Box::new(stream));
            info = match self.next_login_packet().await {
                Ok(i) => i,
                Err(e) => return self.fail(info.last_seq.wrapping_add(2), e).await,
            };
        }
        let seq = info.last_seq.wrapping_add(1);
        if !self.cur.client.get_ref().is_tls()
            && self.cur.shared.tls.as_ref().is_some_and(|t| t.required)
        {
            return self.fail(seq, Error::insecure_transport()).await;
        }
        let hello = match parse_handshake_response(&self.cur.client.packet_payload()) {
            Ok(h) => h,
            Err(e) => return self.fail(seq, e).await,
        };
        self.cur.caps = hello.capabilities & capabilities;
        self.cur.cache_metadata = (hello.mariadb & self.cur.shared.mariadb)
            .contains(MariadbCapabilities::MARIADB_CLIENT_CACHE_METADATA);
        self.throttle().await;
        let (ok, given, seq) = self
            .authenticate(
                &hello.user,
                hello.plugin.as_deref(),
                hello.auth_response,
                seq,
            )
            .await?;
        if !ok {
            self.login_failed(&hello.user);
            let e = Error::access_denied(&hello.user, &self.cur.peer_host, given);
            return self.fail(seq, e).await;
        }
        self.cur.shared.throttle.succeeded(&self.cur.peer_host);
        let Some(account) = self.cur.rt.config.user(&hello.user).cloned() else {
            return self
                .fail(
                    seq,
                    Error::access_denied(&hello.user, &self.cur.peer_host, given),
                )
                .await;
        };
        match self
            .cur
            .shared
            .user_conns
            .acquire(&account.name, account.max_connections)
        {
            Some(slot) => self.user_slot = Some(slot),
            None => {
                return self
                    .fail(seq, Error::too_many_user_connections(&account.name))
                    .await;
            }
        }
        self.cur.user = hello.user;
        self.cur.want.multi_statements = self
            .cur
            .caps
            .contains(CapabilityFlags::CLIENT_MULTI_STATEMENTS);
        self.initial_vars = charset_vars(hello.collation);
        self.cur.want.vars = self.initial_vars.clone();
        if let Err(e) = self.enter_schema(hello.database).await {
            return self.fail(seq, e).await;
        }
        self.cur.send_ok(seq).await?;
        self.cur
            .client
            .set_max_packet(self.cur.rt.config.max_packet);
        Ok(())
    }

    /// Sets the schema a (re)authenticated session starts in, checking a requested one
    /// against the user's list and the backend.
    async fn enter_schema(&mut self, requested: Option<String>) -> Result<()> {
        if self.cur.rt.config.routing.is_some() {
            // The router plans in logical schemas; connections get their datanode's database.
            if let Some(db) = &requested {
                self.cur.check_schema_allowed(db)?;
            }
            self.cur.logical = requested;
            return Ok(());
        }
        match requested {
            Some(db) => {
                self.cur.check_schema_allowed(&db)?;
                let physical = self
                    .cur
                    .rt
                    .config
                    .physical_schema(&db)
                    .ok_or_else(|| Error::unknown_database(&db))?
                    .to_string();
                self.cur.want.schema = Some(physical);
                self.ensure_backend().await.map(|_| ())
            }
            None => {
                self.cur.want.schema = self.cur.rt.pool.spec().database.clone();
                Ok(())
            }
        }
    }

    async fn fail(&mut self, seq: u8, e: Error) -> Result<()> {
        if let Some((code, state, msg)) = e.as_reply() {
            let (msg, state) = (msg.to_string(), *state);
            let _ = self.cur.send_error(seq, code, &state, &msg).await;
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
        let req = parse_change_user(&self.cur.client.packet_payload(), self.cur.caps)?;
        self.throttle().await;
        let (ok, given, seq) = self
            .authenticate(&req.user, req.plugin.as_deref(), req.auth, reply_seq)
            .await?;
        if !ok {
            self.login_failed(&req.user);
            let e = Error::access_denied(&req.user, &self.cur.peer_host, given);
            return self.fail(seq, e).await;
        }
        let limit = self
            .cur
            .rt
            .config
            .user(&req.user)
            .map_or(0, |u| u.max_connections);
        // The session stops counting as its old user before it counts as the new one.
        self.user_slot = None;
        match self.cur.shared.user_conns.acquire(&req.user, limit) {
            Some(slot) => self.user_slot = Some(slot),
            None => {
                return self
                    .fail(seq, Error::too_many_user_connections(&req.user))
                    .await;
            }
        }
        debug!(from = %self.cur.user, to = %req.user, "change user");
        if self.pins.any()
            && let Some(b) = self.backend.as_mut()
            && b.reset().await.is_err()
        {
            self.backend = None;
        }
        self.pins = Pins::default();
        self.cur.txn_begin = None;
        self.cur.txn_plain = None;
        self.cur.xa_gtrid = None;
        self.cur.savepoints.clear();
        self.cur.table_locks.clear();
        self.cur.user_vars.clear();
        self.cur.statements = Default::default();
        self.cur.release_conns(true).await;
        self.cur.user = req.user;
        // Other sessions (KILL's owner check, SHOW SHOAL SESSIONS) see the new user.
        self.cur
            .handle
            .user
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone_from(&self.cur.user);
        if let Some(c) = req.collation {
            self.initial_vars = charset_vars(c);
        }
        self.cur.want.vars = self.initial_vars.clone();
        self.cur.want.last_insert_id = 0;
        self.cur.status = mysql_common::constants::StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits();
        if let Err(e) = self.enter_schema(req.database).await {
            return self.fail(seq, e).await;
        }
        self.cur.send_ok(seq).await
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
