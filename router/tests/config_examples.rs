//! Every example in conf/ parses and validates, so the documented examples never rot.

use shoal_router::config::Config;
use shoal_router::topology::{TableDef, Topology};

fn conf_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../conf")
}

#[test]
fn every_example_config_validates() {
    let mut n = 0;
    for entry in std::fs::read_dir(conf_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            let cfg = Config::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            Topology::build(&cfg).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            n += 1;
        }
    }
    assert!(n >= 12, "expected the example configs in conf/, found {n}");
}

/// Templates (`*.yaml.in`, filled in by scripts) validate once their `@FIELD@`s are filled:
/// `@PORT@` with a port, every other field with its own `host:port`.
#[test]
fn every_config_template_validates() {
    let mut n = 0;
    for entry in std::fs::read_dir(conf_dir()).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(".yaml.in") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut filled = String::new();
        let mut fields: Vec<String> = Vec::new();
        let mut parts = text.split('@');
        filled.push_str(parts.next().unwrap());
        while let Some(field) = parts.next() {
            let rest = parts
                .next()
                .unwrap_or_else(|| panic!("{}: unpaired @", path.display()));
            if field == "PORT" {
                filled.push_str("8066");
            } else {
                let i = fields.iter().position(|f| f == field).unwrap_or_else(|| {
                    fields.push(field.to_string());
                    fields.len() - 1
                });
                filled.push_str(&format!("127.0.0.1:{}", 4000 + i));
            }
            filled.push_str(rest);
        }
        let cfg =
            Config::from_yaml_str(&filled).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Topology::build(&cfg).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        n += 1;
    }
    assert!(n >= 1, "expected conf/demo.yaml.in");
}

fn topo(name: &str) -> Topology {
    Topology::build(&Config::load(conf_dir().join(name)).unwrap()).unwrap()
}

#[test]
fn db_per_shard_spreads_datanodes_datahost_major() {
    let t = topo("db-per-shard.yaml");
    let got: Vec<(String, String, String)> = t
        .datanodes
        .iter()
        .map(|d| {
            (
                d.name.clone(),
                t.datahosts[d.datahost].name.clone(),
                d.database.clone(),
            )
        })
        .collect();
    let want = [
        ("dn1", "dh1", "shop_1"),
        ("dn2", "dh1", "shop_2"),
        ("dn3", "dh2", "shop_1"),
        ("dn4", "dh2", "shop_2"),
        ("dn_main", "dh1", "shop_main"),
    ];
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!((g.0.as_str(), g.1.as_str(), g.2.as_str()), w);
    }
    let shop = t.schema("shop").unwrap();
    assert_eq!(shop.default_datanode, t.datanode_by_name("dn_main"));
    let Some(TableDef::Sharded(o)) = shop.table("T_ORDER") else {
        panic!()
    };
    assert_eq!(o.shards.len(), 4);
    assert!(o.shards.iter().all(|s| s.physical_table == "t_order"));
    assert_eq!(o.rule.shard_count(), 4);
}

#[test]
fn table_per_shard_names_and_placement() {
    let t = topo("table-per-shard.yaml");
    let Some(TableDef::Sharded(o)) = t.schema("shop").unwrap().table("t_order") else {
        panic!()
    };
    let got: Vec<(String, String)> = o
        .shards
        .iter()
        .map(|s| {
            (
                t.datanodes[s.datanode].name.clone(),
                s.physical_table.clone(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = (0..8)
        .map(|i| (format!("dn{}", i / 4 + 1), format!("t_order_{i:04}")))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn er_children_resolve_to_the_root() {
    let t = topo("er-child.yaml");
    let root = t.sharded_root("shop", "order_item_note").unwrap();
    assert_eq!(root.name, "orders");
    let Some(TableDef::Child(c)) = t.schema("shop").unwrap().table("order_item_note") else {
        panic!()
    };
    assert_eq!(
        (
            c.parent.as_str(),
            c.join_key.as_str(),
            c.parent_key.as_str()
        ),
        ("order_item", "order_id", "order_id")
    );
    assert_eq!(c.root, "orders");
    assert_eq!(c.shards.len(), 4);
    assert!(t.sharded_root("shop", "nope").is_none());
    assert_eq!(t.sharded_root("shop", "orders").unwrap().name, "orders");
}

/// The YAML snippets in docs/config.md parse and validate too: whole configs as they are, rule
/// snippets (`- name: ...`) as a `rules:` list bound to 4 shards.
#[test]
fn docs_examples_validate() {
    let doc = std::fs::read_to_string(conf_dir().join("../docs/config.md")).unwrap();
    let mut blocks = 0;
    for block in doc.split("```yaml\n").skip(1) {
        let yaml = block.split("```").next().unwrap();
        if yaml.starts_with("- name:") {
            let cfg = Config::from_yaml_str(&format!("rules:\n{yaml}"))
                .unwrap_or_else(|e| panic!("{yaml}\n{e}"));
            for r in &cfg.rules {
                shoal_router::rule::ShardRule::build(r, 4)
                    .unwrap_or_else(|e| panic!("{yaml}\n{e}"));
            }
        } else {
            let cfg = Config::from_yaml_str(yaml).unwrap_or_else(|e| panic!("{yaml}\n{e}"));
            cfg.validate().unwrap_or_else(|e| panic!("{yaml}\n{e}"));
        }
        blocks += 1;
    }
    assert!(blocks >= 4, "found {blocks} yaml blocks");
}

#[test]
fn load_names_the_file() {
    let e = Topology::load(conf_dir().join("missing.yaml")).unwrap_err();
    assert!(e.message().contains("missing.yaml"), "{e}");
    let t = Topology::load(conf_dir().join("single.yaml")).unwrap();
    assert_eq!(t.schema("app").unwrap().default_datanode, Some(0));
}
