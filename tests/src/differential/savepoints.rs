//! Transactions with savepoints over several datanodes, as differential writes: each is a
//! run of statements on the one connection of each side (BEGIN or autocommit off, multi-row
//! INSERTs across shards, UPDATEs and DELETEs over several shards, SAVEPOINT, ROLLBACK TO,
//! RELEASE, a savepoint name reused), ending in COMMIT or ROLLBACK. The
//! tables are compared after all writes: every ROLLBACK TO must have undone, on every
//! datanode, exactly what one MariaDB undoes.
//!
//! Ids are fresh (far above the dataset's and the other writes'), so no statement fails on a
//! duplicate key: a multi-datanode write failing inside a transaction rolls the whole
//! transaction back through Shoal (documented), where MariaDB undoes the statement only.

use super::data::{self, Lit, Rng};
use super::queries::Write;
use super::schema;

/// The family of these writes in reports.
pub const FAMILY: &str = "savepoint_txn";

/// `count` transactions from `seed`; the orders ids start above `first_id`.
pub fn transactions(seed: u64, count: usize, first_id: u64) -> Vec<Write> {
    let mut rng = Rng::new(seed ^ 0x5a5e_9017);
    let mut next = first_id;
    let mut w = Vec::new();
    let mut push = |sql: String| {
        w.push(Write {
            family: FAMILY,
            sql,
        })
    };
    for t in 0..count {
        let autocommit_off = rng.below(4) == 0;
        push(if autocommit_off {
            "SET autocommit = 0".into()
        } else {
            "BEGIN".into()
        });
        // Savepoints this transaction has set, oldest first (their names as MariaDB keeps
        // them: ROLLBACK TO drops later ones, RELEASE drops the named one and later ones).
        let mut names: Vec<String> = Vec::new();
        let mut mine: Vec<(u64, Lit)> = Vec::new();
        for step in 0..rng.range(4, 9) {
            match rng.below(8) {
                0..=2 => {
                    // New orders on random shards, and items for some.
                    let rows: Vec<Vec<Lit>> = (0..rng.range(1, 5))
                        .map(|_| {
                            next += 1;
                            let user = Lit::Int(rng.range(-5, 60));
                            data::order_row_for(&mut rng, next, user)
                        })
                        .collect();
                    for r in &rows {
                        if let Lit::UInt(id) = r[0] {
                            mine.push((id, r[1].clone()));
                        }
                    }
                    push(data::insert_sql(&schema::ORDERS, &rows));
                    if rng.below(2) == 0 {
                        let items: Vec<Vec<Lit>> = rows
                            .iter()
                            .map(|o| {
                                next += 1;
                                data::item_row(&mut rng, next, &o[0], &o[1])
                            })
                            .collect();
                        push(data::insert_sql(&schema::ORDER_ITEM, &items));
                    }
                }
                3 => {
                    let name = format!("sp{}", rng.below(3));
                    names.retain(|n| n != &name);
                    names.push(name.clone());
                    push(format!("SAVEPOINT {name}"));
                }
                4 if !names.is_empty() => {
                    let k = rng.below(names.len());
                    let name = names[k].clone();
                    names.truncate(k + 1);
                    push(format!("ROLLBACK TO SAVEPOINT {}", name.to_uppercase()));
                }
                5 if !names.is_empty() => {
                    let k = rng.below(names.len());
                    let name = names[k].clone();
                    names.truncate(k);
                    push(format!("RELEASE SAVEPOINT {name}"));
                }
                6 if !mine.is_empty() => {
                    let (a, b) = (rng.pick(&mine).1.clone(), rng.pick(&mine).1.clone());
                    push(format!(
                        "UPDATE orders SET amount = {t}.{step:02} WHERE id > {first_id} AND \
                         user_id IN ({}, {})",
                        a.sql(),
                        b.sql()
                    ));
                }
                7 if !mine.is_empty() => {
                    let (id, _) = rng.pick(&mine).clone();
                    push(format!(
                        "DELETE FROM orders WHERE id BETWEEN {id} AND {} AND id > {first_id}",
                        id + 2
                    ));
                }
                _ => {
                    let name = format!("sp{}", rng.below(3));
                    names.retain(|n| n != &name);
                    names.push(name.clone());
                    push(format!("SAVEPOINT {name}"));
                }
            }
        }
        push(if rng.below(4) == 0 {
            "ROLLBACK".into()
        } else {
            "COMMIT".into()
        });
        if autocommit_off {
            push("SET autocommit = 1".into());
        }
    }
    w
}
