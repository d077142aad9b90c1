//! The observation point of a session: what the command loop hands [`super::Observer`] at
//! the end of each client command.

use std::time::Duration;

use super::{RouteKind, Statement};
use crate::session::Session;
use crate::wire::command::COM_QUERY;

impl Session {
    /// A client command ended after `elapsed`; `bytes_in` is what it read from the client.
    pub(crate) fn observe(&mut self, cmd: u8, elapsed: Duration, bytes_in: u64) {
        let statement = self.conns.statement;
        let mut datanodes = 0u64;
        for h in &self.conns.held {
            if h.used_in == statement {
                datanodes |= 1u64 << h.dn.min(63);
            }
        }
        let routed = self.rt.config.routing.is_some();
        if !routed && self.backend.is_some() {
            datanodes = 1;
        }
        let mut mark = self.mark;
        if !routed && mark.route.is_none() {
            mark.route = Some(RouteKind::Relay);
        }
        let bytes_out = self.client.take_written();
        let payload = self.client.packet_payload();
        let text: &[u8] = if cmd == COM_QUERY { &payload[1..] } else { &[] };
        let schema = if routed {
            self.logical.as_deref()
        } else {
            self.want.schema.as_deref()
        };
        let s = Statement {
            command: cmd,
            text,
            mark,
            schema,
            user: &self.user,
            client: &self.peer_host,
            datanodes,
            elapsed,
            bytes_in,
            bytes_out,
        };
        self.shared.observe.command(&s, self.rt.slots.as_ref());
    }
}
