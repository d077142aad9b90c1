//! `KILL [QUERY|CONNECTION] n` and `CONNECTION_ID()` in Shoal's ids: the id a client gets in
//! the handshake. A KILL of a session of the same user kills on the backend connections that
//! session published (`process::sessions`), on every datanode, through a connection of its
//! own. Other users' sessions are refused with 1095, as MySQL does without PROCESS, unless the
//! killer is an admin (`users[].admin`).

use std::sync::atomic::Ordering;

use shoal_router::sql::lex::{TokKind, Token, tokenize_into};
use tracing::debug;

use super::Cursor;
use crate::backend::conn::wire_capabilities;
use crate::backend::interrupt::kill_thread;
use crate::error::{Error, Result};
use crate::process::sessions::Published;

/// `KILL [QUERY|CONNECTION] n`: whether only the query dies, and `n`. `None` for anything
/// else (KILL USER, an expression...: the backend or the router answers those).
pub fn parse_kill(sql: &[u8]) -> Option<(bool, u64)> {
    // Cheap reject first: the relay-only path asks this of every query.
    if !shoal_router::sql::pins::contains_ci(sql, b"KILL") {
        return None;
    }
    let text = std::str::from_utf8(sql).ok()?;
    let mut toks = Vec::new();
    tokenize_into(text, &mut toks).ok()?;
    kill_tokens(text, &toks)
}

/// [`parse_kill`] on the statement's tokens (comments skipped, as the server skips them).
pub fn kill_tokens(text: &str, toks: &[Token]) -> Option<(bool, u64)> {
    let mut toks = toks;
    if toks.last().is_some_and(|t| t.is_punct(text, ";")) {
        toks = &toks[..toks.len() - 1];
    }
    let (query, rest) = match toks {
        [k, rest @ ..] if k.is_kw(text, "KILL") => match rest {
            [q, rest @ ..] if q.is_kw(text, "QUERY") => (true, rest),
            [c, rest @ ..] if c.is_kw(text, "CONNECTION") => (false, rest),
            _ => (false, rest),
        },
        _ => return None,
    };
    match rest {
        [n] if n.kind == TokKind::Int => n.text(text).parse().ok().map(|n| (query, n)),
        _ => None,
    }
}

impl Cursor {
    /// Runs `KILL [QUERY|CONNECTION] n` for Shoal's session `n`.
    pub(crate) async fn kill(
        &mut self,
        query_only: bool,
        target: u64,
        reply_seq: u8,
    ) -> Result<()> {
        let handle = u32::try_from(target)
            .ok()
            .and_then(|id| self.shared.sessions.get(id));
        let Some(handle) = handle else {
            return Err(Error::reply(
                1094,
                b"HY000",
                format!("Unknown thread id: {target}"),
            ));
        };
        let owner = handle
            .user
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        // An admin may end anyone's; others only their own user's, as MySQL without PROCESS.
        if owner != self.user && !self.is_admin() {
            return Err(Error::reply(
                1095,
                b"HY000",
                format!("You are not owner of thread {target}"),
            ));
        }
        if target == u64::from(self.id) {
            if query_only {
                // This session runs nothing else right now.
                return self.send_ok(reply_seq).await;
            }
            return Err(Error::fatal(1927, b"70100", "Connection was killed"));
        }
        if !query_only {
            handle.killed.store(true, Ordering::Relaxed);
            handle.nudge.nudge();
        }
        let backends = handle
            .backends
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let word = if query_only { "QUERY" } else { "CONNECTION" };
        for Published { pool, thread, .. } in backends {
            let limit = pool.settings().connect_timeout;
            let wire = self.caps & wire_capabilities();
            if let Err(e) = kill_thread(pool.spec(), wire, word, thread, limit).await {
                debug!(thread, error = %e, "cannot run KILL on the backend");
            }
        }
        self.send_ok(reply_seq).await
    }
}

#[cfg(test)]
mod tests {
    use super::parse_kill;

    #[test]
    fn parses_kill_forms() {
        assert_eq!(parse_kill(b"KILL 12"), Some((false, 12)));
        assert_eq!(parse_kill(b"kill query 7;"), Some((true, 7)));
        assert_eq!(parse_kill(b" KILL CONNECTION 3"), Some((false, 3)));
        assert_eq!(parse_kill(b"KILL USER bob"), None);
        assert_eq!(parse_kill(b"KILL QUERY ID 5"), None);
        assert_eq!(parse_kill(b"SELECT 1"), None);
        assert_eq!(parse_kill(b"/* tool */ KILL QUERY 9"), Some((true, 9)));
        assert_eq!(parse_kill(b"-- c\nkill 4"), Some((false, 4)));
        assert_eq!(parse_kill(b"/* KILL 4 */ SELECT 1"), None);
    }
}
