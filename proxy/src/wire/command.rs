//! Client commands: their bytes (the first byte of every client packet after the connection
//! phase), and [`Command`], a command packet decoded once by the session's command loop.

use crate::error::{Error, Result};

pub const COM_QUIT: u8 = 0x01;
pub const COM_INIT_DB: u8 = 0x02;
pub const COM_QUERY: u8 = 0x03;
pub const COM_FIELD_LIST: u8 = 0x04;
pub const COM_STATISTICS: u8 = 0x09;
pub const COM_PING: u8 = 0x0E;
pub const COM_CHANGE_USER: u8 = 0x11;
pub const COM_STMT_PREPARE: u8 = 0x16;
pub const COM_STMT_EXECUTE: u8 = 0x17;
pub const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
pub const COM_STMT_CLOSE: u8 = 0x19;
pub const COM_STMT_RESET: u8 = 0x1A;
pub const COM_SET_OPTION: u8 = 0x1B;
pub const COM_STMT_FETCH: u8 = 0x1C;
pub const COM_RESET_CONNECTION: u8 = 0x1F;

/// COM_SET_OPTION arguments.
pub const MYSQL_OPTION_MULTI_STATEMENTS_ON: u16 = 0;
pub const MYSQL_OPTION_MULTI_STATEMENTS_OFF: u16 = 1;

/// A readable name for logs.
pub fn name(cmd: u8) -> &'static str {
    match cmd {
        COM_QUIT => "COM_QUIT",
        COM_INIT_DB => "COM_INIT_DB",
        COM_QUERY => "COM_QUERY",
        COM_FIELD_LIST => "COM_FIELD_LIST",
        COM_STATISTICS => "COM_STATISTICS",
        COM_PING => "COM_PING",
        COM_CHANGE_USER => "COM_CHANGE_USER",
        COM_STMT_PREPARE => "COM_STMT_PREPARE",
        COM_STMT_EXECUTE => "COM_STMT_EXECUTE",
        COM_STMT_SEND_LONG_DATA => "COM_STMT_SEND_LONG_DATA",
        COM_STMT_CLOSE => "COM_STMT_CLOSE",
        COM_STMT_RESET => "COM_STMT_RESET",
        COM_SET_OPTION => "COM_SET_OPTION",
        COM_STMT_FETCH => "COM_STMT_FETCH",
        COM_RESET_CONNECTION => "COM_RESET_CONNECTION",
        _ => "unknown command",
    }
}

/// The statement id at the front of a COM_STMT_* payload.
pub fn stmt_id(payload: &[u8]) -> Option<u32> {
    let b = payload.get(1..5)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// A client command, decoded once from its packet: the session's command loop matches it and
/// hands it on (to the executor with the router, to the relay without). A statement's text
/// and an execute's parameters stay in the packet buffer, read there by whoever runs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Ping,
    Query,
    InitDb(String),
    FieldList,
    Statistics,
    /// COM_SET_OPTION: multi-statements on (`true`) or off.
    SetOption(bool),
    ResetConnection,
    ChangeUser,
    StmtPrepare,
    /// COM_STMT_EXECUTE of statement `id`; `cursor`: the client asked for a read-only cursor.
    StmtExecute {
        id: u32,
        cursor: bool,
    },
    StmtFetch(u32),
    StmtReset(u32),
    StmtSendLongData(u32),
    StmtClose(u32),
}

impl Command {
    /// Decodes a command packet's payload (its command byte first; COM_QUIT is the loop's
    /// own and never gets here). An unknown command or COM_SET_OPTION argument is 1047, as
    /// MariaDB answers it.
    pub fn decode(payload: &[u8]) -> Result<Command> {
        let Some(&cmd) = payload.first() else {
            return Err(Error::reply(1047, b"08S01", "Empty command packet"));
        };
        let id = || stmt_id(payload).unwrap_or(0);
        Ok(match cmd {
            COM_PING => Command::Ping,
            COM_QUERY => Command::Query,
            COM_INIT_DB => Command::InitDb(String::from_utf8_lossy(&payload[1..]).into_owned()),
            COM_FIELD_LIST => Command::FieldList,
            COM_STATISTICS => Command::Statistics,
            COM_SET_OPTION => match payload.get(1..3).map(|b| u16::from_le_bytes([b[0], b[1]])) {
                Some(MYSQL_OPTION_MULTI_STATEMENTS_ON) => Command::SetOption(true),
                Some(MYSQL_OPTION_MULTI_STATEMENTS_OFF) => Command::SetOption(false),
                _ => {
                    return Err(Error::reply(
                        1047,
                        b"08S01",
                        "Unknown COM_SET_OPTION option",
                    ));
                }
            },
            COM_RESET_CONNECTION => Command::ResetConnection,
            COM_CHANGE_USER => Command::ChangeUser,
            COM_STMT_PREPARE => Command::StmtPrepare,
            // The flags byte after the statement id; CURSOR_TYPE_READ_ONLY is 1.
            COM_STMT_EXECUTE => Command::StmtExecute {
                id: id(),
                cursor: payload.get(5).is_some_and(|f| f & 1 != 0),
            },
            COM_STMT_FETCH => Command::StmtFetch(id()),
            COM_STMT_RESET => Command::StmtReset(id()),
            COM_STMT_SEND_LONG_DATA => Command::StmtSendLongData(id()),
            COM_STMT_CLOSE => Command::StmtClose(id()),
            other => return Err(Error::unknown_command(other)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_commands_and_refuses_unknown_ones() {
        assert_eq!(Command::decode(&[COM_PING]).unwrap(), Command::Ping);
        assert_eq!(
            Command::decode(b"\x02shop").unwrap(),
            Command::InitDb("shop".into())
        );
        assert_eq!(
            Command::decode(&[COM_STMT_EXECUTE, 7, 0, 0, 0, 1, 1, 0, 0, 0]).unwrap(),
            Command::StmtExecute {
                id: 7,
                cursor: true
            }
        );
        assert_eq!(
            Command::decode(&[COM_SET_OPTION, 1, 0]).unwrap(),
            Command::SetOption(false)
        );
        let code = |p: &[u8]| Command::decode(p).unwrap_err().as_reply().map(|r| r.0);
        assert_eq!(code(&[COM_SET_OPTION, 9, 0]), Some(1047));
        assert_eq!(code(&[0x42]), Some(1047));
        assert_eq!(code(&[]), Some(1047));
    }
}
