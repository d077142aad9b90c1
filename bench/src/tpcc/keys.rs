//! TPC-C's random keys (clause 2.1.6 and 4.3.2): NURand(A, x, y) with its run-time constants C,
//! customer last names from three syllables, and the random strings of the load.

use rand::Rng;

const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// The C of NURand(255, ...) the load's last names use.
pub const C_LAST_LOAD: u32 = 157;
/// The C of NURand(255, ...) at run time: 66 from the load's, inside the spec's window
/// (65..=119, not 96 or 112), so a run's names hit loaded customers as the spec intends.
pub const C_LAST_RUN: u32 = 223;

/// The run's constants C (clause 2.1.6): C_LAST fixed as above, C_ID and OL_I_ID drawn per run.
#[derive(Debug, Clone, Copy)]
pub struct Constants {
    pub c_last: u32,
    pub c_id: u32,
    pub ol_i_id: u32,
}

impl Constants {
    pub fn for_run(rng: &mut impl Rng) -> Constants {
        Constants {
            c_last: C_LAST_RUN,
            c_id: rng.random_range(0..=1023),
            ol_i_id: rng.random_range(0..=8191),
        }
    }
}

/// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
pub fn nurand(rng: &mut impl Rng, a: u32, c: u32, x: u32, y: u32) -> u32 {
    (((rng.random_range(0..=a) | rng.random_range(x..=y)) + c) % (y - x + 1)) + x
}

/// The last name of number `n` (0..=999): the syllables of its three digits.
pub fn last_name(n: u32) -> String {
    let n = n % 1000;
    format!(
        "{}{}{}",
        SYLLABLES[(n / 100) as usize],
        SYLLABLES[(n / 10 % 10) as usize],
        SYLLABLES[(n % 10) as usize]
    )
}

/// Random lowercase letters, `min..=max` of them.
pub fn astring(rng: &mut impl Rng, min: usize, max: usize) -> String {
    let len = rng.random_range(min..=max);
    (0..len)
        .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
        .collect()
}

/// Random digits, exactly `len` of them.
pub fn nstring(rng: &mut impl Rng, len: usize) -> String {
    (0..len)
        .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
        .collect()
}

/// `i_data` / `s_data`: 26..50 characters, 10% of them holding "ORIGINAL" somewhere.
pub fn data_with_original(rng: &mut impl Rng) -> String {
    let mut s = astring(rng, 26, 50);
    if rng.random_range(0..10) == 0 {
        let at = rng.random_range(0..=s.len() - 8);
        s.replace_range(at..at + 8, "ORIGINAL");
    }
    s
}

/// A zip code: 4 random digits then `11111`.
pub fn zip(rng: &mut impl Rng) -> String {
    format!("{}11111", nstring(rng, 4))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn last_names_are_three_syllables() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
    }

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut hits = vec![0u32; 3001];
        for _ in 0..200_000 {
            let v = nurand(&mut rng, 1023, 259, 1, 3000);
            assert!((1..=3000).contains(&v));
            hits[v as usize] += 1;
        }
        let max = *hits.iter().max().unwrap();
        // Uniform would give about 67 per value; NURand makes some values far more frequent.
        assert!(max > 150, "{max}");
    }

    #[test]
    fn the_run_constant_keeps_the_spec_distance() {
        let d = C_LAST_RUN.abs_diff(C_LAST_LOAD);
        assert!((65..=119).contains(&d) && d != 96 && d != 112);
    }
}
