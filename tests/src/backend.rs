//! Real MariaDB backends for the e2e tests, from the launcher in `shoal_bench::cluster`.

use std::sync::{Mutex, OnceLock};

use shoal_bench::cluster::{Cluster, ClusterSpec};

/// What a test needs to know about a backend MariaDB (a primary started by the launcher).
#[derive(Clone, Debug)]
pub struct Backend {
    pub host: String,
    pub port: u16,
    pub pid: u32,
    pub user: String,
    pub password: String,
}

impl Backend {
    fn of(cluster: &Cluster) -> Backend {
        let primary = cluster.primary(0);
        Backend {
            host: primary.host.clone(),
            port: primary.port,
            pid: primary.pid,
            user: cluster.user().to_string(),
            password: cluster.password().to_string(),
        }
    }

    /// `mysql://USER:PASS@HOST:PORT[/DB]`, the quick mode's `--backend` argument.
    pub fn url(&self, db: Option<&str>) -> String {
        let mut url = format!(
            "mysql://{}:{}@{}:{}",
            self.user, self.password, self.host, self.port
        );
        if let Some(db) = db {
            url.push('/');
            url.push_str(db);
        }
        url
    }

    /// Client options straight to the backend, bypassing Shoal.
    pub fn opts(&self, db: Option<&str>) -> mysql_async::Opts {
        mysql_async::OptsBuilder::default()
            .ip_or_hostname(self.host.clone())
            .tcp_port(self.port)
            .user(Some(self.user.clone()))
            .pass(Some(self.password.clone()))
            .db_name(db)
            .prefer_socket(false)
            .into()
    }

    /// A connection straight to the backend.
    pub async fn conn(&self, db: Option<&str>) -> mysql_async::Conn {
        mysql_async::Conn::new(self.opts(db))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "direct connection to {}:{} failed: {e}",
                    self.host, self.port
                )
            })
    }

    /// (Re)creates database `db` on the backend, empty.
    pub async fn fresh_db(&self, db: &str) {
        use mysql_async::prelude::Queryable;
        let mut conn = self.conn(None).await;
        conn.query_drop(format!("DROP DATABASE IF EXISTS `{db}`"))
            .await
            .expect("drop database");
        conn.query_drop(format!(
            "CREATE DATABASE `{db}` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"
        ))
        .await
        .expect("create database");
        conn.disconnect().await.expect("disconnect");
    }
}

/// Starts a cluster of one primary for a test that will break it (kill it, ...). Runs on a
/// separate thread with its own runtime so that it can be called from any test.
pub fn private_cluster() -> (Cluster, Backend) {
    let cluster = start_cluster();
    let backend = Backend::of(&cluster);
    prepare_server(&backend);
    (cluster, backend)
}

/// The one cluster shared by all tests of this test binary, started on first use and stopped
/// when the test binary exits (statics are never dropped, so an `atexit` hook stops it).
pub fn shared_backend() -> Backend {
    static SHARED: OnceLock<Backend> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let cluster = start_cluster();
            let backend = Backend::of(&cluster);
            *SHARED_CLUSTER.lock().unwrap_or_else(|p| p.into_inner()) = Some(cluster);
            // SAFETY: registers a plain extern "C" fn with no captured state.
            unsafe {
                libc::atexit(stop_shared_cluster);
            }
            prepare_server(&backend);
            backend
        })
        .clone()
}

static SHARED_CLUSTER: Mutex<Option<Cluster>> = Mutex::new(None);

extern "C" fn stop_shared_cluster() {
    let cluster = SHARED_CLUSTER
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    if let Some(mut cluster) = cluster {
        cluster.stop();
    }
}

fn start_cluster() -> Cluster {
    // The launcher is async; run it on a runtime of its own so that callers inside a test's
    // runtime don't nest runtimes, and the cluster outlives the test that started it.
    std::thread::spawn(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("build runtime for the launcher");
        rt.block_on(Cluster::start(ClusterSpec::default()))
    })
    .join()
    .expect("launcher thread panicked")
    .unwrap_or_else(|e| panic!("cannot start a MariaDB cluster: {e}"))
}

/// Server-wide settings the tests rely on: packets large enough for a 20 MiB BLOB.
fn prepare_server(backend: &Backend) {
    let backend = backend.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("build runtime");
        rt.block_on(async {
            use mysql_async::prelude::Queryable;
            let mut conn = backend.conn(None).await;
            // Only new connections see a new global value, so this must happen before Shoal
            // opens its backend connections.
            conn.query_drop("SET GLOBAL max_allowed_packet = 67108864")
                .await
                .expect("raise max_allowed_packet on the backend");
            conn.disconnect().await.expect("disconnect");
        })
    })
    .join()
    .expect("prepare_server thread panicked");
}
