//! Finding the MariaDB binaries on this machine.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::error::{LaunchError, Result};

/// The server and the data-dir initialiser, plus the server's version (which keys the template cache).
#[derive(Debug, Clone)]
pub struct Binaries {
    pub server: PathBuf,
    pub install_db: PathBuf,
    pub version: String,
}

impl Binaries {
    /// Looks for the server in `SHOAL_MARIADBD`, then `mariadbd`/`mysqld` on PATH, then
    /// `/usr/sbin` (Debian installs it there, outside a normal user's PATH); and for
    /// `mariadb-install-db` in `SHOAL_MARIADB_INSTALL_DB`, PATH, `/usr/bin` and next to the server.
    pub fn find() -> Result<Binaries> {
        let server = find_binary("SHOAL_MARIADBD", &["mariadbd", "mysqld"], &[])
            .map_err(|looked| LaunchError::ServerNotFound { looked })?;
        let sibling = server
            .parent()
            .map(|d| d.join("../bin"))
            .unwrap_or_default();
        let install_db = find_binary(
            "SHOAL_MARIADB_INSTALL_DB",
            &["mariadb-install-db", "mysql_install_db"],
            &[sibling],
        )
        .map_err(|looked| LaunchError::InstallDbNotFound { looked })?;
        let version = server_version(&server)?;
        Ok(Binaries {
            server,
            install_db,
            version,
        })
    }
}

fn find_binary(
    env: &str,
    names: &[&str],
    extra_dirs: &[PathBuf],
) -> std::result::Result<PathBuf, String> {
    let mut looked = Vec::new();
    if let Some(path) = std::env::var_os(env) {
        let path = PathBuf::from(path);
        if is_executable(&path) {
            return Ok(path);
        }
        looked.push(format!("${env}={}", path.display()));
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"].map(PathBuf::from));
    dirs.extend(extra_dirs.iter().cloned());
    for name in names {
        for dir in &dirs {
            let candidate = dir.join(name);
            if is_executable(&candidate) {
                return Ok(candidate);
            }
        }
        looked.push(format!("{name} on PATH and in /usr/sbin, /usr/bin"));
    }
    Err(looked.join(", "))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// `mariadbd --version` prints e.g. "mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu".
fn server_version(server: &Path) -> Result<String> {
    let out = Command::new(server)
        .arg("--version")
        .output()
        .map_err(LaunchError::io(format!(
            "running {} --version",
            server.display()
        )))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .split_whitespace()
        .skip_while(|w| *w != "Ver")
        .nth(1)
        .unwrap_or("unknown");
    Ok(version
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_server_says_how_to_install_one() {
        let looked = find_binary("SHOAL_TEST_UNSET_VARIABLE", &["no-such-mariadbd"], &[])
            .expect_err("no such binary");
        let message = LaunchError::ServerNotFound { looked }.to_string();
        assert!(
            message.contains("apt-get install -y mariadb-server"),
            "{message}"
        );
        assert!(message.contains("no-such-mariadbd"), "{message}");
    }

    #[test]
    fn finds_the_installed_server_and_its_version() {
        let bins = Binaries::find().expect("MariaDB is installed on test machines");
        assert!(bins.server.ends_with("mariadbd") || bins.server.ends_with("mysqld"));
        assert!(
            bins.version.chars().next().unwrap().is_ascii_digit(),
            "{}",
            bins.version
        );
    }
}
