//! Hand-written deserialisers for values that YAML may spell more than one way.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

/// A literal in the config (list values, range bounds): an integer or a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scalar {
    Int(i128),
    Str(String),
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Str(s) => write!(f, "{s:?}"),
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an integer or a string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v.into()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v.into()))
            }
            fn visit_i128<E: de::Error>(self, v: i128) -> Result<Scalar, E> {
                Ok(Scalar::Int(v))
            }
            fn visit_u128<E: de::Error>(self, v: u128) -> Result<Scalar, E> {
                i128::try_from(v)
                    .map(Scalar::Int)
                    .map_err(|_| E::custom("integer too large"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Err(E::custom(format!(
                    "{v} is a float; write integers, or quote the value to make it a string"
                )))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Err(E::custom(format!(
                    "{v} is a boolean; quote it if you mean the string"
                )))
            }
        }
        d.deserialize_any(V)
    }
}

/// What a rule does with a NULL shard key: route it to one shard, or refuse it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NullPolicy {
    Shard(usize),
    Error,
}

impl Default for NullPolicy {
    fn default() -> Self {
        NullPolicy::Shard(0)
    }
}

impl<'de> Deserialize<'de> for NullPolicy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = NullPolicy;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a shard index or `error`")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<NullPolicy, E> {
                usize::try_from(v)
                    .map(NullPolicy::Shard)
                    .map_err(|_| E::custom("shard index too large"))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<NullPolicy, E> {
                usize::try_from(v)
                    .map(NullPolicy::Shard)
                    .map_err(|_| E::custom("shard index must not be negative"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<NullPolicy, E> {
                if v == "error" {
                    Ok(NullPolicy::Error)
                } else {
                    Err(E::custom(format!(
                        "expected a shard index or `error`, found {v:?}"
                    )))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A list of datanode names in which each item may be a range: `dn$1-4`, `[dn1, dn$3-4]`, or a
/// comma-separated string `"dn1, dn3"`. Kept as written; `Topology::build` expands it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamePatterns(pub Vec<String>);

impl<'de> Deserialize<'de> for NamePatterns {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NamePatterns;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a datanode name, a range like dn$1-4, or a list of them")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<NamePatterns, E> {
                Ok(NamePatterns(
                    v.split(',').map(|s| s.trim().to_string()).collect(),
                ))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NamePatterns, A::Error> {
                let mut out = Vec::new();
                while let Some(s) = seq.next_element::<String>()? {
                    out.push(s.trim().to_string());
                }
                Ok(NamePatterns(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// Durations: an integer number of seconds, or a string with a unit: `500ms`, `30s`, `5m`, `1h`.
pub mod duration {
    use super::*;
    use std::time::Duration;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("seconds, or a duration like 500ms, 30s, 5m, 1h")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
                Ok(Duration::from_secs(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
                u64::try_from(v)
                    .map(Duration::from_secs)
                    .map_err(|_| E::custom("a duration must not be negative"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
                parse(v).ok_or_else(|| {
                    E::custom(format!("bad duration {v:?}: use e.g. 500ms, 30s, 5m or 1h"))
                })
            }
        }
        d.deserialize_any(V)
    }

    pub(crate) fn parse(s: &str) -> Option<Duration> {
        let s = s.trim();
        let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        if digits == 0 {
            return None;
        }
        let n: u64 = s[..digits].parse().ok()?;
        let secs = |m: u64| n.checked_mul(m).map(Duration::from_secs);
        match s[digits..].trim() {
            "" | "s" => secs(1),
            "ms" => Some(Duration::from_millis(n)),
            "m" | "min" => secs(60),
            "h" => secs(3600),
            _ => None,
        }
    }
}
