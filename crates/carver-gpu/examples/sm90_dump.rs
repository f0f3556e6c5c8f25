//! Writes the generated source and the cubin of one cuda-sm90 instantiation, for reading the
//! SASS (`cuobjdump -sass`) and ptxas' report without a GPU.
//!
//! `cargo run -p carver-gpu --example sm90_dump -- '{"block_m":128,"block_n":256,"block_k":64,
//! "stages":4,"consumers":2,"group_m":8,"cluster_m":1,"persistent":false}' row bf16 OUT_DIR`

use carver::{DType, Layout};
use carver_gpu::sm90::{KernelSpec, compile_kernel};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [params, layout, dtype, out] = args.as_slice() else {
        return Err("usage: sm90_dump PARAMS_JSON row|col bf16|f16 OUT_DIR".into());
    };
    let input: DType = dtype.parse()?;
    let spec = KernelSpec {
        params: serde_json::from_str(params)?,
        input,
        output: input,
        layout_b: layout.parse::<Layout>()?,
    };
    let k = compile_kernel(&spec)?;
    std::fs::create_dir_all(out)?;
    std::fs::write(format!("{out}/kernel.cu"), spec.source())?;
    std::fs::write(format!("{out}/kernel.cubin"), &k.cubin)?;
    println!("{}\n{}", spec.label(), k.log);
    Ok(())
}
