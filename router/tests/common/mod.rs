//! What the router's integration tests share, and `tests/tests/router_reading.rs` with them
//! (by path): the golden topology and a small deterministic generator.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use shoal_router::config::Config;
use shoal_router::topology::Topology;

/// The topology of `golden/topology.yaml`, built once.
pub fn golden_topology() -> Arc<Topology> {
    static TOPO: OnceLock<Arc<Topology>> = OnceLock::new();
    TOPO.get_or_init(|| {
        let cfg = Config::from_yaml_str(include_str!("../golden/topology.yaml"))
            .expect("parse golden/topology.yaml");
        Arc::new(Topology::build(&cfg).expect("build golden/topology.yaml"))
    })
    .clone()
}

/// A small deterministic generator (xorshift; a seed drives it, never 0).
pub struct Gen(pub u64);

impl Gen {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}
