//! carver's run-time compiled helper sources (the calibration microbenchmarks, the tuning
//! worker's helpers): the helpers they share live once in `common.cuh`, which each source's
//! Rust side puts in front of it with `concat!`, and one way to compile them to PTX.

use carver_arch::ComputeCapability;
use cudarc::nvrtc::{CompileError, CompileOptions, compile_ptx_with_opts};

use crate::driver::guarded;
use crate::error::GpuError;

/// Compiles `source` (named `file_name` in NVRTC's messages) to PTX for `cc`; the driver
/// finishes the compilation when the module is loaded. `kernels` names the source in errors
/// and `why` says what needs it when libnvrtc is missing. Needs libnvrtc, not a GPU.
pub(crate) fn compile_ptx(
    source: &str,
    file_name: &str,
    cc: ComputeCapability,
    kernels: &'static str,
    why: &'static str,
) -> Result<String, GpuError> {
    // SAFETY: only tries to dlopen the candidate names.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(GpuError::MissingLibrary {
            library: "libnvrtc (CUDA NVRTC)",
            why,
        });
    }
    let options = CompileOptions {
        options: vec![
            format!("--gpu-architecture=compute_{}", cc.sm()),
            "-DNDEBUG".into(),
        ],
        name: Some(file_name.into()),
        ..Default::default()
    };
    let ptx = guarded("libnvrtc", "nvrtcCompileProgram", || {
        compile_ptx_with_opts(source, options).map_err(|e| GpuError::Compile {
            kernel: kernels,
            reason: match e {
                CompileError::CompileError { nvrtc, log, .. } => {
                    format!("{nvrtc:?}: {}", log.to_string_lossy())
                }
                other => other.to_string(),
            },
        })
    })?;
    Ok(ptx.to_src())
}
