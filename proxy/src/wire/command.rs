//! Command bytes (first byte of every client packet after the connection phase).

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
