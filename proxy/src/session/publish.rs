//! What the session shows other sessions around each command (`SHOW SHOAL SESSIONS`, KILL,
//! the deadlock detector): see `process::processlist` and `process::sessions`.

use std::time::{Duration, Instant};

use super::Session;
use crate::process::processlist::{IDLE, IN_TRANSACTION, LOCKED_TABLES};
use crate::wire::command::COM_QUERY;

impl Session {
    /// The command in the client's frame starts now (`at`).
    pub(crate) fn publish_begin(&self, cmd: u8, at: Instant) {
        let ms = self.cur.shared.ms(at);
        self.cur
            .handle
            .doing
            .begin(cmd, self.cur.client.frame(), ms);
    }

    /// The command ended at `at`: publishes what the session holds, and its schema if it
    /// changed (compared against the last one published, without a lock).
    pub(crate) fn publish_end(&mut self, at: Instant) {
        let holds = if !self.cur.table_locks.is_empty() {
            LOCKED_TABLES
        } else if self.pins.transaction
            || self.cur.txn_begin.is_some()
            || self.cur.conns.in_transaction()
        {
            IN_TRANSACTION
        } else {
            IDLE
        };
        let ms = self.cur.shared.ms(at);
        self.cur.handle.doing.end(ms, holds);
        let current = match &self.cur.logical {
            Some(l) => Some(l.as_str()),
            None => self.cur.want.schema.as_deref(),
        };
        if current != self.shown_schema.as_deref() {
            self.shown_schema = current.map(str::to_string);
            // Without the router the session's schema is the physical database: show the
            // logical name clients used for it.
            let shown = current.map(|c| {
                self.cur
                    .rt
                    .config
                    .schema_map
                    .iter()
                    .find(|(_, p)| self.cur.logical.is_none() && p == c)
                    .map_or(c, |(l, _)| l.as_str())
            });
            self.cur.handle.doing.set_schema(shown);
        }
    }

    /// Hands `observe` the record of the command that ended after `elapsed` (`bytes_in`
    /// is what it read from the client).
    pub(crate) fn observe(&mut self, cmd: u8, elapsed: Duration, bytes_in: u64) {
        let statement = self.cur.conns.statement;
        let mut datanodes = 0u64;
        for h in &self.cur.conns.held {
            if h.used_in == statement {
                datanodes |= 1u64 << h.dn.min(63);
            }
        }
        let routed = self.cur.rt.config.routing.is_some();
        if !routed && self.backend.is_some() {
            datanodes = 1;
        }
        let mut mark = self.cur.mark;
        if !routed && mark.route.is_none() {
            mark.route = Some(crate::observe::RouteKind::Relay);
        }
        let bytes_out = self.cur.client.take_written();
        let payload = self.cur.client.packet_payload();
        let text: &[u8] = if cmd == COM_QUERY { &payload[1..] } else { &[] };
        let schema = if routed {
            self.cur.logical.as_deref()
        } else {
            self.cur.want.schema.as_deref()
        };
        let s = crate::observe::Statement {
            command: cmd,
            text,
            mark,
            schema,
            user: &self.cur.user,
            client: &self.cur.peer_host,
            datanodes,
            elapsed,
            bytes_in,
            bytes_out,
        };
        self.cur
            .shared
            .observe
            .command(&s, self.cur.rt.slots.as_ref());
    }
}
