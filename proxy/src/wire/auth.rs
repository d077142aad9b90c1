//! Client authentication: what the config stores for a user (a plain password or a hash, read
//! by `config::secret_of` when the configuration loads) and checking what a client proves with
//! it, for `mysql_native_password` and `caching_sha2_password`.

use mysql_common::scramble::scramble_native;
use rand::Rng;
use sha1::{Digest, Sha1};
use sha2::Sha256;

pub const NATIVE_PLUGIN: &[u8] = b"mysql_native_password";
pub const SHA2_PLUGIN: &[u8] = b"caching_sha2_password";

/// The plugin a user authenticates with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthPlugin {
    Native,
    CachingSha2,
}

impl AuthPlugin {
    pub fn name(self) -> &'static [u8] {
        match self {
            AuthPlugin::Native => NATIVE_PLUGIN,
            AuthPlugin::CachingSha2 => SHA2_PLUGIN,
        }
    }

    pub fn from_name(name: &[u8]) -> Option<AuthPlugin> {
        match name {
            NATIVE_PLUGIN => Some(AuthPlugin::Native),
            SHA2_PLUGIN => Some(AuthPlugin::CachingSha2),
            _ => None,
        }
    }
}

/// What the proxy knows of a user's password.
#[derive(Clone, PartialEq, Eq)]
pub enum Secret {
    Plain(String),
    /// SHA1(SHA1(password)), from `*<40 hex>`.
    NativeHash([u8; 20]),
    /// `$A$005$<salt><digest>`: SHA-256 crypt of the password with `salt`, 1000 x `rounds`.
    Sha2Hash {
        rounds: u32,
        salt: Vec<u8>,
        digest: String,
    },
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a password or a hash into logs.
        f.write_str(match self {
            Secret::Plain(_) => "Plain(..)",
            Secret::NativeHash(_) => "NativeHash(..)",
            Secret::Sha2Hash { .. } => "Sha2Hash(..)",
        })
    }
}

impl Secret {
    /// The plugin a user with this secret authenticates with unless the config names one.
    pub fn default_plugin(&self) -> AuthPlugin {
        match self {
            Secret::Sha2Hash { .. } => AuthPlugin::CachingSha2,
            _ => AuthPlugin::Native,
        }
    }

    pub fn is_empty(&self) -> bool {
        matches!(self, Secret::Plain(p) if p.is_empty())
    }

    /// Whether `response` is the native-password scramble of this password over `nonce`. An
    /// empty password is proven by an empty response, as MySQL does.
    pub fn verify_native(&self, nonce: &[u8], response: &[u8]) -> bool {
        match self {
            Secret::Plain(p) if p.is_empty() => response.is_empty(),
            Secret::Plain(p) => match scramble_native(nonce, p.as_bytes()) {
                Some(expected) => constant_time_eq(&expected, response),
                None => false,
            },
            Secret::NativeHash(stage2) => {
                // response = SHA1(pw) XOR SHA1(nonce + stage2): recover SHA1(pw), hash it again.
                if response.len() != 20 {
                    return false;
                }
                let mut m = Sha1::new();
                m.update(nonce);
                m.update(stage2);
                let mask = m.finalize();
                let stage1: Vec<u8> = response
                    .iter()
                    .zip(mask.iter())
                    .map(|(a, b)| a ^ b)
                    .collect();
                constant_time_eq(&Sha1::digest(&stage1), stage2)
            }
            Secret::Sha2Hash { .. } => false,
        }
    }

    /// SHA256(SHA256(password)), what a `caching_sha2_password` fast authentication is checked
    /// against; known from a plain password, learnt from a full authentication otherwise.
    pub fn sha2_stage2(&self) -> Option<[u8; 32]> {
        match self {
            Secret::Plain(p) => Some(sha256(&sha256(p.as_bytes()))),
            _ => None,
        }
    }

    /// Checks a password received in clear (caching_sha2 full authentication, over TLS or
    /// RSA-encrypted).
    pub fn verify_clear(&self, password: &[u8]) -> bool {
        match self {
            Secret::Plain(p) => constant_time_eq(p.as_bytes(), password),
            Secret::NativeHash(stage2) => {
                constant_time_eq(&Sha1::digest(Sha1::digest(password)), stage2)
            }
            Secret::Sha2Hash {
                rounds,
                salt,
                digest,
            } => constant_time_eq(
                sha256_crypt(password, salt, rounds.saturating_mul(1000)).as_bytes(),
                digest.as_bytes(),
            ),
        }
    }
}

pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// Whether a caching_sha2 scramble (SHA256(pw) XOR SHA256(stage2 + nonce)) proves `stage2`.
pub fn verify_sha2_scramble(stage2: &[u8; 32], nonce: &[u8], response: &[u8]) -> bool {
    if response.len() != 32 {
        return false;
    }
    let mut m = Sha256::new();
    m.update(stage2);
    m.update(nonce);
    let mask = m.finalize();
    let stage1: Vec<u8> = response
        .iter()
        .zip(mask.iter())
        .map(|(a, b)| a ^ b)
        .collect();
    constant_time_eq(&sha256(&stage1), stage2)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `*` and the 40 upper-case hex digits of SHA1(SHA1(password)), as MySQL's `PASSWORD()`.
pub fn native_hash(password: &str) -> String {
    let h = Sha1::digest(Sha1::digest(password.as_bytes()));
    let mut s = String::from("*");
    for b in h {
        s.push_str(&format!("{b:02X}"));
    }
    s
}

/// A `caching_sha2_password` hash in MySQL's form: `$A$005$`, a 20-character salt and the
/// SHA-256 crypt digest of 5000 rounds.
pub fn sha2_hash(password: &str) -> String {
    const SALT_CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789./";
    let mut rng = rand::rng();
    let salt: Vec<u8> = (0..20)
        .map(|_| SALT_CHARS[rng.random_range(0..SALT_CHARS.len())])
        .collect();
    format!(
        "$A$005${}{}",
        String::from_utf8_lossy(&salt),
        sha256_crypt(password.as_bytes(), &salt, 5000)
    )
}

/// The digest part of Drepper's SHA-256 crypt (what `$5$` hashes and MySQL's `$A$` hashes
/// end with), without its 16-byte salt limit (MySQL salts are 20 bytes).
pub fn sha256_crypt(key: &[u8], salt: &[u8], rounds: u32) -> String {
    let b = {
        let mut h = Sha256::new();
        h.update(key);
        h.update(salt);
        h.update(key);
        h.finalize()
    };
    let mut a = Sha256::new();
    a.update(key);
    a.update(salt);
    let mut n = key.len();
    while n > 32 {
        a.update(b);
        n -= 32;
    }
    a.update(&b[..n]);
    let mut cnt = key.len();
    while cnt > 0 {
        if cnt & 1 != 0 {
            a.update(b);
        } else {
            a.update(key);
        }
        cnt >>= 1;
    }
    let mut prev: [u8; 32] = a.finalize().into();
    let dp: [u8; 32] = {
        let mut h = Sha256::new();
        for _ in 0..key.len() {
            h.update(key);
        }
        h.finalize().into()
    };
    let p: Vec<u8> = dp.iter().cycle().take(key.len()).copied().collect();
    let ds: [u8; 32] = {
        let mut h = Sha256::new();
        for _ in 0..16 + prev[0] as usize {
            h.update(salt);
        }
        h.finalize().into()
    };
    let s: Vec<u8> = ds.iter().cycle().take(salt.len()).copied().collect();
    for i in 0..rounds {
        let mut c = Sha256::new();
        if i & 1 != 0 {
            c.update(&p);
        } else {
            c.update(prev);
        }
        if i % 3 != 0 {
            c.update(&s);
        }
        if i % 7 != 0 {
            c.update(&p);
        }
        if i & 1 != 0 {
            c.update(prev);
        } else {
            c.update(&p);
        }
        prev = c.finalize().into();
    }
    const ITOA: &[u8] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = String::with_capacity(43);
    let mut put = |b2: u8, b1: u8, b0: u8, n: usize| {
        let mut w = ((b2 as u32) << 16) | ((b1 as u32) << 8) | b0 as u32;
        for _ in 0..n {
            out.push(ITOA[(w & 0x3f) as usize] as char);
            w >>= 6;
        }
    };
    let f = prev;
    for (x, y, z) in [
        (0, 10, 20),
        (21, 1, 11),
        (12, 22, 2),
        (3, 13, 23),
        (24, 4, 14),
        (15, 25, 5),
        (6, 16, 26),
        (27, 7, 17),
        (18, 28, 8),
        (9, 19, 29),
    ] {
        put(f[x], f[y], f[z], 4);
    }
    put(0, f[31], f[30], 3);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(p: &str) -> Secret {
        Secret::Plain(p.to_string())
    }

    #[test]
    fn right_password_verifies() {
        let nonce = b"abcdefghijklmnopqrst";
        let resp = scramble_native(nonce, b"pw").unwrap();
        assert!(plain("pw").verify_native(nonce, &resp));
    }

    #[test]
    fn wrong_password_or_nonce_fails() {
        let nonce = b"abcdefghijklmnopqrst";
        let resp = scramble_native(nonce, b"pw").unwrap();
        assert!(!plain("pw2").verify_native(nonce, &resp));
        assert!(!plain("pw").verify_native(b"Abcdefghijklmnopqrst", &resp));
        assert!(!plain("pw").verify_native(nonce, &resp[..19]));
        assert!(!plain("pw").verify_native(nonce, b""));
    }

    #[test]
    fn empty_password_needs_empty_response() {
        assert!(plain("").verify_native(b"abcdefghijklmnopqrst", b""));
        assert!(!plain("").verify_native(b"abcdefghijklmnopqrst", &[1; 20]));
    }

    /// Known vector: the stored hash of "password" is *2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19.
    #[test]
    fn native_hash_is_mysqls_and_verifies_scrambles() {
        assert_eq!(
            native_hash("password"),
            "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19"
        );
        let secret = crate::config::secret_of("*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19");
        assert!(matches!(secret, Secret::NativeHash(_)));
        let nonce = b"01234567890123456789";
        let resp = scramble_native(nonce, b"password").unwrap();
        assert!(secret.verify_native(nonce, &resp));
        let wrong = scramble_native(nonce, b"passwore").unwrap();
        assert!(!secret.verify_native(nonce, &wrong));
        assert!(secret.verify_clear(b"password"));
        assert!(!secret.verify_clear(b"Password"));
    }

    /// As `openssl passwd -5 -salt saltstring 'Hello world!'` prints it.
    #[test]
    fn sha256_crypt_matches_the_reference() {
        assert_eq!(
            sha256_crypt(b"Hello world!", b"saltstring", 5000),
            "5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5"
        );
    }

    #[test]
    fn sha2_hash_round_trips() {
        let h = sha2_hash("s3cret");
        assert_eq!(h.len(), 70);
        let secret = crate::config::secret_of(&h);
        assert_eq!(secret.default_plugin(), AuthPlugin::CachingSha2);
        assert!(secret.verify_clear(b"s3cret"));
        assert!(!secret.verify_clear(b"s3cres"));
        assert!(!secret.verify_native(b"01234567890123456789", &[0; 20]));
    }

    #[test]
    fn sha2_fast_auth_scramble() {
        let nonce = b"abcdefghijklmnopqrst";
        let resp = mysql_common::scramble::scramble_sha256(nonce, b"pw").unwrap();
        let stage2 = plain("pw").sha2_stage2().unwrap();
        assert!(verify_sha2_scramble(&stage2, nonce, &resp));
        assert!(!verify_sha2_scramble(
            &stage2,
            b"Abcdefghijklmnopqrst",
            &resp
        ));
        let other = plain("pw2").sha2_stage2().unwrap();
        assert!(!verify_sha2_scramble(&other, nonce, &resp));
    }

    #[test]
    fn secrets_do_not_print() {
        assert_eq!(format!("{:?}", plain("hunter2")), "Plain(..)");
    }
}
