//! Checking a client's `mysql_native_password` scramble against a known password.

use mysql_common::scramble::scramble_native;

/// Whether `response` is the native-password scramble of `password` over `nonce`. An empty
/// password is proven by an empty response, as MySQL does.
pub fn verify_native(nonce: &[u8], password: &str, response: &[u8]) -> bool {
    if password.is_empty() {
        return response.is_empty();
    }
    match scramble_native(nonce, password.as_bytes()) {
        Some(expected) => constant_time_eq(&expected, response),
        None => false,
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn right_password_verifies() {
        let nonce = b"abcdefghijklmnopqrst";
        let resp = scramble_native(nonce, b"pw").unwrap();
        assert!(verify_native(nonce, "pw", &resp));
    }

    #[test]
    fn wrong_password_or_nonce_fails() {
        let nonce = b"abcdefghijklmnopqrst";
        let resp = scramble_native(nonce, b"pw").unwrap();
        assert!(!verify_native(nonce, "pw2", &resp));
        assert!(!verify_native(b"Abcdefghijklmnopqrst", "pw", &resp));
        assert!(!verify_native(nonce, "pw", &resp[..19]));
        assert!(!verify_native(nonce, "pw", b""));
    }

    #[test]
    fn empty_password_needs_empty_response() {
        assert!(verify_native(b"abcdefghijklmnopqrst", "", b""));
        assert!(!verify_native(b"abcdefghijklmnopqrst", "", &[1; 20]));
    }

    /// Known vector: the stored hash of "password" is *2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19,
    /// so SHA1(password) XOR SHA1(nonce + that) must reproduce what libmysqlclient sends.
    #[test]
    fn matches_the_reference_algorithm() {
        use sha1::{Digest, Sha1};
        let nonce = b"01234567890123456789";
        let h1 = Sha1::digest(b"password");
        let h2 = Sha1::digest(h1);
        assert_eq!(
            h2.iter().map(|b| format!("{b:02X}")).collect::<String>(),
            "2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19"
        );
        let mut m = Sha1::new();
        m.update(nonce);
        m.update(h2);
        let h3 = m.finalize();
        let expected: Vec<u8> = h1.iter().zip(h3.iter()).map(|(a, b)| a ^ b).collect();
        assert!(verify_native(nonce, "password", &expected));
    }
}
