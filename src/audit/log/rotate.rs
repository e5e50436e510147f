//! The log file rotated by size, as lumberjack rotates it for kube-apiserver's
//! `--audit-log-maxsize`, `--audit-log-maxbackup` and `--audit-log-maxage`: backups named
//! `<name>-<time>.<ext>`, the oldest removed past the limits.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{Lines, LogConfig};

/// A file renamed to a timestamped backup when it would grow past its size, as
/// lumberjack does: `audit.log` becomes `audit-2026-12-06T14-05-00.123.log` (UTC,
/// milliseconds), and old backups beyond the count or the age are removed.
pub(super) struct RotatingFile {
    path: PathBuf,
    file: File,
    size: u64,
    max_size: u64,
    max_backups: usize,
    max_age: Option<Duration>,
}

impl RotatingFile {
    pub(super) fn open(config: &LogConfig) -> io::Result<RotatingFile> {
        if let Some(dir) = config.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            builder.create(dir)?;
        }
        let file = open_append(&config.path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path: config.path.clone(),
            file,
            size,
            max_size: config.max_size,
            max_backups: config.max_backups,
            max_age: (config.max_age_days > 0)
                .then(|| Duration::from_secs(config.max_age_days * 24 * 3600)),
        })
    }

    /// Writes `lines`, rotating first before any line that would take the file past
    /// its maximum size (a line is never split between files).
    pub(super) fn write(&mut self, lines: &Lines) -> io::Result<()> {
        // The lines not written yet start at `from`.
        let mut from = 0;
        let mut start = 0;
        for line in lines.iter() {
            let len = line.len() as u64;
            if self.max_size > 0 && self.size > 0 && self.size + len > self.max_size {
                self.file.write_all(&lines.bytes[from..start])?;
                from = start;
                self.rotate()?;
            }
            self.size += len;
            start += line.len();
        }
        self.file.write_all(&lines.bytes[from..])
    }

    fn rotate(&mut self) -> io::Result<()> {
        let (dir, prefix, ext) = self.name_parts();
        let mut at = SystemTime::now();
        let mut backup = dir.join(backup_name(&prefix, &ext, at));
        // Two rotations in one millisecond must not overwrite the first backup.
        while backup.exists() {
            at += Duration::from_millis(1);
            backup = dir.join(backup_name(&prefix, &ext, at));
        }
        std::fs::rename(&self.path, &backup)?;
        self.file = open_append(&self.path)?;
        self.size = 0;
        if let Err(e) = self.remove_old(&dir, &prefix, &ext) {
            tracing::warn!(error = %e, "removing old audit log backups failed");
        }
        Ok(())
    }

    /// The directory, the name before its extension, and the extension (with its dot).
    fn name_parts(&self) -> (PathBuf, String, String) {
        let dir = self
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (prefix, ext) = match name.rfind('.') {
            Some(i) if i > 0 => (name[..i].to_owned(), name[i..].to_owned()),
            _ => (name, String::new()),
        };
        (dir, prefix, ext)
    }

    /// Removes backups beyond `max_backups` (oldest first) and older than `max_age`.
    fn remove_old(&self, dir: &Path, prefix: &str, ext: &str) -> io::Result<()> {
        let mut backups: Vec<(SystemTime, PathBuf)> = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(at) = backup_time(&name, prefix, ext) {
                backups.push((at, entry.path()));
            }
        }
        backups.sort_by_key(|b| std::cmp::Reverse(b.0));
        let now = SystemTime::now();
        for (i, (at, path)) in backups.iter().enumerate() {
            let too_many = self.max_backups > 0 && i >= self.max_backups;
            let too_old = self
                .max_age
                .is_some_and(|age| now.duration_since(*at).is_ok_and(|d| d > age));
            if too_many || too_old {
                std::fs::remove_file(path)?;
            }
        }
        Ok(())
    }
}

pub(super) fn open_append(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// `<prefix>-2006-01-02T15-04-05.000<ext>` in UTC.
pub(super) fn backup_name(prefix: &str, ext: &str, at: SystemTime) -> String {
    // `2026-12-06T14:05:00.123Z`
    let stamp = humantime::format_rfc3339_millis(at).to_string();
    let stamp = stamp.trim_end_matches('Z').replace(':', "-");
    format!("{prefix}-{stamp}{ext}")
}

/// The time in a backup's name, if `name` is one of `prefix`/`ext`'s backups.
pub(super) fn backup_time(name: &str, prefix: &str, ext: &str) -> Option<SystemTime> {
    let stamp = name.strip_prefix(prefix)?.strip_prefix('-')?;
    let stamp = stamp.strip_suffix(ext)?;
    // `2026-12-06T14-05-00.123` back to RFC 3339.
    let (date, time) = stamp.split_once('T')?;
    let time = time.replacen('-', ":", 2);
    humantime::parse_rfc3339(&format!("{date}T{time}Z")).ok()
}
