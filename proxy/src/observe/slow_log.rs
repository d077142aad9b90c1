//! The slow log: one line per statement that took at least `server.slow_log.threshold`,
//! appended to `server.slow_log.file` by a writer thread, or, without a file, a `tracing`
//! event at target `shoal::slow`. Sessions never wait for the disk: lines go through a bounded
//! channel, and a line that finds it full is dropped and counted. SIGHUP reopens the file
//! (after logrotate has moved it away, lines go to a new file of the same name).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shoal_router::config::SlowLogConfig;
use tracing::{info, warn};

use super::Statement;

/// Lines waiting for the writer, at most.
const QUEUE: usize = 4096;
/// The statement text in a line is cut at this many bytes.
const MAX_TEXT: usize = 4096;

/// What the writer thread is sent.
enum Message {
    Line(String),
    /// Open the file again by its path.
    Reopen,
}

pub struct SlowLog {
    threshold: Duration,
    tx: Option<SyncSender<Message>>,
    logged: AtomicU64,
    dropped: AtomicU64,
}

impl SlowLog {
    /// Opens the file (an unwritable one stops the start) and starts its writer.
    pub fn start(cfg: &SlowLogConfig) -> std::io::Result<SlowLog> {
        let tx = match &cfg.file {
            Some(path) => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| std::io::Error::other(format!("slow log {path}: {e}")))?;
                let (tx, rx) = sync_channel::<Message>(QUEUE);
                let path = path.clone();
                std::thread::Builder::new()
                    .name("shoal-slow-log".into())
                    .spawn(move || write_lines(&path, file, rx))?;
                Some(tx)
            }
            None => None,
        };
        Ok(SlowLog {
            threshold: cfg.threshold,
            tx,
            logged: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        })
    }

    /// Has the writer open the file again (SIGHUP), so that a rotated log is followed by a
    /// new file; lines already queued go to the old one.
    pub fn reopen(&self) {
        if let Some(tx) = &self.tx
            && tx.try_send(Message::Reopen).is_err()
        {
            warn!("slow log: the writer is behind; the file is not reopened");
        }
    }

    pub fn logged(&self) -> u64 {
        self.logged.load(Ordering::Relaxed)
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub(super) fn record(&self, s: &Statement<'_>) {
        if s.elapsed < self.threshold {
            return;
        }
        let line = line(s);
        match &self.tx {
            None => {
                info!(target: "shoal::slow", "{line}");
                self.logged.fetch_add(1, Ordering::Relaxed);
            }
            Some(tx) => match tx.try_send(Message::Line(line)) {
                Ok(()) => {
                    self.logged.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
            },
        }
    }
}

/// `time=... duration_ms=... user=... schema=... client=... route=... datanodes=... rows=...
/// error=... sql=...` (the statement last, its newlines as spaces, cut at [`MAX_TEXT`]).
fn line(s: &Statement<'_>) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let text = &s.text[..s.text.len().min(MAX_TEXT)];
    let text = String::from_utf8_lossy(text).replace(['\n', '\r'], " ");
    let dns: Vec<String> = (0..64)
        .filter(|i| s.datanodes & (1u64 << i) != 0)
        .map(|i| i.to_string())
        .collect();
    format!(
        "time={}.{:03} duration_ms={:.3} user={} schema={} client={} route={} datanodes={} rows={} error={} sql={}{}",
        now.as_secs(),
        now.subsec_millis(),
        s.elapsed.as_secs_f64() * 1000.0,
        s.user,
        s.schema.unwrap_or("-"),
        s.client,
        s.mark.route.map_or("-", |r| r.label()),
        if dns.is_empty() {
            "-".to_string()
        } else {
            dns.join(",")
        },
        s.mark.rows,
        s.mark
            .error
            .map_or_else(|| "-".to_string(), |c| c.to_string()),
        text,
        if s.text.len() > MAX_TEXT { " ..." } else { "" },
    )
}

fn write_lines(path: &str, file: std::fs::File, rx: std::sync::mpsc::Receiver<Message>) {
    let mut file = std::io::BufWriter::new(file);
    let mut next = rx.recv().ok();
    while let Some(m) = next {
        match m {
            Message::Line(line) => {
                let _ = writeln!(file, "{line}");
            }
            Message::Reopen => {
                let _ = file.flush();
                match std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                {
                    Ok(f) => file = std::io::BufWriter::new(f),
                    Err(e) => {
                        warn!(path, error = %e, "slow log: cannot reopen; writing on to the old file")
                    }
                }
            }
        }
        // Written out whenever the queue is empty: a line is on disk soon after its statement.
        next = match rx.try_recv() {
            Ok(m) => Some(m),
            Err(_) => {
                if let Err(e) = file.flush() {
                    warn!(path, error = %e, "slow log write failed");
                }
                rx.recv().ok()
            }
        };
    }
}
