//! NVRTC compilation of `cuda-sm90` instantiations to sm_90a cubins, ptxas' resource report,
//! an on-disk cache of cubins, and parallel compilation of many candidates.
//!
//! Needs libnvrtc, not a GPU.

use std::ffi::{CStr, CString, c_char};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use cudarc::nvrtc::{result as nvrtc_result, sys as nvrtc_sys};
use serde::{Deserialize, Serialize};

use super::{KernelSpec, fnv1a};
use crate::driver::guarded;
use crate::error::GpuError;

/// The architecture every instantiation is compiled for (wgmma and setmaxnreg need the `a`).
pub const GPU_ARCH: &str = "sm_90a";

/// What ptxas reported for the kernel (`--ptxas-options=-v`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtxasReport {
    pub registers: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    pub stack_frame_bytes: u32,
    /// ptxas warnings, verbatim (e.g. wgmma serialization).
    pub warnings: Vec<String>,
}

impl PtxasReport {
    /// Reads the report of the kernel from an NVRTC log.
    pub fn parse(log: &str) -> Option<Self> {
        let mut report = PtxasReport::default();
        let mut seen_registers = false;
        for line in log.lines() {
            let line = line.trim();
            if line.contains("ptxas") && line.contains("warning") {
                report.warnings.push(line.to_string());
            }
            if let Some(rest) = line.split("Used ").nth(1)
                && let Some(n) = number_before(rest, " registers")
            {
                report.registers = n;
                seen_registers = true;
            }
            if let Some(n) = number_before(line, " bytes stack frame") {
                report.stack_frame_bytes = n;
            }
            if let Some(n) = number_before(line, " bytes spill stores") {
                report.spill_store_bytes = n;
            }
            if let Some(n) = number_before(line, " bytes spill loads") {
                report.spill_load_bytes = n;
            }
        }
        seen_registers.then_some(report)
    }

    pub fn spills(&self) -> bool {
        self.spill_store_bytes > 0 || self.spill_load_bytes > 0
    }
}

/// The integer right before `marker` in `text` (`"0 bytes spill stores"` → 0).
fn number_before(text: &str, marker: &str) -> Option<u32> {
    let end = text.find(marker)?;
    let head = &text[..end];
    let start = head
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    head[start..].parse().ok()
}

/// A compiled instantiation.
#[derive(Clone, Debug)]
pub struct CompiledKernel {
    pub spec: KernelSpec,
    pub cubin: Vec<u8>,
    pub report: PtxasReport,
    /// NVRTC's log (ptxas' report and any warnings).
    pub log: String,
    /// Wall time of the compilation; 0 when the cubin came from the cache.
    pub compile_s: f64,
    pub from_cache: bool,
    /// Where the cubin is kept, when a cache is in use.
    pub path: Option<PathBuf>,
}

/// NVRTC's version (major, minor).
pub fn nvrtc_version() -> Result<(i32, i32), GpuError> {
    ensure_nvrtc()?;
    guarded("libnvrtc", "nvrtcVersion", || {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: writes two ints.
        unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) }
            .result()
            .map_err(|e| GpuError::KernelCompile {
                kernel: "nvrtcVersion".into(),
                log: format!("{e:?}"),
            })?;
        Ok((major, minor))
    })
}

fn ensure_nvrtc() -> Result<(), GpuError> {
    // SAFETY: only tries to dlopen the candidate names.
    if unsafe { nvrtc_sys::is_culib_present() } {
        Ok(())
    } else {
        Err(GpuError::MissingLibrary {
            library: "libnvrtc (CUDA NVRTC)",
            why: "carver compiles its cuda-sm90 kernels at run time (install the CUDA toolkit or \
                  the nvidia-cuda-nvrtc wheel and put its lib folder on LD_LIBRARY_PATH)",
        })
    }
}

fn options() -> Vec<String> {
    vec![
        format!("--gpu-architecture={GPU_ARCH}"),
        "-std=c++17".into(),
        "-DNDEBUG".into(),
        "--ptxas-options=-v".into(),
        // Where a driver is installed NVRTC may answer from the driver's compute cache, and a
        // cached answer carries no ptxas report; carver keeps its own cache of cubins.
        "--no-cache".into(),
    ]
}

/// Compiles one instantiation to a cubin. A kernel that does not compile, or that spills
/// registers, is an error naming the configuration.
pub fn compile_kernel(spec: &KernelSpec) -> Result<CompiledKernel, GpuError> {
    spec.check().map_err(|reason| GpuError::UnsupportedConfig {
        config: spec.label(),
        reason,
    })?;
    ensure_nvrtc()?;
    let source = spec.source();
    let started = Instant::now();
    let (cubin, log) = guarded("libnvrtc", "nvrtcCompileProgram", || {
        nvrtc_cubin(&source, &spec.label())
    })?;
    let report = PtxasReport::parse(&log).ok_or_else(|| GpuError::KernelCompile {
        kernel: spec.label(),
        log: format!("ptxas printed no resource report; log:\n{log}"),
    })?;
    let compiled = CompiledKernel {
        spec: *spec,
        cubin,
        report,
        log,
        compile_s: started.elapsed().as_secs_f64(),
        from_cache: false,
        path: None,
    };
    reject_spills(&compiled)?;
    Ok(compiled)
}

/// Compiles any CUDA source for sm_90a to a cubin with the family's options, returning the cubin
/// and NVRTC's log (for tools and tests that need a kernel of their own).
pub fn compile_source(source: &str, label: &str) -> Result<(Vec<u8>, String), GpuError> {
    ensure_nvrtc()?;
    guarded("libnvrtc", "nvrtcCompileProgram", || {
        nvrtc_cubin(source, label)
    })
}

fn reject_spills(k: &CompiledKernel) -> Result<(), GpuError> {
    if k.report.spills() {
        return Err(GpuError::Spills {
            config: k.spec.label(),
            registers: k.report.registers,
            store_bytes: k.report.spill_store_bytes,
            load_bytes: k.report.spill_load_bytes,
        });
    }
    Ok(())
}

fn c_text(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Compiles `source` with NVRTC and returns the cubin and the log.
fn nvrtc_cubin(source: &str, label: &str) -> Result<(Vec<u8>, String), GpuError> {
    let src = CString::new(source).map_err(|_| GpuError::KernelCompile {
        kernel: label.into(),
        log: "the generated source contains a NUL byte".into(),
    })?;
    let name: &CStr = c"carver_sm90.cu";
    let fail = |log: String| GpuError::KernelCompile {
        kernel: label.into(),
        log,
    };
    let prog = nvrtc_result::create_program(&src, Some(name))
        .map_err(|e| fail(format!("nvrtcCreateProgram: {e:?}")))?;
    // SAFETY: `prog` comes from create_program and is destroyed once, below; `src` and `name`
    // outlive it.
    let outcome = unsafe {
        let compiled = nvrtc_result::compile_program(prog, &options());
        let log = nvrtc_result::get_program_log(prog)
            .map(|l| c_text(&l))
            .unwrap_or_default();
        match compiled {
            Err(e) => Err(fail(format!("{e:?}\n{log}"))),
            Ok(()) => {
                let mut size = 0usize;
                match nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size).result() {
                    Err(e) => Err(fail(format!("nvrtcGetCUBINSize: {e:?}"))),
                    Ok(()) if size == 0 => Err(fail("NVRTC produced an empty cubin".into())),
                    Ok(()) => {
                        let mut cubin = vec![0u8; size];
                        nvrtc_sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast())
                            .result()
                            .map(|()| (cubin, log))
                            .map_err(|e| fail(format!("nvrtcGetCUBIN: {e:?}")))
                    }
                }
            }
        }
    };
    // SAFETY: created above and not destroyed yet.
    let _ = unsafe { nvrtc_result::destroy_program(prog) };
    outcome
}

/// Cubins on disk under `<cache dir>/kernels/`, keyed by a hash of the generated source (which
/// holds the configuration), the compile options, the architecture and NVRTC's version.
#[derive(Clone, Debug)]
pub struct KernelCache {
    dir: PathBuf,
    nvrtc: (i32, i32),
}

/// What the cache keeps beside each cubin.
#[derive(Serialize, Deserialize)]
struct CacheMeta {
    label: String,
    report: PtxasReport,
    log: String,
}

impl KernelCache {
    /// A cache under `<cache_dir>/kernels` (created on first store).
    pub fn new(cache_dir: &Path) -> Result<Self, GpuError> {
        Ok(Self {
            dir: cache_dir.join("kernels"),
            nvrtc: nvrtc_version()?,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn key(&self, spec: &KernelSpec) -> String {
        let opts = options().join(" ");
        let version = format!("{}.{}", self.nvrtc.0, self.nvrtc.1);
        format!(
            "{:016x}",
            fnv1a(&[
                spec.source().as_bytes(),
                opts.as_bytes(),
                GPU_ARCH.as_bytes(),
                version.as_bytes(),
            ])
        )
    }

    fn paths(&self, spec: &KernelSpec) -> (PathBuf, PathBuf) {
        let key = self.key(spec);
        (
            self.dir.join(format!("{key}.cubin")),
            self.dir.join(format!("{key}.json")),
        )
    }

    /// The cached kernel, if a complete entry is there (a damaged entry counts as a miss).
    pub fn load(&self, spec: &KernelSpec) -> Option<CompiledKernel> {
        let (cubin_path, meta_path) = self.paths(spec);
        let meta: CacheMeta = serde_json::from_slice(&std::fs::read(&meta_path).ok()?).ok()?;
        let cubin = std::fs::read(&cubin_path).ok()?;
        if cubin.is_empty() {
            return None;
        }
        Some(CompiledKernel {
            spec: *spec,
            cubin,
            report: meta.report,
            log: meta.log,
            compile_s: 0.0,
            from_cache: true,
            path: Some(cubin_path),
        })
    }

    /// Stores a kernel (the cubin first, then its description, each written whole and renamed
    /// into place, so a reader sees complete entries only).
    pub fn store(&self, kernel: &mut CompiledKernel) -> Result<(), GpuError> {
        std::fs::create_dir_all(&self.dir).map_err(|source| GpuError::Io {
            path: self.dir.clone(),
            source,
        })?;
        let (cubin_path, meta_path) = self.paths(&kernel.spec);
        let meta = CacheMeta {
            label: kernel.spec.label(),
            report: kernel.report.clone(),
            log: kernel.log.clone(),
        };
        let meta_bytes = serde_json::to_vec_pretty(&meta).expect("cache metadata serializes");
        write_atomically(&cubin_path, &kernel.cubin)?;
        write_atomically(&meta_path, &meta_bytes)?;
        kernel.path = Some(cubin_path);
        Ok(())
    }

    /// The cached kernel, or a fresh compile stored for next time.
    pub fn get_or_compile(&self, spec: &KernelSpec) -> Result<CompiledKernel, GpuError> {
        if let Some(k) = self.load(spec) {
            reject_spills(&k)?;
            return Ok(k);
        }
        let mut k = compile_kernel(spec)?;
        self.store(&mut k)?;
        Ok(k)
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), GpuError> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let io = |source| GpuError::Io {
        path: path.to_path_buf(),
        source,
    };
    std::fs::write(&tmp, bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}

/// Progress of [`compile_all`].
#[derive(Clone, Debug)]
pub enum CompileEvent {
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
                        Some(c) => c.get_or_compile(spec),
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
    use super::*;

    #[test]
    fn ptxas_report_is_parsed() {
        let log = "ptxas info    : 0 bytes gmem\n\
                   ptxas info    : Compiling entry function 'carver_sm90_gemm' for 'sm_90a'\n\
                   ptxas info    : Function properties for carver_sm90_gemm\n\
                   \x20   8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
                   ptxas info    : Used 168 registers, used 1 barriers, 904 bytes cmem[0]\n\
                   ptxas warning : (C7515) Potential Performance Loss: wgmma.mma_async serialized\n";
        let r = PtxasReport::parse(log).unwrap();
        assert_eq!(r.registers, 168);
        assert_eq!(r.stack_frame_bytes, 8);
        assert_eq!(r.spill_store_bytes, 4);
        assert_eq!(r.spill_load_bytes, 12);
        assert!(r.spills());
        assert_eq!(r.warnings.len(), 1);
        assert!(PtxasReport::parse("no report here").is_none());
    }

    #[test]
    fn numbers_are_read_before_their_marker() {
        assert_eq!(
            number_before("0 bytes spill stores", " bytes spill stores"),
            Some(0)
        );
        assert_eq!(
            number_before("x, 128 bytes spill loads", " bytes spill loads"),
            Some(128)
        );
        assert_eq!(
            number_before("bytes spill loads", " bytes spill loads"),
            None
        );
    }
}
