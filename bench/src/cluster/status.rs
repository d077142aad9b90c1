//! What reached the servers: their statement counters (`SHOW GLOBAL STATUS`), read on
//! administrative connections opened once. A new connection per reading would add the client
//! library's own statements to the counters it reads.

use std::collections::BTreeMap;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;

use super::Cluster;
use crate::error::BenchError;

/// One administrative connection to each of some instances.
pub struct StatusConns {
    conns: Vec<(String, Conn)>,
}

/// Counter name -> value.
pub type Counters = BTreeMap<String, u64>;

impl StatusConns {
    /// Connections to instances `which` of `cluster` (its [`Cluster::instances`] order).
    pub async fn open(
        cluster: &Cluster,
        which: impl IntoIterator<Item = usize>,
    ) -> Result<StatusConns, BenchError> {
        let mut conns = Vec::new();
        for i in which {
            let name = cluster.instances()[i].name().to_string();
            let conn = Conn::new(cluster.admin_opts(i))
                .await
                .map_err(BenchError::sql(&name, "connect for status"))?;
            conns.push((name, conn));
        }
        Ok(StatusConns { conns })
    }

    /// Connections to every instance of `cluster`.
    pub async fn all(cluster: &Cluster) -> Result<StatusConns, BenchError> {
        Self::open(cluster, 0..cluster.instances().len()).await
    }

    /// Counters `names` of each server, in the order the connections were opened. The reading
    /// itself is one statement on each server: it is taken out of `Questions`, so that two
    /// readings differ by what others sent.
    pub async fn per_server(&mut self, names: &[&str]) -> Result<Vec<Counters>, BenchError> {
        let list = names
            .iter()
            .map(|n| format!("'{n}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!("SHOW GLOBAL STATUS WHERE Variable_name IN ({list})");
        let mut out = Vec::with_capacity(self.conns.len());
        for (name, c) in self.conns.iter_mut() {
            let rows: Vec<(String, String)> = c
                .query(sql.as_str())
                .await
                .map_err(BenchError::sql(name.as_str(), "SHOW GLOBAL STATUS"))?;
            let mut counters: Counters = rows
                .into_iter()
                .map(|(n, v)| (n, v.parse().unwrap_or(0)))
                .collect();
            if let Some(q) = counters.get_mut("Questions") {
                *q = q.saturating_sub(1);
            }
            out.push(counters);
        }
        Ok(out)
    }

    /// Says goodbye to every server (a dropped connection is an aborted client to them).
    pub async fn close(self) {
        for (_, c) in self.conns {
            let _ = c.disconnect().await;
        }
    }

    /// Counters `names` summed over the servers.
    pub async fn summed(&mut self, names: &[&str]) -> Result<Counters, BenchError> {
        let mut sum = Counters::new();
        for server in self.per_server(names).await? {
            for (n, v) in server {
                *sum.entry(n).or_default() += v;
            }
        }
        Ok(sum)
    }
}

/// How much each counter grew from `before` to `after`.
pub fn growth(before: &Counters, after: &Counters) -> Counters {
    after
        .iter()
        .map(|(n, v)| {
            (
                n.clone(),
                v.saturating_sub(before.get(n).copied().unwrap_or(0)),
            )
        })
        .collect()
}
