//! The state file a cluster dir keeps, so `cluster status` and `cluster down` (other processes)
//! find what `cluster up` started: one line per instance, `name role port pid`.

use std::fs;
use std::path::{Path, PathBuf};

use super::Role;
use super::error::{LaunchError, Result};
use super::instance::defaults_file;
use super::process;

pub(crate) const STATE_FILE: &str = "cluster.state";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateEntry {
    pub name: String,
    pub role: Role,
    pub port: u16,
    pub pid: u32,
    /// The instance's own directory.
    pub dir: PathBuf,
}

impl StateEntry {
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Whether the recorded pid is still this instance's server.
    pub fn is_running(&self) -> bool {
        process::is_our_server(self.pid, &defaults_file(&self.dir))
    }
}

pub(crate) fn write(dir: &Path, entries: &[StateEntry]) -> Result<()> {
    let mut text = String::from("# shoal-bench cluster state: name role port pid\n");
    for e in entries {
        let role = match e.role {
            Role::Primary => "primary".to_string(),
            Role::Replica { of } => format!("replica-of-{of}"),
        };
        text.push_str(&format!("{} {role} {} {}\n", e.name, e.port, e.pid));
    }
    let path = dir.join(STATE_FILE);
    let tmp = dir.join(format!("{STATE_FILE}.tmp"));
    fs::write(&tmp, text).map_err(LaunchError::io(format!("writing {}", tmp.display())))?;
    fs::rename(&tmp, &path).map_err(LaunchError::io(format!("writing {}", path.display())))
}

/// `Ok(None)` when the dir holds no cluster state.
pub fn read(dir: &Path) -> Result<Option<Vec<StateEntry>>> {
    let path = dir.join(STATE_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(LaunchError::Io {
                context: format!("reading {}", path.display()),
                source: e,
            });
        }
    };
    let bad = |line: &str| LaunchError::State {
        dir: dir.to_path_buf(),
        detail: format!("unreadable line in {STATE_FILE}: {line:?}"),
    };
    let mut entries = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, role, port, pid] = fields[..] else {
            return Err(bad(line));
        };
        let role = if role == "primary" {
            Role::Primary
        } else if let Some(of) = role.strip_prefix("replica-of-") {
            Role::Replica {
                of: of.parse().map_err(|_| bad(line))?,
            }
        } else {
            return Err(bad(line));
        };
        entries.push(StateEntry {
            name: name.to_string(),
            role,
            port: port.parse().map_err(|_| bad(line))?,
            pid: pid.parse().map_err(|_| bad(line))?,
            dir: dir.join(name),
        });
    }
    Ok(Some(entries))
}

pub(crate) fn remove(dir: &Path) {
    let _ = fs::remove_file(dir.join(STATE_FILE));
}
