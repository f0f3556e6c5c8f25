//! Writes the generated source and the cubin of one cuda-sm90 instantiation, for reading the
//! SASS (`cuobjdump -sass`) and ptxas' report without a GPU.
use std::process::ExitCode;

use carver::{DType, Layout};
use carver_gpu::sm90::{KernelSpec, compile_kernel};

// Only the std-and-libc half of carver's example helpers: this crate has no flate2.
#[path = "../../carver/examples/common/cli.rs"]
mod cli;
use cli::Context;

const USAGE: &str = "\
Compiles one cuda-sm90 instantiation with NVRTC (no GPU needed; libnvrtc must load) and writes
its source (kernel.cu) and cubin (kernel.cubin) to OUT_DIR, for `cuobjdump -sass`; prints the
kernel's label and ptxas' report.

Usage: cargo run -p carver-gpu --example sm90_dump -- PARAMS_JSON row|col bf16|f16 OUT_DIR

  PARAMS_JSON  the configuration in cuda-sm90's own terms, e.g.
               '{\"block_m\":128,\"block_n\":256,\"block_k\":64,\"stages\":4,\"consumers\":2,
                 \"group_m\":8,\"cluster_m\":1,\"persistent\":false}'
  row|col      storage order of B
  bf16|f16     input (and output) type
  OUT_DIR      created if missing
";

fn main() -> ExitCode {
    cli::main(USAGE, run)
}

fn run(args: Vec<String>) -> cli::Result {
    let [params, layout, dtype, out] = args.as_slice() else {
        return cli::usage_error(format!("expected 4 arguments, got {}", args.len()));
    };
    let input: DType = dtype
        .parse()
        .or_else(|e| cli::usage_error(format!("type: {e}")))?;
    let spec = KernelSpec {
        params: serde_json::from_str(params)
            .or_else(|e| cli::usage_error(format!("PARAMS_JSON: {e}")))?,
        input,
        output: input,
        layout_b: layout
            .parse::<Layout>()
            .or_else(|e| cli::usage_error(format!("layout: {e}")))?,
    };
    let k = compile_kernel(&spec)?;
    std::fs::create_dir_all(out).context(out)?;
    std::fs::write(format!("{out}/kernel.cu"), spec.source()).context(out)?;
    std::fs::write(format!("{out}/kernel.cubin"), &k.cubin).context(out)?;
    println!("{}\n{}", spec.label(), k.log);
    Ok(())
}
