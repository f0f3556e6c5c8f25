//! The on-disk cache of compiled `cuda-sm90` cubins, and parallel compilation of many candidates
//! through it.
//!
//! Each entry is two files under `<cache dir>/kernels/`: `<key>.cubin`, the image as NVRTC made
//! it, and `<key>.json`, its index entry: what was compiled (SHA-256 of the generated source,
//! NVRTC's version, the architecture and options) and what came out (the cubin's size and
//! SHA-256, ptxas' report, NVRTC's log). A cubin is used only when its index entry is present,
//! well formed, describes this very kernel, and its size and SHA-256 match the file; anything
//! else is a [`CacheDefect`], reported to the caller, and the kernel is compiled again and the
//! entry replaced. The hash catches damage and mix-ups (a truncated write, a flipped bit, a file
//! copied under another key), not someone who can rewrite both files.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::compile::{
    CompiledKernel, GPU_ARCH, PtxasReport, compile_kernel, nvrtc_version, options, reject_spills,
};
use super::{KernelSpec, fnv1a};
use crate::error::GpuError;

/// The layout of index entries this carver writes and reads.
const INDEX_FORMAT: u64 = 1;
/// No index entry is this large (a log of a few kilobytes is usual); a bigger file is not read.
const MAX_INDEX_BYTES: u64 = 4 << 20;
/// No sm_90a GEMM cubin is this large (they are well under a megabyte).
const MAX_CUBIN_BYTES: u64 = 256 << 20;

/// SHA-256 of `bytes` as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Why a cache entry was not used.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CacheDefect {
    #[error("{}: no index entry beside it ({} is missing)", cubin.display(), index.display())]
    MissingIndex { cubin: PathBuf, index: PathBuf },

    #[error("{}: the cubin it describes is missing ({})", index.display(), cubin.display())]
    MissingCubin { index: PathBuf, cubin: PathBuf },

    #[error("{}: cannot be read: {reason}", path.display())]
    Unreadable { path: PathBuf, reason: String },

    #[error("{}: not a valid index entry: {reason}", path.display())]
    MalformedIndex { path: PathBuf, reason: String },

    #[error(
        "{}: describes another kernel ({field} is `{recorded}`, this kernel's is `{expected}`)",
        path.display()
    )]
    OtherKernel {
        path: PathBuf,
        field: &'static str,
        recorded: String,
        expected: String,
    },

    #[error("{}: truncated: {found} bytes, the index records {recorded}", path.display())]
    Truncated {
        path: PathBuf,
        recorded: u64,
        found: u64,
    },

    #[error("{}: {found} bytes, more than the {recorded} the index records", path.display())]
    Oversized {
        path: PathBuf,
        recorded: u64,
        found: u64,
    },

    #[error(
        "{}: content does not match its index (SHA-256 {found}, the index records {recorded})",
        path.display()
    )]
    HashMismatch {
        path: PathBuf,
        recorded: String,
        found: String,
    },
}

/// The index entry kept beside each cubin.
#[derive(Debug, Serialize, Deserialize)]
struct IndexEntry {
    format: u64,
    key: String,
    label: String,
    arch: String,
    nvrtc: String,
    options: String,
    source_sha256: String,
    cubin_bytes: u64,
    cubin_sha256: String,
    report: PtxasReport,
    log: String,
}

/// What the index entry of a kernel must say about what was compiled.
struct Identity {
    key: String,
    arch: String,
    nvrtc: String,
    options: String,
    source_sha256: String,
}

/// Cubins on disk under `<cache dir>/kernels/`, keyed by a hash of the generated source (which
/// holds the configuration), the compile options, the architecture and NVRTC's version, each
/// with an index entry that is checked before the cubin is used.
#[derive(Clone, Debug)]
pub struct KernelCache {
    dir: PathBuf,
    nvrtc: (i32, i32),
}

impl KernelCache {
    /// A cache under `<cache_dir>/kernels` (created on first store) for the installed NVRTC.
    pub fn new(cache_dir: &Path) -> Result<Self, GpuError> {
        Ok(Self::for_nvrtc(cache_dir, nvrtc_version()?))
    }

    /// A cache for the given NVRTC version, without asking NVRTC (the tests' fake kernels).
    pub(crate) fn for_nvrtc(cache_dir: &Path, nvrtc: (i32, i32)) -> Self {
        Self {
            dir: cache_dir.join("kernels"),
            nvrtc,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn key(&self, spec: &KernelSpec) -> String {
        self.identity(spec).key
    }

    fn identity(&self, spec: &KernelSpec) -> Identity {
        let source = spec.source();
        let options = options().join(" ");
        let nvrtc = format!("{}.{}", self.nvrtc.0, self.nvrtc.1);
        let key = format!(
            "{:016x}",
            fnv1a(&[
                source.as_bytes(),
                options.as_bytes(),
                GPU_ARCH.as_bytes(),
                nvrtc.as_bytes(),
            ])
        );
        Identity {
            key,
            arch: GPU_ARCH.to_string(),
            nvrtc,
            options,
            source_sha256: sha256_hex(source.as_bytes()),
        }
    }

    fn paths(&self, key: &str) -> (PathBuf, PathBuf) {
        (
            self.dir.join(format!("{key}.cubin")),
            self.dir.join(format!("{key}.json")),
        )
    }

    /// The cached kernel: `Ok(None)` when there is no entry, an error when there is one that
    /// cannot be trusted.
    pub fn load(&self, spec: &KernelSpec) -> Result<Option<CompiledKernel>, CacheDefect> {
        let id = self.identity(spec);
        let (cubin_path, index_path) = self.paths(&id.key);
        let unreadable = |path: &Path, e: std::io::Error| CacheDefect::Unreadable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        let index_bytes = match read_at_most(&index_path, MAX_INDEX_BYTES) {
            Err(e) => return Err(unreadable(&index_path, e)),
            Ok(Found::Bytes(b)) => b,
            Ok(Found::Larger(n)) => {
                return Err(CacheDefect::MalformedIndex {
                    path: index_path,
                    reason: format!("{n} bytes, more than any index entry ({MAX_INDEX_BYTES})"),
                });
            }
            Ok(Found::Nothing) => {
                return match std::fs::symlink_metadata(&cubin_path) {
                    Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
                    _ => Err(CacheDefect::MissingIndex {
                        cubin: cubin_path,
                        index: index_path,
                    }),
                };
            }
        };
        let entry = parse_index(&index_path, &index_bytes, &id)?;
        let cubin = match read_at_most(&cubin_path, entry.cubin_bytes) {
            Err(e) => return Err(unreadable(&cubin_path, e)),
            Ok(Found::Bytes(b)) => b,
            Ok(Found::Larger(found)) => {
                return Err(CacheDefect::Oversized {
                    path: cubin_path,
                    recorded: entry.cubin_bytes,
                    found,
                });
            }
            Ok(Found::Nothing) => {
                return Err(CacheDefect::MissingCubin {
                    index: index_path,
                    cubin: cubin_path,
                });
            }
        };
        let found = cubin.len() as u64;
        if found < entry.cubin_bytes {
            return Err(CacheDefect::Truncated {
                path: cubin_path,
                recorded: entry.cubin_bytes,
                found,
            });
        }
        let hash = sha256_hex(&cubin);
        if hash != entry.cubin_sha256 {
            return Err(CacheDefect::HashMismatch {
                path: cubin_path,
                recorded: entry.cubin_sha256,
                found: hash,
            });
        }
        Ok(Some(CompiledKernel {
            spec: *spec,
            cubin,
            report: entry.report,
            log: entry.log,
            compile_s: 0.0,
            from_cache: true,
            path: Some(cubin_path),
        }))
    }

    /// Stores a kernel: the cubin, then its index entry, each written to a temporary file in the
    /// cache directory and renamed over the old one, so that no reader sees half a file. (A
    /// reader between the two renames may see a cubin without its entry, or with the old one: it
    /// reports that and compiles again.)
    pub fn store(&self, kernel: &mut CompiledKernel) -> Result<(), GpuError> {
        std::fs::create_dir_all(&self.dir).map_err(|source| GpuError::Io {
            path: self.dir.clone(),
            source,
        })?;
        let id = self.identity(&kernel.spec);
        let (cubin_path, index_path) = self.paths(&id.key);
        let entry = IndexEntry {
            format: INDEX_FORMAT,
            key: id.key,
            label: kernel.spec.label(),
            arch: id.arch,
            nvrtc: id.nvrtc,
            options: id.options,
            source_sha256: id.source_sha256,
            cubin_bytes: kernel.cubin.len() as u64,
            cubin_sha256: sha256_hex(&kernel.cubin),
            report: kernel.report.clone(),
            log: kernel.log.clone(),
        };
        let index_bytes = serde_json::to_vec_pretty(&entry).map_err(|e| GpuError::Io {
            path: index_path.clone(),
            source: std::io::Error::other(e),
        })?;
        write_atomically(&cubin_path, &kernel.cubin)?;
        write_atomically(&index_path, &index_bytes)?;
        kernel.path = Some(cubin_path);
        Ok(())
    }

    /// The cached kernel, or a fresh compile stored for next time. An entry that cannot be
    /// trusted goes to `on_defect`, and the kernel is compiled again and stored over it.
    pub fn get_or_compile(
        &self,
        spec: &KernelSpec,
        on_defect: &dyn Fn(&CacheDefect),
    ) -> Result<CompiledKernel, GpuError> {
        self.get_or_compile_with(spec, &compile_kernel, on_defect)
    }

    fn get_or_compile_with(
        &self,
        spec: &KernelSpec,
        compile: &dyn Fn(&KernelSpec) -> Result<CompiledKernel, GpuError>,
        on_defect: &dyn Fn(&CacheDefect),
    ) -> Result<CompiledKernel, GpuError> {
        let damaged = match self.load(spec) {
            Ok(Some(k)) => {
                reject_spills(&k)?;
                return Ok(k);
            }
            Ok(None) => false,
            Err(defect) => {
                on_defect(&defect);
                true
            }
        };
        let mut k = match compile(spec) {
            Ok(k) => k,
            Err(e) => {
                if damaged {
                    // Nothing good will replace it: drop it rather than report it every run.
                    let (cubin_path, index_path) = self.paths(&self.key(spec));
                    let _ = std::fs::remove_file(cubin_path);
                    let _ = std::fs::remove_file(index_path);
                }
                return Err(e);
            }
        };
        self.store(&mut k)?;
        Ok(k)
    }
}

/// Checks an index entry's format and that it describes the kernel `id`.
fn parse_index(path: &Path, bytes: &[u8], id: &Identity) -> Result<IndexEntry, CacheDefect> {
    let malformed = |reason: String| CacheDefect::MalformedIndex {
        path: path.to_path_buf(),
        reason,
    };
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| malformed(format!("not JSON ({e})")))?;
    let Some(object) = value.as_object() else {
        return Err(malformed("not a JSON object".into()));
    };
    match object.get("format").map(serde_json::Value::as_u64) {
        None => {
            return Err(malformed(
                "no `format` field (written by an older carver, without a content hash)".into(),
            ));
        }
        Some(Some(INDEX_FORMAT)) => {}
        Some(other) => {
            return Err(malformed(format!(
                "format {}, this carver reads format {INDEX_FORMAT}",
                other.map_or_else(|| object["format"].to_string(), |n| n.to_string())
            )));
        }
    }
    let entry: IndexEntry = serde_json::from_value(value).map_err(|e| malformed(e.to_string()))?;
    for (field, recorded, expected) in [
        ("key", &entry.key, &id.key),
        ("arch", &entry.arch, &id.arch),
        ("nvrtc", &entry.nvrtc, &id.nvrtc),
        ("options", &entry.options, &id.options),
        ("source_sha256", &entry.source_sha256, &id.source_sha256),
    ] {
        if recorded != expected {
            return Err(CacheDefect::OtherKernel {
                path: path.to_path_buf(),
                field,
                recorded: recorded.clone(),
                expected: expected.clone(),
            });
        }
    }
    let is_sha256 =
        |h: &str| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !is_sha256(&entry.cubin_sha256) {
        return Err(malformed(format!(
            "cubin_sha256 `{}` is not 64 lowercase hex digits",
            entry.cubin_sha256
        )));
    }
    if entry.cubin_bytes == 0 || entry.cubin_bytes > MAX_CUBIN_BYTES {
        return Err(malformed(format!(
            "cubin_bytes {} is outside 1 to {MAX_CUBIN_BYTES}",
            entry.cubin_bytes
        )));
    }
    Ok(entry)
}

/// What a path of the cache holds.
pub(super) enum Found {
    Nothing,
    /// A file of this many bytes, more than the caller reads.
    Larger(u64),
    Bytes(Vec<u8>),
}

/// The bytes of the regular file at `path` when it has at most `limit` of them.
pub(super) fn read_at_most(path: &Path, limit: u64) -> std::io::Result<Found> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Found::Nothing),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > limit {
        return Ok(Found::Larger(meta.len()));
    }
    let mut bytes = Vec::new();
    // The file may grow while it is read: never read more than one byte past the limit.
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Ok(Found::Larger(bytes.len() as u64));
    }
    Ok(Found::Bytes(bytes))
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so
/// that `path` holds the old content or the new, never part of either.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), GpuError> {
    replace_file(path, bytes).map_err(|source| GpuError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// [`write_atomically`] with the I/O error as it is (the emitter reports it its own way).
pub(super) fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    // Unique within the process too: compile threads may store the same key at once.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    written.inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Progress of [`compile_all`].
#[derive(Clone, Debug)]
pub enum CompileEvent {
    /// The cache entry of candidate `index` could not be trusted; it is compiled again.
    CacheEntryRejected { index: usize, defect: CacheDefect },
    /// One candidate finished (successfully or not); `done` of `total`.
    Finished {
        index: usize,
        done: usize,
        total: usize,
    },
}

/// Compiles every spec on `threads` threads (through the cache when one is given), in input
/// order. Each entry is the kernel or the reason it could not be built.
pub fn compile_all(
    specs: &[KernelSpec],
    cache: Option<&KernelCache>,
    threads: usize,
    progress: &(dyn Fn(CompileEvent) + Sync),
) -> Vec<Result<CompiledKernel, GpuError>> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<CompiledKernel, GpuError>>>> =
        Mutex::new((0..specs.len()).map(|_| None).collect());
    let threads = threads.clamp(1, specs.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(spec) = specs.get(i) else { break };
                    let r = match cache {
                        Some(c) => c.get_or_compile(spec, &|defect| {
                            progress(CompileEvent::CacheEntryRejected {
                                index: i,
                                defect: defect.clone(),
                            });
                        }),
                        None => compile_kernel(spec),
                    };
                    results.lock().expect("no thread panics holding it")[i] = Some(r);
                    let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                    progress(CompileEvent::Finished {
                        index: i,
                        done: d,
                        total: specs.len(),
                    });
                }
            });
        }
    });
    results
        .into_inner()
        .expect("no thread panics holding it")
        .into_iter()
        .map(|r| r.expect("every index was compiled"))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use carver::Layout;

    use super::*;

    fn spec(block_n: u32) -> KernelSpec {
        crate::sm90::test_spec(128, block_n, 1, Layout::Row)
    }

    /// A kernel as NVRTC would return it, with made-up bytes (no NVRTC needed).
    fn fake(spec: &KernelSpec, bytes: &[u8]) -> CompiledKernel {
        CompiledKernel {
            spec: *spec,
            cubin: bytes.to_vec(),
            report: PtxasReport {
                registers: 168,
                ..PtxasReport::default()
            },
            log: "ptxas info    : Used 168 registers".into(),
            compile_s: 0.5,
            from_cache: false,
            path: None,
        }
    }

    const CUBIN: &[u8] = b"\x7fELF\x02\x01\x01 not really a cubin, but bytes to check";

    /// A cache holding one stored fake kernel, and the paths of its cubin and index entry.
    fn stored() -> (tempfile::TempDir, KernelCache, KernelSpec, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::for_nvrtc(dir.path(), (13, 0));
        let s = spec(128);
        cache.store(&mut fake(&s, CUBIN)).unwrap();
        let (cubin, index) = cache.paths(&cache.key(&s));
        (dir, cache, s, cubin, index)
    }

    fn edit_index(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        edit(&mut v);
        std::fs::write(path, serde_json::to_vec(&v).unwrap()).unwrap();
    }

    /// Ways to damage a stored entry, each with the defect it must be reported as.
    #[allow(clippy::type_complexity)]
    fn damages() -> Vec<(
        &'static str,
        Box<dyn Fn(&Path, &Path)>,
        fn(&CacheDefect) -> bool,
    )> {
        vec![
            (
                "a flipped byte",
                Box::new(|cubin: &Path, _: &Path| {
                    let mut b = std::fs::read(cubin).unwrap();
                    b[10] ^= 0x01;
                    std::fs::write(cubin, b).unwrap();
                }),
                |d| matches!(d, CacheDefect::HashMismatch { .. }),
            ),
            (
                "a truncated cubin",
                Box::new(|cubin: &Path, _: &Path| {
                    std::fs::write(cubin, &CUBIN[..CUBIN.len() / 2]).unwrap();
                }),
                |d| matches!(d, CacheDefect::Truncated { .. }),
            ),
            (
                "an empty cubin",
                Box::new(|cubin: &Path, _: &Path| std::fs::write(cubin, b"").unwrap()),
                |d| matches!(d, CacheDefect::Truncated { found: 0, .. }),
            ),
            (
                "bytes appended to the cubin",
                Box::new(|cubin: &Path, _: &Path| {
                    std::fs::write(cubin, [CUBIN, b"more"].concat()).unwrap();
                }),
                |d| matches!(d, CacheDefect::Oversized { .. }),
            ),
            (
                "a deleted index entry",
                Box::new(|_: &Path, index: &Path| std::fs::remove_file(index).unwrap()),
                |d| matches!(d, CacheDefect::MissingIndex { .. }),
            ),
            (
                "a deleted cubin",
                Box::new(|cubin: &Path, _: &Path| std::fs::remove_file(cubin).unwrap()),
                |d| matches!(d, CacheDefect::MissingCubin { .. }),
            ),
            (
                "an index entry that is not JSON",
                Box::new(|_: &Path, index: &Path| {
                    std::fs::write(index, b"{\"format\": 1, \"key\": ").unwrap();
                }),
                |d| matches!(d, CacheDefect::MalformedIndex { reason, .. } if reason.contains("not JSON")),
            ),
            (
                "an index entry that is a JSON array",
                Box::new(|_: &Path, index: &Path| std::fs::write(index, b"[1, 2]").unwrap()),
                |d| matches!(d, CacheDefect::MalformedIndex { .. }),
            ),
            (
                "an index entry of an older carver",
                Box::new(|_: &Path, index: &Path| {
                    std::fs::write(index, br#"{"label": "x", "report": {}, "log": ""}"#).unwrap();
                }),
                |d| matches!(d, CacheDefect::MalformedIndex { reason, .. } if reason.contains("older carver")),
            ),
            (
                "an index entry of an unknown format",
                Box::new(|_: &Path, index: &Path| {
                    edit_index(index, |v| v["format"] = 99.into());
                }),
                |d| matches!(d, CacheDefect::MalformedIndex { reason, .. } if reason.contains("format 99")),
            ),
            (
                "an index entry without its hash",
                Box::new(|_: &Path, index: &Path| {
                    edit_index(index, |v| {
                        v.as_object_mut().unwrap().remove("cubin_sha256");
                    });
                }),
                |d| matches!(d, CacheDefect::MalformedIndex { reason, .. } if reason.contains("cubin_sha256")),
            ),
            (
                "a hash that is not hex",
                Box::new(|_: &Path, index: &Path| {
                    edit_index(index, |v| v["cubin_sha256"] = "z".repeat(64).into());
                }),
                |d| matches!(d, CacheDefect::MalformedIndex { reason, .. } if reason.contains("hex")),
            ),
            (
                "a recorded size of 0",
                Box::new(|_: &Path, index: &Path| {
                    edit_index(index, |v| v["cubin_bytes"] = 0.into());
                }),
                |d| matches!(d, CacheDefect::MalformedIndex { .. }),
            ),
            (
                "an index entry of another source",
                Box::new(|_: &Path, index: &Path| {
                    edit_index(index, |v| v["source_sha256"] = "0".repeat(64).into());
                }),
                |d| {
                    matches!(
                        d,
                        CacheDefect::OtherKernel {
                            field: "source_sha256",
                            ..
                        }
                    )
                },
            ),
            (
                "an index entry of another NVRTC",
                Box::new(|_: &Path, index: &Path| {
                    edit_index(index, |v| v["nvrtc"] = "12.8".into());
                }),
                |d| matches!(d, CacheDefect::OtherKernel { field: "nvrtc", .. }),
            ),
            (
                "a directory in place of the cubin",
                Box::new(|cubin: &Path, _: &Path| {
                    std::fs::remove_file(cubin).unwrap();
                    std::fs::create_dir(cubin).unwrap();
                }),
                |d| matches!(d, CacheDefect::Unreadable { .. }),
            ),
        ]
    }

    #[test]
    fn a_stored_kernel_loads_back_as_it_was() {
        let (dir, cache, s, cubin, index) = stored();
        let k = cache.load(&s).unwrap().expect("an entry");
        assert_eq!(k.cubin, CUBIN);
        assert_eq!(k.report.registers, 168);
        assert!(k.from_cache);
        assert_eq!(k.compile_s, 0.0);
        assert_eq!(k.path.as_deref(), Some(cubin.as_path()));
        let entry: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
        assert_eq!(entry["format"], 1);
        assert_eq!(entry["cubin_bytes"], CUBIN.len());
        assert_eq!(entry["cubin_sha256"], sha256_hex(CUBIN));
        assert_eq!(entry["source_sha256"], sha256_hex(s.source().as_bytes()));
        assert_eq!(entry["nvrtc"], "13.0");
        assert_eq!(entry["arch"], "sm_90a");
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("kernels"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn no_entry_is_a_plain_miss() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::for_nvrtc(dir.path(), (13, 0));
        assert!(matches!(cache.load(&spec(128)), Ok(None)));
        // Another NVRTC version keys its kernels apart.
        let (_dir, stored_cache, s, _, _) = stored();
        let other = KernelCache::for_nvrtc(stored_cache.dir().parent().unwrap(), (13, 1));
        assert_ne!(other.key(&s), stored_cache.key(&s));
        assert!(matches!(other.load(&s), Ok(None)));
    }

    #[test]
    fn sha256_is_sha256() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn every_damage_is_detected() {
        for (what, damage, expected) in damages() {
            let (_dir, cache, s, cubin, index) = stored();
            damage(&cubin, &index);
            match cache.load(&s) {
                Err(d) => {
                    assert!(expected(&d), "{what}: reported as {d:?}");
                    // The message names the file.
                    let text = d.to_string();
                    assert!(text.contains(&cache.key(&s)), "{what}: {text}");
                }
                Ok(k) => panic!("{what}: loaded {:?}", k.map(|k| k.cubin.len())),
            }
        }
    }

    #[test]
    fn an_entry_stored_under_another_key_is_refused() {
        let (_dir, cache, s, cubin, index) = stored();
        let other = spec(64);
        let (other_cubin, other_index) = cache.paths(&cache.key(&other));
        std::fs::copy(&cubin, other_cubin).unwrap();
        std::fs::copy(&index, other_index).unwrap();
        match cache.load(&other) {
            Err(CacheDefect::OtherKernel { field: "key", .. }) => {}
            r => panic!("{r:?}"),
        }
        assert!(cache.load(&s).unwrap().is_some());
    }

    #[test]
    fn a_damaged_entry_is_reported_compiled_again_and_replaced() {
        for (what, damage, _) in damages() {
            let (_dir, cache, s, cubin, index) = stored();
            damage(&cubin, &index);
            if cubin.is_dir() {
                // Nothing renames a file over a directory: reported, then an error naming it.
                std::fs::remove_dir(&cubin).unwrap();
                continue;
            }
            let compiles = Cell::new(0);
            let reports = Mutex::new(Vec::new());
            let compile = |sp: &KernelSpec| {
                compiles.set(compiles.get() + 1);
                Ok(fake(sp, CUBIN))
            };
            let k = cache
                .get_or_compile_with(&s, &compile, &|d| reports.lock().unwrap().push(d.clone()))
                .unwrap();
            assert_eq!(compiles.get(), 1, "{what}");
            assert!(!k.from_cache, "{what}");
            assert_eq!(reports.lock().unwrap().len(), 1, "{what}");
            // The entry was replaced: the next lookup uses it, with nothing to report.
            let again = cache
                .get_or_compile_with(&s, &compile, &|d| panic!("{what}: {d}"))
                .unwrap();
            assert!(again.from_cache, "{what}");
            assert_eq!(again.cubin, CUBIN, "{what}");
            assert_eq!(compiles.get(), 1, "{what}");
        }
    }

    #[test]
    fn a_directory_in_place_of_the_cubin_is_reported_and_the_store_fails_naming_it() {
        let (_dir, cache, s, cubin, _) = stored();
        std::fs::remove_file(&cubin).unwrap();
        std::fs::create_dir(&cubin).unwrap();
        let reports = Mutex::new(Vec::new());
        let r = cache.get_or_compile_with(&s, &|sp| Ok(fake(sp, CUBIN)), &|d| {
            reports.lock().unwrap().push(d.clone())
        });
        assert_eq!(reports.lock().unwrap().len(), 1);
        match r {
            Err(e @ GpuError::Io { .. }) => {
                assert!(e.to_string().contains(&cache.key(&s)), "{e}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_damaged_entry_that_fails_to_compile_again_is_removed() {
        let (_dir, cache, s, cubin, index) = stored();
        std::fs::write(&cubin, b"garbage").unwrap();
        let r = cache.get_or_compile_with(
            &s,
            &|sp| {
                Err(GpuError::KernelCompile {
                    kernel: sp.label(),
                    log: "error".into(),
                })
            },
            &|_| {},
        );
        assert!(matches!(r, Err(GpuError::KernelCompile { .. })));
        assert!(!cubin.exists());
        assert!(!index.exists());
        assert!(matches!(cache.load(&s), Ok(None)));
    }

    #[test]
    fn an_oversized_index_entry_is_not_read() {
        let (_dir, cache, s, _, index) = stored();
        let f = File::create(&index).unwrap();
        f.set_len(MAX_INDEX_BYTES + 1).unwrap();
        match cache.load(&s) {
            Err(CacheDefect::MalformedIndex { reason, .. }) => {
                assert!(reason.contains("more than any index entry"), "{reason}")
            }
            r => panic!("{r:?}"),
        }
    }
}
