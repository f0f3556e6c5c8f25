//! NVRTC compilation of `cuda-sm90` instantiations to sm_90a cubins and ptxas' resource report
//! (the on-disk cache of cubins is in `kernel_cache`).
//!
//! Needs libnvrtc, not a GPU.

use std::ffi::{CStr, CString, c_char};
use std::path::PathBuf;
use std::time::Instant;

use cudarc::nvrtc::{result as nvrtc_result, sys as nvrtc_sys};
use serde::{Deserialize, Serialize};

use super::KernelSpec;
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

pub(super) fn options() -> Vec<String> {
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

pub(super) fn reject_spills(k: &CompiledKernel) -> Result<(), GpuError> {
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
