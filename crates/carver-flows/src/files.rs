//! Writing a file the user names, as a careful editor does: whole or not at all, with the
//! permissions a new file would get, and never replacing what is not a regular file unasked.

use std::fs::{self, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::FlowError;

/// Writes `path` through `write`:
/// - a new file, or a regular file (replaced whole): written to a temporary file beside it and
///   renamed over it, so that a failed write leaves the old file intact. A new file gets the
///   usual permissions (0666 less the umask); a replaced one keeps its own.
/// - a symbolic link, device, FIFO or socket: refused, unless `force`; then a link is followed
///   and its target written as above (the link stays), and a device, FIFO or socket is written
///   into (replacing a device node is never meant).
/// - a directory: refused.
pub(crate) fn write_file<T>(
    path: &Path,
    force: bool,
    write: impl FnOnce(&mut dyn Write) -> Result<T, FlowError>,
) -> Result<T, FlowError> {
    let fail = |reason: String| FlowError::ExportTarget {
        path: path.to_path_buf(),
        reason,
    };
    let meta = match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return replace(path, None, write),
        Err(e) => return Err(fail(e.to_string())),
        Ok(meta) => meta,
    };
    let kind = meta.file_type();
    if kind.is_file() {
        return replace(path, Some(meta.permissions()), write);
    }
    if kind.is_dir() {
        return Err(fail(
            "it is a directory; name a file (inside it, perhaps)".into(),
        ));
    }
    if kind.is_symlink() {
        let to = fs::read_link(path).map_or_else(|_| "?".into(), |p| p.display().to_string());
        if !force {
            return Err(fail(format!(
                "it is a symbolic link (to {to}); refusing to replace it: pass --force to write \
                 to the file it points to, or choose another path"
            )));
        }
        let real = fs::canonicalize(path).map_err(|e| {
            fail(format!(
                "it is a symbolic link to {to}, which cannot be followed ({e})"
            ))
        })?;
        return write_file(&real, true, write);
    }
    if !force {
        return Err(fail(
            "it is a device, FIFO or socket, not a regular file; pass --force to write into it, \
             or choose another path"
                .into(),
        ));
    }
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| fail(e.to_string()))?;
    let mut out = BufWriter::new(file);
    let value = write(&mut out)?;
    out.flush().map_err(|e| fail(e.to_string()))?;
    Ok(value)
}

/// Writes a temporary file beside `path` and renames it over `path`.
fn replace<T>(
    path: &Path,
    keep: Option<fs::Permissions>,
    write: impl FnOnce(&mut dyn Write) -> Result<T, FlowError>,
) -> Result<T, FlowError> {
    let fail = |action: &str, e: std::io::Error| FlowError::ExportTarget {
        path: path.to_path_buf(),
        reason: format!("cannot {action}: {e}"),
    };
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| "export".into(), |n| n.to_string_lossy().into_owned());
    let (temp, file) = create_beside(dir, &name).map_err(|e| fail("create a file beside it", e))?;
    let mut guard = Remove(Some(temp.clone()));
    if let Some(permissions) = keep {
        fs::set_permissions(&temp, permissions).map_err(|e| fail("keep its permissions", e))?;
    }
    let mut out = BufWriter::new(file);
    let value = write(&mut out)?;
    let file = out
        .into_inner()
        .map_err(|e| fail("write", e.into_error()))?;
    file.sync_all().map_err(|e| fail("write", e))?;
    drop(file);
    fs::rename(&temp, path).map_err(|e| fail("replace it", e))?;
    guard.0 = None;
    Ok(value)
}

/// A new, empty file `.<name>.carver-tmp-<pid>-<i>` in `dir`, created with the permissions a
/// new file gets (0666 less the umask, which the system applies).
fn create_beside(dir: &Path, name: &str) -> std::io::Result<(PathBuf, fs::File)> {
    let mut last = None;
    for i in 0..1000 {
        let temp = dir.join(format!(".{name}.carver-tmp-{}-{i}", std::process::id()));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o666);
        }
        match options.open(&temp) {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free temporary name")))
}

/// Removes the temporary file unless the write went through.
struct Remove(Option<PathBuf>);

impl Drop for Remove {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = fs::remove_file(path);
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn text(path: &Path, force: bool, body: &str) -> Result<(), FlowError> {
        write_file(path, force, |out| {
            out.write_all(body.as_bytes())
                .map_err(|e| FlowError::ExportTarget {
                    path: path.to_path_buf(),
                    reason: e.to_string(),
                })
        })
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_file_gets_the_umask_and_a_replaced_one_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new.jsonl");
        text(&new, false, "a").unwrap();
        // What the system gives any new file here.
        let probe = dir.path().join("probe");
        fs::File::create(&probe).unwrap();
        assert_eq!(mode(&new), mode(&probe));
        assert_ne!(mode(&new), 0o600);

        fs::set_permissions(&new, fs::Permissions::from_mode(0o640)).unwrap();
        text(&new, false, "b").unwrap();
        assert_eq!(fs::read_to_string(&new).unwrap(), "b");
        assert_eq!(mode(&new), 0o640);
        let leftovers = fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 2, "no temporary file is left behind");
    }

    #[test]
    fn a_symlink_is_refused_unless_forced_and_then_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.jsonl");
        fs::write(&real, "old").unwrap();
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = text(&link, false, "new").unwrap_err().to_string();
        assert!(err.contains("is a symbolic link"), "{err}");
        assert_eq!(fs::read_to_string(&real).unwrap(), "old");
        text(&link, true, "new").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
    }

    #[test]
    fn a_directory_is_refused_even_forced() {
        let dir = tempfile::tempdir().unwrap();
        let err = text(dir.path(), true, "x").unwrap_err().to_string();
        assert!(err.contains("it is a directory"), "{err}");
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("keep.jsonl");
        fs::write(&file, "precious").unwrap();
        let result: Result<(), FlowError> = write_file(&file, false, |_| {
            Err(FlowError::ExportTarget {
                path: file.clone(),
                reason: "boom".into(),
            })
        });
        assert!(result.is_err());
        assert_eq!(fs::read_to_string(&file).unwrap(), "precious");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
