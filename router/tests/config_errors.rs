//! Bad configurations are refused with an error that names the offending key.

use std::time::Duration;

use shoal_router::config::{Balance, Config, ReadYourWrites};
use shoal_router::topology::Topology;

const BASE: &str = r#"
users:
  - { name: app, password: pw, schemas: [shop] }
datahosts:
  - name: dh1
    primary: { address: 127.0.0.1:3307, user: shoal }
  - name: dh2
    primary: { address: 127.0.0.1:3308, user: shoal }
datanodes:
  - { name: dn$1-4, datahost: dh$1-2, database: db$1-2 }
rules:
  - { name: by_id, algorithm: mod }
schemas:
  - name: shop
    default_datanode: dn1
    tables:
      - { name: orders, type: sharded, shard_key: id, rule: by_id, datanodes: dn$1-4 }
      - { name: item, type: child, parent: orders, join_key: order_id }
      - { name: country, type: global, datanodes: dn$1-4 }
"#;

/// Applies a textual edit to BASE and returns the error (parse or validation).
fn error_of(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "BASE lacks {from:?}");
    let text = BASE.replacen(from, to, 1);
    match Config::from_yaml_str(&text) {
        Err(e) => e.to_string(),
        Ok(cfg) => match Topology::build(&cfg) {
            Err(e) => {
                assert_eq!(cfg.validate().unwrap_err(), e);
                assert_eq!((e.code(), e.sqlstate()), (1105, "HY000"));
                e.to_string()
            }
            Ok(_) => panic!("accepted: {from:?} -> {to:?}"),
        },
    }
}

fn check(from: &str, to: &str, expect: &[&str]) {
    let e = error_of(from, to);
    for x in expect {
        assert!(e.contains(x), "error for {to:?} should contain {x:?}:\n{e}");
    }
}

#[test]
fn base_is_valid() {
    let t = Topology::build(&Config::from_yaml_str(BASE).unwrap()).unwrap();
    assert_eq!(t.datanodes.len(), 4);
    assert_eq!(t.server.listen, "127.0.0.1:8066");
    assert_eq!(t.datahosts[0].pool.max, 64);
    assert_eq!(t.datahosts[0].primary.weight, None);
    assert_eq!(t.datahosts[0].read_weight(0), 0);
    assert_eq!(t.datahosts[0].balance, Balance::PrimaryOnly);
    assert_eq!(t.datahosts[0].read_your_writes, ReadYourWrites::Off);
    let h = &t.datahosts[0].health;
    assert_eq!(h.heartbeat, Duration::from_secs(1));
    assert_eq!(h.timeout, Duration::from_secs(1));
    assert_eq!((h.down_after, h.up_after), (3, 2));
    assert_eq!(h.max_replication_lag, Duration::from_secs(10));
}

const REPLICAS: &str = r#"
    replicas:
      - { address: 127.0.0.1:3317, user: shoal, weight: 3 }
      - { address: 127.0.0.1:3327, user: shoal }
"#;

/// BASE with replicas on dh1 and `extra` keys added to it.
fn with_replicas(extra: &str) -> String {
    BASE.replacen(
        "    primary: { address: 127.0.0.1:3307, user: shoal }\n",
        &format!("    primary: {{ address: 127.0.0.1:3307, user: shoal }}\n{REPLICAS}{extra}"),
        1,
    )
}

#[test]
fn read_balancing_settings_are_read() {
    let text = with_replicas(
        "    balance: weighted_random\n    read_your_writes: { causal: 500ms }\n    \
         health: { heartbeat: 200ms, timeout: 2s, down_after: 2, up_after: 1, \
         max_replication_lag: 5 }\n",
    );
    let t = Topology::build(&Config::from_yaml_str(&text).unwrap()).unwrap();
    let h = &t.datahosts[0];
    assert_eq!(h.balance, Balance::WeightedRandom);
    assert_eq!(
        h.read_your_writes,
        ReadYourWrites::Causal(Duration::from_millis(500))
    );
    assert_eq!(
        (h.read_weight(0), h.read_weight(1), h.read_weight(2)),
        (0, 3, 1)
    );
    assert_eq!(h.health.heartbeat, Duration::from_millis(200));
    assert_eq!(h.health.max_replication_lag, Duration::from_secs(5));
    for (text, want) in [
        ("off", ReadYourWrites::Off),
        (
            "{ primary_after_write: 2s }",
            ReadYourWrites::PrimaryAfterWrite(Duration::from_secs(2)),
        ),
    ] {
        let t = with_replicas(&format!("    read_your_writes: {text}\n"));
        let cfg = Config::from_yaml_str(&t).unwrap();
        assert_eq!(cfg.datahosts[0].read_your_writes, want);
    }
}

fn replica_error(extra: &str) -> String {
    let text = with_replicas(extra);
    match Config::from_yaml_str(&text) {
        Err(e) => e.to_string(),
        Ok(cfg) => cfg.validate().expect_err(extra).to_string(),
    }
}

#[test]
fn read_balancing_errors_name_the_key() {
    let cases = [
        ("    balance: fastest\n", "fastest"),
        ("    read_your_writes: always\n", "always"),
        (
            "    read_your_writes: { causal: 0s }\n",
            "datahosts[0].read_your_writes",
        ),
        (
            "    health: { heartbeat: 0s }\n",
            "datahosts[0].health.heartbeat",
        ),
        (
            "    health: { down_after: 0 }\n",
            "datahosts[0].health.down_after",
        ),
        (
            "    health: { up_after: 0 }\n",
            "datahosts[0].health.up_after",
        ),
        (
            "    health: { timeout: 0ms }\n",
            "datahosts[0].health.timeout",
        ),
        ("    health: { beat: 1s }\n", "beat"),
    ];
    for (extra, want) in cases {
        let e = replica_error(extra);
        assert!(e.contains(want), "{extra:?}: {e}");
    }
    // Balancing without replicas, or with nothing allowed to read.
    let e = error_of(
        "    primary: { address: 127.0.0.1:3308, user: shoal }\n",
        "    primary: { address: 127.0.0.1:3308, user: shoal }\n    balance: round_robin\n",
    );
    assert!(
        e.contains("datahosts[1].balance") && e.contains("needs replicas"),
        "{e}"
    );
    let text = BASE.replacen(
        "    primary: { address: 127.0.0.1:3307, user: shoal }\n",
        "    primary: { address: 127.0.0.1:3307, user: shoal }\n    \
         replicas: [{ address: 127.0.0.1:3317, user: shoal, weight: 0 }]\n    \
         balance: least_connections\n",
        1,
    );
    let e = Config::from_yaml_str(&text)
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("datahosts[0].balance") && e.contains("weight 0"),
        "{e}"
    );
    // Reads while the primary is down need a replica that may take them.
    let e = error_of(
        "    primary: { address: 127.0.0.1:3308, user: shoal }\n",
        "    primary: { address: 127.0.0.1:3308, user: shoal }\n    \
         read_when_primary_down: replicas\n",
    );
    assert!(
        e.contains("datahosts[1].read_when_primary_down") && e.contains("needs a replica"),
        "{e}"
    );
    let e = replica_error("    read_when_primary_down: everywhere\n");
    assert!(e.contains("everywhere"), "{e}");
    let ok = BASE.replacen(
        "    primary: { address: 127.0.0.1:3307, user: shoal }\n",
        "    primary: { address: 127.0.0.1:3307, user: shoal }\n    \
         replicas: [{ address: 127.0.0.1:3317, user: shoal }]\n    \
         read_when_primary_down: replicas\n",
        1,
    );
    let cfg = Config::from_yaml_str(&ok).unwrap();
    cfg.validate().unwrap();
    assert_eq!(
        cfg.datahosts[0].read_when_primary_down,
        shoal_router::config::ReadWhenPrimaryDown::Replicas
    );
}

#[test]
fn typos_are_errors_with_a_location() {
    check(
        "shard_key: id,",
        "shard_kye: id,",
        &["unknown field `shard_kye`", "line 17"],
    );
    check(
        "algorithm: mod",
        "algorithm: mood",
        &["unknown variant `mood`", "line 12"],
    );
    check(
        "users:",
        "server: { listen: 1.2.3.4:1, max_conections: 5 }\nusers:",
        &["max_conections"],
    );
    check("type: global", "type: globle", &["globle"]);
    check(
        "user: shoal }\n  - name: dh2",
        "user: shoal, pasword: x }\n  - name: dh2",
        &["pasword"],
    );
}

#[test]
fn unknown_references_name_the_key() {
    check(
        "rule: by_id",
        "rule: mod5",
        &["schemas[0].tables[0].rule", "unknown rule \"mod5\""],
    );
    check(
        "default_datanode: dn1",
        "default_datanode: dn9",
        &["schemas[0].default_datanode", "dn9"],
    );
    check(
        "datahost: dh$1-2",
        "datahost: dh$1-3",
        &["datanodes[0]", "3 × 2 = 6"],
    );
    // Two datahosts naming one server: dn1 (dh1/db1) and dn3 (dh2/db1) would be one database.
    check(
        "address: 127.0.0.1:3308",
        "address: LOCALHOST:3307",
        &[
            "datanodes[0].database",
            "\"dn1\" and \"dn3\"",
            "read its rows twice",
        ],
    );
    check(
        "datanodes: dn$1-4 }\n      - { name: item",
        "datanodes: dn$1-5 }\n      - { name: item",
        &["schemas[0].tables[0].datanodes", "unknown datanode \"dn5\""],
    );
    check(
        "parent: orders",
        "parent: order",
        &[
            "schemas[0].tables[1].parent",
            "unknown parent table \"order\"",
        ],
    );
    check(
        "schemas: [shop]",
        "schemas: [shop, crm]",
        &["users[0].schemas[1]", "unknown schema \"crm\""],
    );
    check(
        "{ name: dn$1-4, datahost: dh$1-2",
        "{ name: dn$1-4, datahost: dh$0-1",
        &["datanodes[0].datahost", "unknown datahost \"dh0\""],
    );
}

#[test]
fn duplicates_are_errors() {
    check(
        "  - { name: by_id, algorithm: mod }",
        "  - { name: by_id, algorithm: mod }\n  - { name: by_id, algorithm: hash }",
        &["rules[1].name", "duplicate rule"],
    );
    check(
        "  - name: dh2\n",
        "  - name: dh1\n",
        &["datahosts[1].name", "duplicate datahost"],
    );
    check(
        "      - { name: country",
        "      - { name: ORDERS",
        &["schemas[0].tables[2].name", "duplicate table"],
    );
    check(
        "rules:",
        "  - { name: dn3, datahost: dh1, database: other }\nrules:",
        &["datanodes[1].name", "duplicate datanode \"dn3\""],
    );
    check(
        "rules:",
        "  - { name: dn9, datahost: dh1, database: db1 }\nrules:",
        &["datanodes[1].database", "\"dn1\" and \"dn9\""],
    );
    check(
        "datanodes: dn$1-4 }\n      - { name: item",
        "datanodes: [dn1, dn$1-2] }\n      - { name: item",
        &["listed twice"],
    );
    check(
        "users:\n  - { name: app, password: pw, schemas: [shop] }",
        "users:\n  - { name: app, schemas: [shop] }\n  - { name: app, schemas: [shop] }",
        &["users[1].name", "duplicate user"],
    );
    check(
        "users:\n  - { name: app, password: pw, schemas: [shop] }",
        "users:\n  - { name: app, schemas: [shop], admin: true }",
        &["users[0].admin", "an admin user needs a password"],
    );
    check(
        "users:\n  - { name: app, password: pw, schemas: [shop] }",
        "users:\n  - { name: app, password: pw, schemas: [shop], admin: yes please }",
        &["admin"],
    );
}

#[test]
fn bad_ranges_and_values() {
    check(
        "name: dn$1-4",
        "name: dn$5-2",
        &["datanodes[0].name", "start 5 is above end 2"],
    );
    check(
        "name: dn$1-4",
        "name: dn$1-",
        &["datanodes[0].name", "bad range"],
    );
    check(
        "datanodes: dn$1-4 }\n      - { name: item",
        "datanodes: [] }\n      - { name: item",
        &["schemas[0].tables[0].datanodes", "no datanodes"],
    );
    check(
        "127.0.0.1:3307",
        "127.0.0.1",
        &["datahosts[0].primary.address", "not host:port"],
    );
    check(
        "users:",
        "server: { listen: nowhere }\nusers:",
        &["server.listen"],
    );
    check(
        "users:",
        "server: { admin_listen: \"localhost:9066\" }\nusers:",
        &["server.admin_listen", "not ip:port"],
    );
    check(
        "users:",
        "server: { slow_log: { threshold: 100ms, file: \"\" } }\nusers:",
        &["server.slow_log.file"],
    );
    check(
        "users:",
        "server: { slow_log: { file: /tmp/slow.log } }\nusers:",
        &["threshold"],
    );
    check(
        "schemas: [shop]",
        "schemas: []",
        &["users[0].schemas", "at least one"],
    );
    check(
        "user: shoal }\n  - name: dh2",
        "user: shoal }\n    pool: { min: 9, max: 4 }\n  - name: dh2",
        &["datahosts[0].pool.min"],
    );
}

#[test]
fn rule_shard_counts_must_match_tables() {
    check(
        "algorithm: mod }",
        "algorithm: mod, shards: 8 }",
        &[
            "rules[0].shards",
            "the rule says 8 shards but the table has 4",
            "schemas[0].tables[0]",
        ],
    );
    check(
        "algorithm: mod }",
        "algorithm: range, ranges: [{from: 0, shard: 7}] }",
        &[
            "rules[0].ranges[0].shard",
            "shard 7 does not exist",
            "has 4 shards",
        ],
    );
    check(
        "rule: by_id,",
        "rule: by_id, tables_per_datanode: 2,",
        &["schemas[0].tables[0].physical_name", "{index}"],
    );
}

#[test]
fn child_tables_must_follow_the_shard_key() {
    check(
        "join_key: order_id }",
        "join_key: order_id, parent_key: customer_id }",
        &[
            "schemas[0].tables[1].parent_key",
            "not the shard key \"id\"",
        ],
    );
    check(
        "parent: orders",
        "parent: country",
        &["schemas[0].tables[1].parent", "global table"],
    );
    check(
        "      - { name: country",
        "      - { name: a, type: child, parent: b, join_key: x }\n      - { name: b, type: child, parent: a, join_key: x }\n      - { name: country",
        &["schemas[0].tables[2].parent", "cycle"],
    );
    check(
        "join_key: order_id }",
        "join_key: order_id, rule: by_id }",
        &[
            "schemas[0].tables[1].rule",
            "does not apply to a child table",
        ],
    );
    check(
        "parent: orders, join_key: order_id",
        "parent: orders",
        &["schemas[0].tables[1].join_key"],
    );
    // A child of a table-per-shard root needs its own numbered physical names.
    check(
        "datanodes: dn$1-4 }\n      - { name: item",
        "datanodes: dn$1-2, tables_per_datanode: 2, physical_name: 'orders_{index}' }\n      - { name: item",
        &[
            "schemas[0].tables[1].physical_name",
            "several tables per datanode",
        ],
    );
}

#[test]
fn table_kinds_need_their_keys() {
    check("shard_key: id, ", "", &["schemas[0].tables[0].shard_key"]);
    check(
        "type: global, datanodes: dn$1-4 }",
        "type: global }",
        &["schemas[0].tables[2].datanodes"],
    );
    check(
        "type: global,",
        "type: global, shard_key: id,",
        &["schemas[0].tables[2].shard_key", "global"],
    );
    check(
        "rule: by_id,",
        "rule: by_id, physical_name: 't_{bad}',",
        &["schemas[0].tables[0].physical_name", "unknown field"],
    );
}

#[test]
fn names_must_be_usable_identifiers() {
    check(
        "database: db$1-2",
        "database: 'db`$1-2'",
        &["datanodes[0].database", "identifier"],
    );
    check(
        "shard_key: id,",
        "shard_key: '',",
        &["schemas[0].tables[0].shard_key"],
    );
    check(
        "{ name: country",
        "{ name: 'c`'",
        &["schemas[0].tables[2].name"],
    );
    let long = "x".repeat(65);
    check(
        "rule: by_id,",
        &format!("rule: by_id, physical_name: '{long}_{{index}}',"),
        &["schemas[0].tables[0].physical_name", "longer than 64"],
    );
}

#[test]
fn absurd_sizes_are_refused() {
    check(
        "rule: by_id,",
        "rule: by_id, tables_per_datanode: 1000000, physical_name: 'o_{index}',",
        &[
            "schemas[0].tables[0].tables_per_datanode",
            "more than 100000 shards",
        ],
    );
    check(
        "name: dn$1-4",
        "name: dn$1-1000000",
        &["datanodes[0].name", "more than 100000 names"],
    );
}

#[test]
fn sequences_are_checked() {
    let seq = |s: &str| {
        error_of(
            "datanodes: dn$1-4 }",
            &format!("datanodes: dn$1-4, sequence: {s} }}"),
        )
    };
    assert!(seq("{ datanode: dn9 }").contains("tables[0].sequence.datanode"));
    assert!(seq("{ datanode: dn9 }").contains("unknown datanode"));
    assert!(seq("{ datanode: dn1, step: 0 }").contains("tables[0].sequence.step"));
    assert!(seq("{ datanode: \"dn1,dn2\" }").contains("tables[0].sequence.datanode"));
    assert!(seq("{ datanode: dn$1-2 }").contains("exactly one datanode"));
    assert!(seq("{ datanode: dn1, start: 5 }").contains("start"));
    let global = error_of(
        "{ name: country, type: global, datanodes: dn$1-4 }",
        "{ name: country, type: global, datanodes: dn$1-4, sequence: { datanode: dn1 } }",
    );
    assert!(global.contains("tables[2].sequence"), "{global}");
    assert!(global.contains("does not apply to a global table"));
}

#[test]
fn foreign_keys_is_a_schema_option() {
    use shoal_router::config::ForeignKeys;
    let t = Topology::build(&Config::from_yaml_str(BASE).unwrap()).unwrap();
    assert_eq!(t.schemas["shop"].foreign_keys, ForeignKeys::Exact);
    let text = BASE.replacen(
        "    default_datanode: dn1\n",
        "    default_datanode: dn1\n    foreign_keys: datanode_local\n",
        1,
    );
    let t = Topology::build(&Config::from_yaml_str(&text).unwrap()).unwrap();
    assert_eq!(t.schemas["shop"].foreign_keys, ForeignKeys::DatanodeLocal);
    check(
        "    default_datanode: dn1\n",
        "    default_datanode: dn1\n    foreign_keys: unmanaged\n",
        &[
            "line 16 column 19",
            "unknown variant `unmanaged`",
            "exact, datanode_local",
        ],
    );
}

#[test]
fn transactions_is_a_schema_option_and_xa_settings_are_checked() {
    use shoal_router::config::Transactions;
    let t = Topology::build(&Config::from_yaml_str(BASE).unwrap()).unwrap();
    assert_eq!(t.schemas["shop"].transactions, Transactions::Xa);
    assert_eq!(t.server.xa.log_datahost, None);
    assert_eq!(t.server.xa.recovery_interval.as_secs(), 10);
    assert_eq!(t.server.xa.recovery_grace.as_secs(), 30);
    let text = BASE.replacen(
        "    default_datanode: dn1\n",
        "    default_datanode: dn1\n    transactions: best_effort\n",
        1,
    ) + "server:\n  xa: { log_datahost: dh2, recovery_interval: 2s, recovery_grace: 1m }\n";
    let t = Topology::build(&Config::from_yaml_str(&text).unwrap()).unwrap();
    assert_eq!(t.schemas["shop"].transactions, Transactions::BestEffort);
    assert_eq!(t.server.xa.log_datahost.as_deref(), Some("dh2"));
    assert_eq!(t.server.xa.recovery_interval.as_secs(), 2);
    assert_eq!(t.server.xa.recovery_grace.as_secs(), 60);
    check(
        "    default_datanode: dn1\n",
        "    default_datanode: dn1\n    transactions: two_phase\n",
        &["unknown variant `two_phase`", "xa, best_effort"],
    );
    let users = "users:\n";
    check(
        users,
        "server:\n  xa: { log_datahost: dh9 }\nusers:\n",
        &["server.xa.log_datahost", "dh9"],
    );
    check(
        users,
        "server:\n  xa: { recovery_interval: 0s }\nusers:\n",
        &["server.xa.recovery_interval", "more than 0"],
    );
    check(
        users,
        "server:\n  xa: { recovery_grace: 0s }\nusers:\n",
        &["server.xa.recovery_grace", "more than 0"],
    );
    check(
        users,
        "server:\n  xa: { log_host: dh1 }\nusers:\n",
        &["unknown field `log_host`"],
    );
}

#[test]
fn deadlock_check_defaults_and_limits() {
    let t = Topology::build(&Config::from_yaml_str(BASE).unwrap()).unwrap();
    assert_eq!(t.server.deadlock_check.interval.as_millis(), 200);
    assert_eq!(t.server.deadlock_check.wait_threshold.as_millis(), 500);
    let text =
        BASE.to_string() + "server:\n  deadlock_check: { interval: 0, wait_threshold: 2s }\n";
    let t = Topology::build(&Config::from_yaml_str(&text).unwrap()).unwrap();
    assert!(t.server.deadlock_check.interval.is_zero());
    assert_eq!(t.server.deadlock_check.wait_threshold.as_secs(), 2);
    let users = "users:\n";
    check(
        users,
        "server:\n  deadlock_check: { interval: 2h }\nusers:\n",
        &["server.deadlock_check.interval", "at most 1 hour"],
    );
    check(
        users,
        "server:\n  deadlock_check: { threshold: 1s }\nusers:\n",
        &["unknown field `threshold`"],
    );
}
