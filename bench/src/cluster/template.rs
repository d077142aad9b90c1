//! One initialised data dir per MariaDB version, made once and copied for every instance:
//! `mariadb-install-db` takes about 2 s, a copy a few milliseconds.

use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::error::{LaunchError, Result};
use super::mariadb::Binaries;
use super::{ADMIN_USER, APP_PASSWORD, APP_USER, REPL_PASSWORD, REPL_USER};

/// Bump when the accounts or settings baked into the template change, so stale caches are not used.
const TEMPLATE_REVISION: u32 = 1;

/// Redo log size baked into the template; instances must start with the same value or InnoDB
/// rewrites the log at every start.
pub(crate) const REDO_LOG_SIZE: &str = "32M";

/// Returns the template data dir for these binaries, creating it if needed. Safe to call from
/// parallel processes: creation is serialised by an exclusive lock on a file next to it.
pub(crate) fn ensure(bins: &Binaries) -> Result<PathBuf> {
    let root = cache_root();
    let name = format!("mariadb-template-{}-r{TEMPLATE_REVISION}", bins.version);
    let done = root.join(&name);
    if done.join(COMPLETE_MARKER).exists() {
        return Ok(done);
    }
    fs::create_dir_all(&root).map_err(LaunchError::io(format!("creating {}", root.display())))?;
    let lock_path = root.join(format!("{name}.lock"));
    let _lock = lock_exclusive(&lock_path)?;
    if done.join(COMPLETE_MARKER).exists() {
        return Ok(done);
    }
    let _ = fs::remove_dir_all(&done);
    let building = root.join(format!("{name}.building-{}", std::process::id()));
    let _ = fs::remove_dir_all(&building);
    fs::create_dir_all(&building)
        .map_err(LaunchError::io(format!("creating {}", building.display())))?;
    let result = initialise(bins, &building);
    if result.is_err() {
        let _ = fs::remove_dir_all(&building);
    }
    result?;
    fs::rename(&building, &done).map_err(LaunchError::io(format!(
        "renaming {} to {}",
        building.display(),
        done.display()
    )))?;
    Ok(done)
}

const COMPLETE_MARKER: &str = ".shoal-template-complete";

/// `$SHOAL_CACHE_DIR`, else `$XDG_CACHE_HOME/shoal`, else `~/.cache/shoal`, else a temp dir.
fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("SHOAL_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("shoal");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(home).join(".cache/shoal");
    }
    std::env::temp_dir().join("shoal-cache")
}

fn initialise(bins: &Binaries, datadir: &Path) -> Result<()> {
    let data = datadir.join("data");
    let sql_path = datadir.join("setup.sql");
    fs::write(&sql_path, setup_sql())
        .map_err(LaunchError::io(format!("writing {}", sql_path.display())))?;
    // The bootstrap server's own tmpdir: a server deletes every `#sql*` file in its tmpdir at
    // start-up, so in a shared /tmp a starting instance would delete the bootstrap's temporary
    // tables mid-install (seen as "Unknown table 'mysql.tmp_user_sys'").
    let tmp = datadir.join("tmp");
    fs::create_dir_all(&tmp).map_err(LaunchError::io(format!("creating {}", tmp.display())))?;
    let mut cmd = Command::new(&bins.install_db);
    // --no-defaults must come first and keeps /etc/mysql (a system server's config) out of it.
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", data.display()))
        .arg("--auth-root-authentication-method=normal")
        .arg("--skip-test-db")
        .arg("--skip-name-resolve")
        .arg(format!("--extra-file={}", sql_path.display()))
        // Passed through to the bootstrap server, so the redo log is born at the instances' size.
        .arg(format!("--innodb-log-file-size={REDO_LOG_SIZE}"))
        .arg("--innodb-buffer-pool-size=32M")
        .arg(format!("--tmpdir={}", tmp.display()));
    if is_root() {
        cmd.arg("--user=root");
    }
    let command = format!("{cmd:?}");
    let out = cmd.output().map_err(LaunchError::io(format!(
        "running {}",
        bins.install_db.display()
    )))?;
    if !out.status.success() {
        let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
        output.push_str(&String::from_utf8_lossy(&out.stderr));
        return Err(LaunchError::InstallDb { command, output });
    }
    fs::write(datadir.join(COMPLETE_MARKER), b"")
        .map_err(LaunchError::io("writing the template marker"))?;
    Ok(())
}

/// Accounts every instance needs. FLUSH PRIVILEGES first: the bootstrap server runs without
/// grant tables loaded and refuses account statements otherwise. The application user gets
/// everything but READ ONLY ADMIN, so a `read_only` replica refuses its writes as it would a
/// production application's.
fn setup_sql() -> String {
    format!(
        "FLUSH PRIVILEGES;
CREATE OR REPLACE USER '{ADMIN_USER}'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('');
GRANT ALL PRIVILEGES ON *.* TO '{ADMIN_USER}'@'127.0.0.1' WITH GRANT OPTION;
CREATE OR REPLACE USER '{APP_USER}'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('{APP_PASSWORD}');
CREATE OR REPLACE USER '{APP_USER}'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('{APP_PASSWORD}');
GRANT ALL PRIVILEGES ON *.* TO '{APP_USER}'@'127.0.0.1';
GRANT ALL PRIVILEGES ON *.* TO '{APP_USER}'@'localhost';
REVOKE READ ONLY ADMIN ON *.* FROM '{APP_USER}'@'127.0.0.1';
REVOKE READ ONLY ADMIN ON *.* FROM '{APP_USER}'@'localhost';
CREATE OR REPLACE USER '{REPL_USER}'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('{REPL_PASSWORD}');
GRANT REPLICATION SLAVE ON *.* TO '{REPL_USER}'@'127.0.0.1';
"
    )
}

/// Copies the template's data dir to `dest` (which must not exist).
pub(crate) fn copy_to(template: &Path, dest: &Path) -> Result<()> {
    copy_dir(&template.join("data"), dest)
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to).map_err(LaunchError::io(format!("creating {}", to.display())))?;
    let entries =
        fs::read_dir(from).map_err(LaunchError::io(format!("reading {}", from.display())))?;
    for entry in entries {
        let entry = entry.map_err(LaunchError::io(format!("reading {}", from.display())))?;
        let kind = entry
            .file_type()
            .map_err(LaunchError::io(format!("reading {}", from.display())))?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            fs::copy(entry.path(), &target).map_err(LaunchError::io(format!(
                "copying {} to {}",
                entry.path().display(),
                target.display()
            )))?;
        }
    }
    Ok(())
}

pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Blocks until this process holds an exclusive lock on `path`; released when the file closes
/// (also when the process dies, so a crashed build never wedges later runs).
pub(crate) fn lock_exclusive(path: &Path) -> Result<File> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(LaunchError::io(format!(
            "opening lock file {}",
            path.display()
        )))?;
    loop {
        // SAFETY: the fd is valid for the lifetime of `file`.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc == 0 {
            return Ok(file);
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(LaunchError::Io {
                context: format!("locking {}", path.display()),
                source: err,
            });
        }
    }
}
