//! `carver moe`: the fused-MoE Triton kernel's config file (vLLM, SGLang) for a mixture-of-
//! experts layer, from the cost model, for one or several GPUs.

use std::path::PathBuf;
use std::process::ExitCode;

use carver::TopK;
use carver::moe::{MoeDtype, MoeTemplate, Routing};
use carver_flows::archs::ArchChoice;
use carver_flows::moe::{
    MoeFileFormat, MoeRequest, file_text, moe, parse_block_shape, read_hf_config, read_routing,
    write_files,
};
use clap::{Args, ValueEnum};

use crate::Globals;
use crate::progress::Terminal;
use crate::recommend::{parse_gpu_name, parse_size, parse_topk};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MoeFormat {
    /// vLLM's config file (`E=..,N=..,device_name=...json`).
    Vllm,
    /// SGLang's config file (same content; SGLang's spelling of the name).
    Sglang,
    /// carver's ranking per batch size with predictions (versioned JSON).
    Json,
}

#[derive(Debug, Args)]
pub struct MoeArgs {
    /// GPU(s) to write a file for: database names (`h100,h200`, or the option repeated), or `auto`.
    #[arg(long, value_delimiter = ',', default_value = "h100", value_parser = parse_gpu_name)]
    pub arch: Vec<String>,
    /// A Hugging Face model config.json to read the layer from (the flags below override it).
    #[arg(long, value_name = "FILE")]
    pub from_hf: Option<PathBuf>,
    /// Experts in the layer (E).
    #[arg(long, value_parser = parse_count, required_unless_present = "from_hf", allow_negative_numbers = true)]
    pub experts: Option<u32>,
    /// Experts each token is routed to.
    #[arg(long, value_parser = parse_count, required_unless_present = "from_hf", allow_negative_numbers = true)]
    pub topk: Option<u32>,
    /// Model hidden size.
    #[arg(long, value_parser = parse_size, required_unless_present = "from_hf", allow_negative_numbers = true)]
    pub hidden: Option<u64>,
    /// The layer's intermediate size (moe_intermediate_size), before tensor parallelism.
    #[arg(long, value_parser = parse_size, required_unless_present = "from_hf", allow_negative_numbers = true)]
    pub intermediate: Option<u64>,
    /// Tensor-parallel degree: each GPU holds intermediate / tp of every expert.
    #[arg(long, default_value_t = 1, value_parser = parse_count, allow_negative_numbers = true)]
    pub tp: u32,
    /// bf16, fp16 or fp8_w8a8.
    #[arg(long, default_value = "bf16", value_parser = parse_dtype)]
    pub dtype: MoeDtype,
    /// Block shape of block-quantized fp8 weights: 128,128.
    #[arg(long, value_parser = parse_block_shape)]
    pub block_shape: Option<[u32; 2]>,
    /// Batch sizes (the file's keys); default: vLLM's tuner's 1,2,4,...,4096.
    #[arg(long, value_delimiter = ',', value_parser = parse_size, allow_negative_numbers = true)]
    pub batch_sizes: Option<Vec<u64>>,
    /// Tokens per expert, a JSON array with one entry per expert (default: uniform routing).
    #[arg(long, value_name = "FILE")]
    pub routing: Option<PathBuf>,
    /// Ranked configurations per batch size in the JSON document (1 to 1024).
    #[arg(long, default_value_t = TopK::DEFAULT, value_parser = parse_topk, allow_negative_numbers = true)]
    pub candidates: TopK,
    /// vllm or sglang (the config file) or json (rankings with predictions).
    #[arg(long, value_enum, default_value_t = MoeFormat::Vllm)]
    pub format: MoeFormat,
    /// Directory to write one file per GPU into (default: print to stdout).
    #[arg(long, value_name = "DIR")]
    pub output: Option<PathBuf>,
}

fn parse_count(s: &str) -> Result<u32, String> {
    let v = parse_size(s)?;
    u32::try_from(v).map_err(|_| format!("{v} is too large (accepted: 1 to {})", u32::MAX))
}

fn parse_dtype(s: &str) -> Result<MoeDtype, String> {
    s.parse().map_err(|e: carver::CarverError| e.to_string())
}

pub fn run(args: MoeArgs, globals: &Globals) -> anyhow::Result<ExitCode> {
    let hf = args.from_hf.as_deref().map(read_hf_config).transpose()?;
    let from_hf = |what: &str| anyhow::anyhow!("--{what} is required without --from-hf");
    let experts = args
        .experts
        .or(hf.map(|h| h.experts))
        .ok_or_else(|| from_hf("experts"))?;
    let topk = args
        .topk
        .or(hf.map(|h| h.topk))
        .ok_or_else(|| from_hf("topk"))?;
    let hidden = args
        .hidden
        .or(hf.map(|h| h.hidden))
        .ok_or_else(|| from_hf("hidden"))?;
    let intermediate = args
        .intermediate
        .or(hf.map(|h| h.intermediate))
        .ok_or_else(|| from_hf("intermediate"))?;
    let routing = match &args.routing {
        Some(path) => read_routing(path)?,
        None => Routing::Uniform,
    };
    let request = MoeRequest {
        archs: args.arch.iter().map(|a| ArchChoice::parse(a)).collect(),
        template: MoeTemplate::new(experts, topk, hidden, intermediate)
            .with_tp(args.tp)
            .with_dtype(args.dtype)
            .with_block_shape(args.block_shape)
            .with_routing(routing),
        batch_sizes: args.batch_sizes.clone(),
        candidates: args.candidates,
    };
    let docs = moe(&globals.locations, &request, &Terminal::default())?;
    let format = match args.format {
        MoeFormat::Vllm => MoeFileFormat::Vllm,
        MoeFormat::Sglang => MoeFileFormat::Sglang,
        MoeFormat::Json => MoeFileFormat::Json,
    };
    match &args.output {
        Some(dir) => {
            for path in write_files(&docs, format, dir)? {
                eprintln!("wrote {}", path.display());
            }
        }
        None => match (format, docs.as_slice()) {
            (_, [one]) => print!("{}", file_text(one, format)),
            (MoeFileFormat::Json, many) => println!("{}", serde_json::to_string_pretty(many)?),
            _ => anyhow::bail!(
                "{} GPUs give {} config files: pass --output DIR to write them (stdout holds one)",
                docs.len(),
                docs.len()
            ),
        },
    }
    Ok(ExitCode::SUCCESS)
}
