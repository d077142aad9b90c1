//! The cluster of the fault scenarios: primaries `p0`, `p1` (instances 0, 1), each with one
//! replica (`p0r0` = 2, `p1r0` = 3), databases `a` and `b` on each (datanodes dn1..dn4), the
//! tables created on the primaries directly, and Shoal over them as a process.

use std::path::PathBuf;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use shoal_bench::cluster::{Cluster, ClusterSpec};

use super::Settings;
use super::workload::Accounts;
use crate::{ShoalProcess, scratch_dir, unique_name};

/// The datanodes, in order: (primary index, database).
pub const DATANODES: [(usize, &str); 4] = [(0, "a"), (0, "b"), (1, "a"), (1, "b")];
/// Primary `i`'s replica is instance `REPLICA_OF[i]`.
pub const REPLICA_OF: [usize; 2] = [2, 3];
pub const ACCOUNTS: u64 = 16;
pub const INITIAL_BALANCE: i64 = 1000;

const TABLES: [&str; 4] = [
    "CREATE TABLE account (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB",
    "CREATE TABLE leg (xfer BIGINT NOT NULL, account BIGINT NOT NULL, delta BIGINT NOT NULL, \
     PRIMARY KEY (xfer, account)) ENGINE=InnoDB",
    "CREATE TABLE event (id BIGINT PRIMARY KEY, writer INT NOT NULL, seq BIGINT NOT NULL, \
     op BIGINT NOT NULL) ENGINE=InnoDB",
    "CREATE TABLE setting (k VARCHAR(32) PRIMARY KEY, v BIGINT NOT NULL, op BIGINT NOT NULL) \
     ENGINE=InnoDB",
];
/// The tables, for the checks.
pub const TABLE_NAMES: [&str; 4] = ["account", "leg", "event", "setting"];

pub struct Fixture {
    pub cluster: Cluster,
    pub shoal: ShoalProcess,
    pub settings: Settings,
    pub accounts: Accounts,
    pub config: PathBuf,
}

impl Fixture {
    pub async fn start(settings: Settings) -> Fixture {
        let cluster = Cluster::start(ClusterSpec {
            primaries: 2,
            replicas_per_primary: 1,
            databases: vec!["a".into(), "b".into()],
            ..ClusterSpec::default()
        })
        .await
        .unwrap_or_else(|e| panic!("cannot start the cluster: {e}"));
        for p in 0..2 {
            let mut c = admin(&cluster, p).await;
            for db in ["a", "b"] {
                for ddl in TABLES {
                    c.query_drop(format!("USE {db}")).await.unwrap();
                    c.query_drop(ddl)
                        .await
                        .unwrap_or_else(|e| panic!("{ddl}: {e}"));
                }
            }
        }
        let config = write_config(&cluster, &settings);
        let shoal = ShoalProcess::start(&["--config".to_string(), config.display().to_string()]);
        // The accounts go in through Shoal, so that its rule places them; where they landed is
        // then read from the backends.
        let mut c = Conn::new(client_opts(&shoal)).await.unwrap_or_else(|e| {
            panic!("connect through shoal: {e}\n{}", shoal.log());
        });
        let values: Vec<String> = (1..=ACCOUNTS)
            .map(|id| format!("({id}, {INITIAL_BALANCE})"))
            .collect();
        c.query_drop(format!(
            "INSERT INTO account (id, balance) VALUES {}",
            values.join(", ")
        ))
        .await
        .unwrap_or_else(|e| panic!("insert accounts: {e}\n{}", shoal.log()));
        let _ = c.disconnect().await;
        let mut on_server: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
        for (p, db) in DATANODES {
            let mut a = admin(&cluster, p).await;
            let ids: Vec<u64> = a
                .query(format!("SELECT id FROM {db}.account ORDER BY id"))
                .await
                .unwrap();
            on_server[p].extend(ids);
        }
        assert!(
            on_server.iter().all(|ids| !ids.is_empty()),
            "the accounts must be spread over both servers: {on_server:?}"
        );
        cluster.sync_replicas().await.unwrap();
        if settings.writable_replicas {
            for r in REPLICA_OF {
                let mut c = admin(&cluster, r).await;
                c.query_drop("SET GLOBAL read_only = 0").await.unwrap();
            }
        }
        Fixture {
            cluster,
            shoal,
            settings,
            accounts: Accounts {
                on_server,
                initial_balance: INITIAL_BALANCE,
            },
            config,
        }
    }

    /// Client options through Shoal (user `app`, schema `shop`).
    pub fn client_opts(&self) -> Opts {
        client_opts(&self.shoal)
    }
}

fn client_opts(shoal: &ShoalProcess) -> Opts {
    shoal.opts_as("app", "app-secret", Some("shop"))
}

pub async fn admin(cluster: &Cluster, i: usize) -> Conn {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match Conn::new(cluster.admin_opts(i)).await {
            Ok(c) => return c,
            Err(e) if tokio::time::Instant::now() > deadline => {
                panic!("admin connection to instance {i}: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Two datahosts (a primary and its replica each, reads balanced over both), four datanodes,
/// schema `shop` with `account`, `leg` (sharded by account: each leg on its account's
/// datanode), `event` sharded, `setting` global.
fn write_config(cluster: &Cluster, settings: &Settings) -> PathBuf {
    let inst = cluster.instances();
    let (u, pw) = (cluster.user(), cluster.password());
    let endpoint = |i: usize, extra: &str| {
        format!(
            "{{ address: \"{}:{}\", user: {u}, password: {pw}{extra} }}",
            inst[i].host, inst[i].port
        )
    };
    let mut text = String::new();
    if let Some(t) = settings.query_timeout {
        text.push_str(&format!("server:\n  query_timeout: {}ms\n", t.as_millis()));
    }
    text.push_str("users:\n  - { name: app, password: app-secret, schemas: [shop] }\n");
    text.push_str("datahosts:\n");
    for (p, replica) in REPLICA_OF.iter().enumerate() {
        text.push_str(&format!(
            "  - name: dh{p}\n    primary: {}\n    replicas:\n      - {}\n    \
             balance: round_robin\n    pool: {{ max: 40 }}\n",
            endpoint(p, ", weight: 1"),
            endpoint(*replica, "")
        ));
        if settings.reads_from_replicas_when_primary_down {
            text.push_str("    read_when_primary_down: replicas\n");
        }
    }
    text.push_str("datanodes:\n");
    for (k, (p, db)) in DATANODES.iter().enumerate() {
        text.push_str(&format!(
            "  - {{ name: dn{}, datahost: dh{p}, database: {db} }}\n",
            k + 1
        ));
    }
    let all = "datanodes: \"dn1, dn2, dn3, dn4\"";
    text.push_str("rules:\n  - { name: by_id, algorithm: mod }\n");
    text.push_str("schemas:\n  - name: shop\n    default_datanode: dn1\n");
    if settings.transactions_key {
        text.push_str(&format!("    transactions: {}\n", settings.mode.as_str()));
    }
    text.push_str(&format!(
        "    tables:\n      \
         - {{ name: account, type: sharded, shard_key: id, rule: by_id, {all} }}\n      \
         - {{ name: leg, type: sharded, shard_key: account, rule: by_id, {all} }}\n      \
         - {{ name: event, type: sharded, shard_key: id, rule: by_id, {all} }}\n      \
         - {{ name: setting, type: global, {all} }}\n"
    ));
    let path = scratch_dir().join(format!("{}.yaml", unique_name("faults")));
    std::fs::write(&path, text).expect("write config");
    path
}
