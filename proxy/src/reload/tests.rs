//! What a reload allows and refuses, on configurations built as `shoal --check` builds them.

use super::*;
use shoal_router::config::Config;

/// Two datahosts (the first with one replica), four datanodes, schema `shop` with a sharded
/// `orders` (rule `by_id`), a global `items`; `extra` is appended to the users' list and
/// `edit` rewrites the text before it is built.
const BASE: &str = "\
users:
  - { name: app, password: secret, schemas: [shop] }
datahosts:
  - name: dh0
    primary: { address: \"127.0.0.1:3306\", user: root, password: pw }
    replicas:
      - { address: \"127.0.0.1:3307\", user: root, password: pw, weight: 1 }
    balance: round_robin
  - name: dh1
    primary: { address: \"127.0.0.1:3308\", user: root, password: pw }
datanodes:
  - { name: dn1, datahost: dh0, database: a }
  - { name: dn2, datahost: dh0, database: b }
  - { name: dn3, datahost: dh1, database: a }
  - { name: dn4, datahost: dh1, database: b }
rules:
  - { name: by_id, algorithm: mod }
  - { name: by_id_too, algorithm: mod }
  - { name: by_hash, algorithm: hash }
schemas:
  - name: shop
    default_datanode: dn1
    tables:
      - { name: orders, type: sharded, shard_key: id, rule: by_id, datanodes: \"dn1, dn2, dn3, dn4\" }
      - { name: items, type: global, datanodes: \"dn1, dn2, dn3, dn4\" }
";

fn build(text: &str) -> (ProxyConfig, Topology) {
    let t = Topology::build(&Config::from_yaml_str(text).expect("yaml")).expect("topology");
    let c = crate::config_file::proxy_config(&t, None).expect("proxy config");
    (c, t)
}

fn diff(new_text: &str) -> std::result::Result<Vec<String>, String> {
    let (oc, ot) = build(BASE);
    let (nc, nt) = build(new_text);
    check(&oc, &ot, &nc, &nt)?;
    Ok(changes(&oc, &ot, &nc, &nt))
}

fn edited(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "{from}");
    BASE.replacen(from, to, 1)
}

#[test]
fn unchanged_file_changes_nothing() {
    assert_eq!(diff(BASE), Ok(vec![]));
}

#[test]
fn users_replicas_weights_and_limits_change_live() {
    let text = edited(
        "  - { name: app, password: secret, schemas: [shop] }\n",
        "  - { name: app, password: other, schemas: [shop] }\n  \
         - { name: bob, password: b, schemas: [shop] }\n",
    )
    .replace(
        "      - { address: \"127.0.0.1:3307\", user: root, password: pw, weight: 1 }\n",
        "      - { address: \"127.0.0.1:3307\", user: root, password: pw, weight: 3 }\n      \
         - { address: \"127.0.0.1:3309\", user: root, password: pw }\n",
    )
    .replacen(
        "users:",
        "server: { max_connections: 50, query_timeout: 5s }\nusers:",
        1,
    );
    let changes = diff(&text).expect("allowed");
    for want in [
        "user password changed: app",
        "user added: bob",
        "weight changed: dh0 127.0.0.1:3307 1 -> 3",
        "server added: dh0 127.0.0.1:3309",
        "server.max_connections changed: 1024 -> 50",
    ] {
        assert!(changes.iter().any(|c| c == want), "{want} in {changes:?}");
    }
}

#[test]
fn new_datahosts_datanodes_schemas_and_tables_are_allowed() {
    let text = edited(
        "datanodes:\n",
        "  - name: dh2\n    primary: { address: \"127.0.0.1:3310\", user: root, password: pw }\n\
         datanodes:\n",
    )
    .replace(
        "  - { name: dn4, datahost: dh1, database: b }\n",
        "  - { name: dn4, datahost: dh1, database: b }\n  \
         - { name: dn5, datahost: dh2, database: c }\n",
    )
    .replace(
        "      - { name: items, type: global, datanodes: \"dn1, dn2, dn3, dn4\" }\n",
        "      - { name: items, type: global, datanodes: \"dn1, dn2, dn3, dn4\" }\n      \
         - { name: notes, type: global, datanodes: \"dn1, dn5\" }\n  \
         - name: blog\n    default_datanode: dn5\n",
    );
    let changes = diff(&text).expect("allowed");
    for want in [
        "datahost added: dh2",
        "datanode added: dn5",
        "table added: shop.notes",
        "schema added: blog",
    ] {
        assert!(changes.iter().any(|c| c == want), "{want} in {changes:?}");
    }
}

#[test]
fn a_changed_rule_shard_key_or_datanode_list_is_refused_by_name() {
    let refused = |text: String, want: &str| {
        let err = diff(&text).expect_err("refused");
        assert!(err.contains(want), "{err} should say {want}");
        assert!(err.contains("move rows"), "{err}");
    };
    refused(
        edited(
            "shard_key: id, rule: by_id,",
            "shard_key: id, rule: by_hash,",
        ),
        "table shop.orders's rule ('by_id' -> 'by_hash') changed",
    );
    refused(
        edited(
            "  - { name: by_id, algorithm: mod }",
            "  - { name: by_id, algorithm: hash }",
        ),
        "table shop.orders's rule (rule 'by_id' now maps keys differently) changed",
    );
    refused(
        edited(
            "shard_key: id, rule: by_id,",
            "shard_key: customer, rule: by_id,",
        ),
        "table shop.orders's shard key (id -> customer) changed",
    );
    refused(
        edited(
            "rule: by_id, datanodes: \"dn1, dn2, dn3, dn4\"",
            "rule: by_id, datanodes: \"dn1, dn3, dn2, dn4\"",
        ),
        "table shop.orders's datanode list changed",
    );
    refused(
        edited(
            "type: global, datanodes: \"dn1, dn2, dn3, dn4\"",
            "type: global, datanodes: \"dn1, dn2, dn3\"",
        ),
        "table shop.items's datanode list changed",
    );
    refused(
        edited(
            "{ name: dn2, datahost: dh0, database: b }",
            "{ name: dn2, datahost: dh1, database: c }",
        ),
        "datanode dn2's datahost changed (dh0 -> dh1)",
    );
    refused(
        edited(
            "{ name: dn3, datahost: dh1, database: a }",
            "{ name: dn3, datahost: dh1, database: z }",
        ),
        "datanode dn3's database changed (a -> z)",
    );
    refused(
        edited("default_datanode: dn1", "default_datanode: dn2"),
        "schema shop's default_datanode changed",
    );
}

#[test]
fn a_renamed_rule_with_the_same_definition_is_allowed() {
    let text = edited(
        "shard_key: id, rule: by_id,",
        "shard_key: id, rule: by_id_too,",
    );
    assert_eq!(diff(&text), Ok(vec![]));
}

#[test]
fn removing_a_table_or_reordering_datahosts_is_refused() {
    let err = diff(&edited(
        "      - { name: items, type: global, datanodes: \"dn1, dn2, dn3, dn4\" }\n",
        "",
    ))
    .expect_err("refused");
    assert!(err.contains("table shop.items removed"), "{err}");
    let err = diff(&edited(
        "  - { name: dn1, datahost: dh0, database: a }\n  - { name: dn2, datahost: dh0, database: b }\n",
        "  - { name: dn2, datahost: dh0, database: b }\n  - { name: dn1, datahost: dh0, database: a }\n",
    ))
    .expect_err("refused");
    assert!(err.contains("datanode dn1 moved"), "{err}");
}

#[test]
fn settings_bound_at_start_need_a_restart() {
    for (server, want) in [
        (
            "server: { listen: \"127.0.0.1:9999\" }\n",
            "server.listen changed",
        ),
        ("server: { log_level: debug }\n", "server.log_level changed"),
        (
            "server: { xa: { recovery_interval: 1s } }\n",
            "server.xa changed",
        ),
    ] {
        let err = diff(&format!("{server}{BASE}")).expect_err("refused");
        assert!(
            err.contains(want) && err.contains("needs a restart"),
            "{err}"
        );
    }
}
