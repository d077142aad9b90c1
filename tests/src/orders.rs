//! Two MariaDB primaries and a Shoal over them with the demo's layout
//! ([`crate::demo_layout_yaml`]): `orders (id, user_id, amount)` sharded by `user_id` mod 4 over
//! dn1..dn4 (server 0 `a`, `b`, server 1 `a`, `b`), six rows of amount 100 — users 4 and 8 on
//! dn1, user 1 on dn2, users 2 and 6 on dn3, user 3 on dn4 — read back directly on the servers.
//! The fixture of the tests of a transaction's fate and of deadlocks across servers.

use std::path::PathBuf;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use shoal_bench::cluster::{Cluster, ClusterSpec};

use crate::ShoalProcess;

pub const DBS: [&str; 2] = ["a", "b"];

/// Rows: (id, user_id), each of amount 100 after [`Orders::reset`].
pub const ROWS: [(i64, i64); 6] = [(1, 4), (2, 2), (3, 1), (4, 3), (5, 6), (6, 8)];

/// How Shoal is started.
#[derive(Default)]
pub struct Options<'a> {
    /// The schema's `transactions:` (`xa` when empty).
    pub transactions: &'a str,
    /// The `SHOAL_FAULT` test hook.
    pub fault: Option<&'a str>,
    /// Appended to the config (a `server:` section, for instance).
    pub config_tail: &'a str,
    /// Added to every MariaDB's config.
    pub server_options: &'a [String],
}

pub struct Orders {
    pub cluster: Cluster,
    pub shoal: ShoalProcess,
    pub config: PathBuf,
}

impl Orders {
    /// The cluster, Shoal (user `app`, an admin) and `orders` with its rows.
    pub async fn start(o: Options<'_>) -> Orders {
        let spec = ClusterSpec {
            primaries: 2,
            databases: DBS.iter().map(|d| d.to_string()).collect(),
            ..Default::default()
        };
        let cluster = Cluster::start_with_options(spec, o.server_options)
            .await
            .unwrap_or_else(|e| panic!("cannot start the cluster: {e}"));
        let transactions = if o.transactions.is_empty() {
            "xa"
        } else {
            o.transactions
        };
        let layout = crate::demo_layout_yaml(1).replace(
            "  - name: shop\n",
            &format!("  - name: shop\n    transactions: {transactions}\n"),
        ) + o.config_tail;
        let users = "  - { name: app, password: app-secret, schemas: [shop], admin: true }\n";
        let config = crate::cluster_config(&cluster, users, &layout, "orders");
        let args = ["--config".to_string(), config.display().to_string()];
        let env: Vec<(&str, &str)> = o.fault.map(|f| ("SHOAL_FAULT", f)).into_iter().collect();
        let shoal = ShoalProcess::start_with_env(&args, &env);
        let s = Orders {
            cluster,
            shoal,
            config,
        };
        let mut c = s.client().await;
        c.query_drop(
            "CREATE TABLE orders (id INT PRIMARY KEY, user_id INT NOT NULL, amount INT) \
             ENGINE=InnoDB",
        )
        .await
        .unwrap();
        s.reset().await;
        s
    }

    /// A client through Shoal (user `app`, schema `shop`).
    pub async fn client(&self) -> Conn {
        match Conn::new(self.shoal.opts_as("app", "app-secret", Some("shop"))).await {
            Ok(c) => c,
            Err(e) => panic!("connect through shoal: {e}\n{}", self.shoal.log()),
        }
    }

    /// Every row back to amount 100.
    pub async fn reset(&self) {
        let mut c = self.client().await;
        c.query_drop("DELETE FROM orders").await.unwrap();
        for (id, user) in ROWS {
            c.query_drop(format!(
                "INSERT INTO orders (id, user_id, amount) VALUES ({id}, {user}, 100)"
            ))
            .await
            .unwrap();
        }
    }

    /// Each row's amount as stored on the servers, by id (read directly).
    pub async fn amounts(&self) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        for i in 0..2 {
            for db in DBS {
                let mut b = Conn::new(self.cluster.opts(i, Some(db))).await.unwrap();
                let rows: Vec<(i64, i64)> = b.query("SELECT id, amount FROM orders").await.unwrap();
                out.extend(rows);
            }
        }
        out.sort_unstable();
        out
    }

    /// Row `id`'s amount on the servers.
    pub async fn amount(&self, id: i64) -> i64 {
        self.amounts()
            .await
            .into_iter()
            .find(|(i, _)| *i == id)
            .unwrap_or_else(|| panic!("no row {id}"))
            .1
    }

    /// `SHOW SHOAL XA`'s `name`.
    pub async fn xa_stat(&self, name: &str) -> u64 {
        let mut c = self.client().await;
        let rows: Vec<mysql_async::Row> = c.query("SHOW SHOAL XA").await.unwrap();
        let row = rows.into_iter().next().expect("one row");
        crate::named_values(&row)
            .into_iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v)
            .unwrap_or_else(|| panic!("no {name} in SHOW SHOAL XA"))
            .parse()
            .unwrap()
    }
}
