//! The admin HTTP listener (`server.admin_listen`): `/metrics` (Prometheus text format),
//! `/health` (200 while the process serves) and `/ready` (200 when every datahost's primary,
//! or quick mode's backend, is reachable; 503 with the reason otherwise).
//!
//! Served with `hyper` 1 (and `hyper-util`'s tokio glue): tokio-rs's own HTTP crates, which
//! the runtime's authors keep; three GET endpoints need no web framework on top.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::CONTENT_TYPE;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tracing::{debug, info, warn};

use crate::process::Shared;

/// How long `/ready` waits to connect to quick mode's backend.
const QUICK_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// Serves the admin endpoints on `listener` until the process ends.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let registry = Arc::new(super::scrape::registry(shared.clone()));
    if let Ok(a) = listener.local_addr() {
        info!(admin_listen = %a, "admin HTTP listener: /metrics, /health, /ready");
    }
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                warn!(error = %e, "admin listener: accept failed");
                crate::timers::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (shared, registry) = (shared.clone(), registry.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let (shared, registry) = (shared.clone(), registry.clone());
                async move { Ok::<_, Infallible>(answer(req, &shared, &registry).await) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await
            {
                debug!(%peer, error = %e, "admin connection ended with an error");
            }
        });
    }
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

async fn answer(
    req: Request<Incoming>,
    shared: &Shared,
    registry: &Registry,
) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n");
    }
    match req.uri().path() {
        "/metrics" => {
            let mut r = text(StatusCode::OK, crate::observe::metrics::encode(registry));
            r.headers_mut().insert(
                CONTENT_TYPE,
                hyper::header::HeaderValue::from_static(
                    prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                ),
            );
            r
        }
        "/health" => text(StatusCode::OK, "ok\n"),
        "/ready" => match not_ready(shared).await {
            None => text(StatusCode::OK, "ready\n"),
            Some(why) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {why}\n"),
            ),
        },
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: /metrics, /health, /ready\n",
        ),
    }
}

/// Why the proxy cannot serve every statement now, if it cannot: shutting down, or a
/// datahost whose primary the health monitor found unreachable. Quick mode has no monitor:
/// its backend is connected to.
async fn not_ready(shared: &Shared) -> Option<String> {
    if shared.stopping.load(std::sync::atomic::Ordering::Relaxed) {
        return Some("shutting down".into());
    }
    let rt = shared.runtime.load_full();
    if rt.config.routing.is_none() {
        let addr = rt.config.backend.addr();
        return match crate::timers::timeout(
            QUICK_CHECK_TIMEOUT,
            tokio::net::TcpStream::connect(&addr),
        )
        .await
        {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(format!("backend {addr} unreachable: {e}")),
            Err(_) => Some(format!("backend {addr} unreachable: connect timed out")),
        };
    }
    let b = &rt.backends;
    let down: Vec<String> = b
        .hosts
        .iter()
        .enumerate()
        .filter_map(|(dh, h)| {
            let s = &b.servers[b.primary(dh)];
            if !s.health.is_up() {
                return Some(format!("datahost {} primary {} down", h.name, s.address));
            }
            // Up, but not decided: two writable servers, or a primary that replicates.
            (!b.primary_decided(dh)).then(|| {
                format!(
                    "datahost {} has no primary decided (two writable servers, or the primary \
                     replicates)",
                    h.name
                )
            })
        })
        .collect();
    (!down.is_empty()).then(|| down.join("; "))
}
