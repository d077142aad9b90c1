//! The listener: accepts clients, caps their number, runs each session in its own task, and
//! shuts down gracefully on SIGTERM/SIGINT.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use mysql_common::constants::{CapabilityFlags, MariadbCapabilities};
use shoal_router::sql::SqlMode;
use shoal_router::topology::Topology;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::backend::conn::{BackendConn, wire_capabilities};
use crate::backend::pool::{BackendPool, typical_client_wire};
use crate::backend::tls::check_backend_tls;
use crate::config::ProxyConfig;
use crate::error::Error;
use crate::process::Shared;
use crate::reload::Reloader;
use crate::runtime::Runtime;
use crate::session;
use crate::wire::handshake::{mariadb_capabilities, server_capabilities};
use crate::wire::messages::err_payload;
use crate::wire::packet::PacketStream;
use crate::wire::rsa_key::RsaKey;
use crate::wire::tls::ClientTls;

/// A bound, not yet running proxy (binding first lets callers learn the port).
pub struct Proxy {
    listener: TcpListener,
    /// Threads serving sessions, each its own runtime (see [`Proxy::bind_per_core`]); 1: the
    /// caller's runtime serves every session.
    cores: usize,
    /// `server.admin_listen`, bound with the main listener (a bad address stops the start).
    admin: Option<TcpListener>,
    shared: Arc<Shared>,
    shutdown_tx: watch::Sender<bool>,
}

impl Proxy {
    /// Binds the listen address and asks the backend who it is (version and capabilities are
    /// announced to clients as the backend's own).
    pub async fn bind(config: ProxyConfig) -> std::io::Result<Proxy> {
        Self::bind_with(config, None, None).await
    }

    /// [`Self::bind`] for a configuration read from a file: `topology` is the file's, and
    /// `reloader` reads it again on SIGHUP and `RELOAD SHOAL CONFIG` (see `crate::reload`).
    pub async fn bind_with(
        config: ProxyConfig,
        topology: Option<Topology>,
        reloader: Option<Reloader>,
    ) -> std::io::Result<Proxy> {
        Self::bind_per_core(config, topology, reloader, 1).await
    }

    /// [`Self::bind_with`] for `cores` runtime threads, each with its own single-threaded
    /// runtime, which runs the sessions given to it and their backend connections, so that no
    /// statement wakes another thread (see `crate::cores`). The caller's thread is the first
    /// core: it accepts every client and gives each to the least loaded core. Called on that
    /// runtime, a single-threaded one; [`Self::run`] starts the others.
    pub async fn bind_per_core(
        config: ProxyConfig,
        topology: Option<Topology>,
        reloader: Option<Reloader>,
        cores: usize,
    ) -> std::io::Result<Proxy> {
        let topology = topology.map(Arc::new);
        let cores = cores.max(1);
        let listener = TcpListener::bind(&config.listen).await?;
        let admin =
            match &config.observe.admin_listen {
                Some(a) => Some(TcpListener::bind(a).await.map_err(|e| {
                    std::io::Error::new(e.kind(), format!("admin_listen {a}: {e}"))
                })?),
                None => None,
            };
        check_backend_tls(&config)?;
        let spec = config.backend.clone();
        let (version, backend_caps, backend_mariadb, default_sql_mode) = match BackendConn::connect(
            &spec,
            typical_client_wire(),
            spec.database.as_deref(),
            false,
            config.pool.connect_timeout,
        )
        .await
        {
            Ok(mut c) => {
                if let Some(why) = &c.tracking_refused {
                    warn!(backend = %spec.addr(), reason = %why, "session tracking cannot be switched on: connections to this backend are never pooled (each is closed when its session lets go of it)");
                }
                // Statements are planned as the backend reads them: its sql_mode decides what
                // `||` and `"x"` mean for sessions that never set their own.
                let mode = match c.query_value("SELECT @@SESSION.sql_mode").await {
                    Ok(Some(m)) => SqlMode::parse(&m),
                    _ => SqlMode::default(),
                };
                (
                    c.info.version.clone(),
                    c.info.capabilities,
                    c.info.mariadb,
                    mode,
                )
            }
            Err(e) => {
                warn!(backend = %spec.addr(), error = %e, "backend not reachable at startup; clients will get errors until it is");
                (
                    b"5.7.99-shoal".to_vec(),
                    CapabilityFlags::all(),
                    MariadbCapabilities::empty(),
                    SqlMode::default(),
                )
            }
        };
        let missing_wire = wire_capabilities() & !backend_caps;
        let mut capabilities = server_capabilities() & !missing_wire;
        if !backend_caps.contains(CapabilityFlags::CLIENT_MULTI_STATEMENTS) {
            capabilities.remove(CapabilityFlags::CLIENT_MULTI_STATEMENTS);
        }
        // MariaDB's extensions are offered as the backend offers them, as its version is: a
        // client sees the server it would see directly.
        let mariadb = mariadb_capabilities() & backend_mariadb;
        let tls = match &config.tls {
            Some(files) => {
                let server = crate::wire::tls::load_server_config(&files.cert, &files.key)
                    .map_err(std::io::Error::other)?;
                info!(cert = %files.cert, required = files.required, "TLS to clients enabled (TLS 1.2 and 1.3)");
                Some(ClientTls {
                    acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
                    required: files.required,
                })
            }
            None => None,
        };
        let rsa = match &config.rsa_private_key {
            Some(path) => RsaKey::load(path).map_err(std::io::Error::other)?,
            None => tokio::task::spawn_blocking(RsaKey::generate)
                .await
                .map_err(std::io::Error::other)?
                .map_err(std::io::Error::other)?,
        };
        info!(
            fingerprint = %rsa.fingerprint,
            source = if config.rsa_private_key.is_some() { "config" } else { "generated at start" },
            "RSA key for caching_sha2_password over plain connections"
        );
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let xa = match &config.routing {
            Some(r) => {
                let x = &r.topology.server.xa;
                let log_datahost = x
                    .log_datahost
                    .as_deref()
                    .and_then(|n| r.topology.datahosts.iter().position(|d| d.name == n))
                    .unwrap_or(0);
                let log_pool = r
                    .hosts
                    .get(log_datahost)
                    .map(|(spec, settings)| BackendPool::new(spec.clone(), settings.clone()));
                crate::xa::Xa::new(
                    log_datahost,
                    log_pool,
                    x.recovery_interval,
                    x.recovery_grace,
                )
            }
            None => crate::xa::Xa::new(0, None, Duration::from_secs(10), Duration::from_secs(30)),
        };
        let observe = crate::observe::Observer::new(&config)?;
        // With the router: one pool per server (primary and replicas) of each datahost; the
        // relay-only path uses the pool of its one datanode.
        let mut runtime = Runtime::build(config, topology, &version, 1, None);
        runtime.observe(&observe);
        let shared = Arc::new(Shared {
            runtime: ArcSwap::from_pointee(runtime),
            reloader,
            reload_lock: Default::default(),
            monitors: Default::default(),
            server_version: version,
            default_sql_mode,
            capabilities,
            mariadb,
            shutdown: shutdown_rx,
            stopping: std::sync::atomic::AtomicBool::new(false),
            sessions: Default::default(),
            tls,
            rsa: Arc::new(rsa),
            throttle: Default::default(),
            user_conns: Default::default(),
            sha2_cache: Default::default(),
            xa: Arc::new(xa),
            observe,
            started: std::time::Instant::now(),
        });
        Ok(Proxy {
            listener,
            cores,
            admin,
            shared,
            shutdown_tx,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// A handle that stops the proxy like SIGTERM does.
    pub fn shutdown_handle(&self) -> watch::Sender<bool> {
        self.shutdown_tx.clone()
    }

    /// Serves until shutdown is requested (signal or handle), then waits for sessions to
    /// finish their current statement, up to `shutdown_timeout`.
    pub async fn run(self) {
        let Proxy {
            listener,
            cores,
            admin,
            shared,
            shutdown_tx,
        } = self;
        let rt = shared.runtime.load_full();
        let cfg = rt.config.clone();
        crate::reload::start_tasks(&*shared, &rt, None);
        if let Some(admin) = admin {
            tokio::spawn(crate::process::http::serve(admin, shared.clone()));
        }
        tokio::spawn(crate::session::nudge::sweep(shared.clone()));
        // Lock cycles across servers (it reads `server.deadlock_check` at every tick: off
        // costs a wake-up a second).
        tokio::spawn(crate::deadlock::run(shared.clone()));
        // Recovery of XA transactions left prepared (by this process before a crash, or by
        // another): only where some schema commits through XA.
        if cfg.routing.as_ref().is_some_and(|r| {
            r.topology
                .schemas
                .values()
                .any(|s| s.transactions == shoal_router::config::Transactions::Xa)
        }) {
            crate::xa::fault();
            if let Some(pool) = &shared.xa.log_pool {
                tokio::spawn(pool.clone().maintain(typical_client_wire()));
            }
            tokio::spawn(crate::xa::recovery::run(shared.clone()));
        }
        {
            let tx = shutdown_tx.clone();
            tokio::spawn(async move {
                wait_for_signal().await;
                info!("shutdown requested: no new connections; waiting for running statements");
                let _ = tx.send(true);
            });
        }
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            // Registered before serving: SIGHUP's default action would end the process.
            match signal(SignalKind::hangup()) {
                Ok(hup) => {
                    tokio::spawn(reload_on_sighup(hup, shared.clone()));
                }
                Err(e) => {
                    warn!(error = %e, "cannot listen for SIGHUP: reload with RELOAD SHOAL CONFIG")
                }
            }
        }
        drop(rt);
        // Sessions served now; `max_connections` is read from the current snapshot at each
        // accept, so a reload changes it for new connections.
        let live = Arc::new(AtomicUsize::new(0));
        info!(listen = %cfg.listen, backend = %cfg.backend.addr(), cores, "shoal is serving");
        let mut inboxes = Vec::new();
        for core in 1..cores {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            inboxes.push(tx);
            let shared = shared.clone();
            crate::cores::spawn(core, move || serve_handoffs(rx, shared));
        }
        let spread = (cores > 1).then(|| Spread {
            load: crate::cores::Load::new(cores),
            inboxes,
        });
        accept_loop(listener, shared.clone(), live.clone(), spread).await;
        let deadline = tokio::time::Instant::now() + shared.runtime.load().config.shutdown_timeout;
        while live.load(Ordering::Relaxed) > 0 && tokio::time::Instant::now() < deadline {
            crate::timers::sleep(Duration::from_millis(20)).await;
        }
        let left = live.load(Ordering::Relaxed);
        if left > 0 {
            warn!(
                sessions = left,
                "shutdown timeout reached; closing remaining sessions"
            );
        }
        info!("shoal stopped");
    }
}

/// The other cores, for the accepting one: how many sessions each serves, and where to give
/// one (core `c`'s inbox is `inboxes[c - 1]`).
struct Spread {
    load: crate::cores::Load,
    inboxes: Vec<tokio::sync::mpsc::UnboundedSender<Handoff>>,
}

/// A client accepted by core 0 for another core to serve.
struct Handoff {
    stream: std::net::TcpStream,
    peer: SocketAddr,
    id: u32,
    permit: SessionSlot,
    share: crate::cores::Share,
}

/// Serves the clients core 0 gives this core, until the process ends (sessions run on after
/// shutdown closes the inbox, until the main thread's shutdown wait ends the process).
async fn serve_handoffs(
    mut inbox: tokio::sync::mpsc::UnboundedReceiver<Handoff>,
    shared: Arc<Shared>,
) {
    while let Some(h) = inbox.recv().await {
        match TcpStream::from_std(h.stream) {
            Ok(stream) => spawn_session(
                stream,
                h.peer,
                h.id,
                shared.clone(),
                h.permit,
                Some(h.share),
            ),
            Err(e) => error!(error = %e, peer = %h.peer, "cannot register a client with its core"),
        }
    }
    std::future::pending::<()>().await;
}

/// Runs a session on this thread's runtime; `permit` and `share` count it until it ends.
fn spawn_session(
    stream: TcpStream,
    peer: SocketAddr,
    id: u32,
    shared: Arc<Shared>,
    permit: SessionSlot,
    share: Option<crate::cores::Share>,
) {
    let task = tokio::spawn(session::serve(stream, id, shared));
    tokio::spawn(async move {
        if let Err(e) = task.await
            && e.is_panic()
        {
            error!(connection_id = id, %peer, "session panicked: {e}; connection closed");
        }
        drop(permit);
        drop(share);
    });
}

/// Accepts clients on `listener` until shutdown, each session a task of this thread's runtime
/// or, with `spread`, of the core serving the fewest sessions.
async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    live: Arc<AtomicUsize>,
    spread: Option<Spread>,
) {
    let next_id = AtomicU32::new(1);
    let mut shutdown = shared.shutdown.clone();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => {
                shared.stopping.store(true, Ordering::Relaxed);
                // Sessions waiting for a command end now; the others after their
                // statement (they check `stopping` between commands).
                shared.sessions.for_each(|h| h.nudge.nudge());
                break;
            }
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // Typically out of file descriptors: back off instead of spinning.
                warn!(error = %e, "accept failed");
                crate::timers::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let id = next_id.fetch_add(1, Ordering::Relaxed);
        if let Some(m) = &shared.observe.metrics {
            m.accepted.fetch_add(1, Ordering::Relaxed);
        }
        let limit = shared.runtime.load().config.max_connections;
        match SessionSlot::take(&live, limit) {
            Some(permit) => {
                let Some(spread) = &spread else {
                    spawn_session(stream, peer, id, shared.clone(), permit, None);
                    continue;
                };
                let share = spread.load.pick();
                if share.core == 0 {
                    spawn_session(stream, peer, id, shared.clone(), permit, Some(share));
                    continue;
                }
                // Leaves this runtime's event loop, to join the other core's.
                let stream = match stream.into_std() {
                    Ok(s) => s,
                    Err(e) => {
                        warn!(error = %e, %peer, "cannot hand a client to its core");
                        continue;
                    }
                };
                let handoff = Handoff {
                    stream,
                    peer,
                    id,
                    permit,
                    share,
                };
                if let Err(e) = spread.inboxes[handoff.share.core - 1].send(handoff) {
                    // That core's thread is gone (it failed to start): served here.
                    let h = e.0;
                    match TcpStream::from_std(h.stream) {
                        Ok(stream) => {
                            spawn_session(stream, h.peer, h.id, shared.clone(), h.permit, None)
                        }
                        Err(e) => {
                            warn!(error = %e, peer = %h.peer, "cannot serve a client: its core is gone")
                        }
                    }
                }
            }
            None => {
                if let Some(m) = &shared.observe.metrics {
                    m.refused(crate::observe::metrics::Refusal::MaxConnections);
                }
                warn!(%peer, max_connections = limit, "refusing client: too many connections");
                tokio::spawn(refuse(stream));
            }
        }
    }
}

/// One served session, counted in `live` until dropped.
struct SessionSlot(Arc<AtomicUsize>);

impl SessionSlot {
    fn take(live: &Arc<AtomicUsize>, limit: usize) -> Option<SessionSlot> {
        live.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < limit).then_some(n + 1)
        })
        .ok()
        .map(|_| SessionSlot(live.clone()))
    }
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Answers a connection beyond `max_connections` with ERR 1040 instead of a handshake, as
/// MySQL does.
async fn refuse(stream: TcpStream) {
    let mut io = PacketStream::new(stream, 1024);
    let (code, state, msg) = match Error::too_many_connections() {
        Error::Fatal {
            code,
            state,
            message,
        } => (code, state, message),
        _ => unreachable!(),
    };
    let mut seq = 0;
    io.write_packet(&mut seq, &err_payload(code, &state, &msg));
    io.shutdown().await;
}

/// Reloads the configuration on each SIGHUP (the outcome is logged by the reload itself).
#[cfg(unix)]
async fn reload_on_sighup(mut hup: tokio::signal::unix::Signal, shared: Arc<Shared>) {
    while hup.recv().await.is_some() {
        info!("SIGHUP: reopening the slow log and reloading the configuration");
        if let Some(l) = &shared.observe.slow {
            l.reopen();
        }
        let _ = crate::reload::reload(&*shared).await;
    }
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
