//! Bound parameters are typed as the client bound them: a DOUBLE parameter is stored and compared
//! as MariaDB stores and compares a DOUBLE, not as the decimal it prints as.

use std::sync::Arc;

use shoal_router::config::Config;
use shoal_router::plan::{RoutePlan, Router};
use shoal_router::sql::stmt::Literal;
use shoal_router::topology::Topology;

fn router() -> Router {
    let cfg = Config::from_yaml_str(
        "datahosts: [{name: dh1, primary: {address: '127.0.0.1:3307', user: u}}]\n\
         datanodes: [{name: dn1..dn4, datahost: dh1, database: d1..d4}]\n\
         rules: [{name: m, algorithm: mod}]\n\
         schemas: [{name: s, tables: [{name: t, type: sharded, shard_key: k, rule: m, datanodes: dn1..dn4}]}]\n",
    )
    .expect("config");
    Router::new(Arc::new(Topology::build(&cfg).expect("topology")))
}

fn datanodes(p: &RoutePlan) -> Vec<usize> {
    match p {
        RoutePlan::Single(t) => vec![t.datanode],
        RoutePlan::Scatter { targets, .. } => targets.iter().map(|t| t.datanode).collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn double_parameters_round_half_to_even_and_compare_as_doubles() {
    let r = router();
    let insert = "INSERT INTO t (k, v) VALUES (?, 1)";
    // 2.5 as a DOUBLE is stored as 2; as a DECIMAL or a string, as 3.
    let as_double = r.route(Some("s"), insert, &[Literal::Double(2.5)]);
    let as_decimal = r.route(Some("s"), insert, &[Literal::Str("2.5".into())]);
    assert_eq!(datanodes(&as_double), [2]);
    assert_eq!(datanodes(&as_decimal), [3]);
    assert_eq!(
        datanodes(&r.route(Some("s"), insert, &[Literal::Double(-2.5)])),
        [2]
    );
    // Compared as a double: 2^53 equals both 9007199254740992 and 9007199254740993.
    let select = "SELECT * FROM t WHERE k = ?";
    let p = r.route(Some("s"), select, &[Literal::Double(9007199254740992.0)]);
    assert_eq!(datanodes(&p), [0, 1]);
    let p = r.route(Some("s"), select, &[Literal::Int(9007199254740993)]);
    assert_eq!(datanodes(&p), [1]);
    // A NaN or infinite DOUBLE is never a key value.
    assert!(matches!(
        r.route(Some("s"), insert, &[Literal::Double(f64::NAN)]),
        RoutePlan::Refuse(_)
    ));
}
