//! The PostgreSQL fixture starts a real server that keeps what it committed across a
//! crash (an immediate stop) and a restart.

use tranche_test_support::Postgres;

#[test]
fn a_fresh_server_keeps_committed_rows_across_a_crash() {
    let Some(pg) = Postgres::start() else { return };
    pg.create_database("fixture");
    let ok = |sql: &str| {
        let out = pg.psql("fixture", sql);
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    ok("CREATE TABLE t (n int); INSERT INTO t VALUES (1), (2)");
    pg.kill();
    assert!(
        !pg.psql("fixture", "SELECT 1").status.success(),
        "it is down"
    );
    pg.restart();
    assert_eq!(ok("SELECT sum(n) FROM t"), "3");
    assert!(pg
        .url("fixture")
        .starts_with("postgres://tranche@127.0.0.1:"));
}
