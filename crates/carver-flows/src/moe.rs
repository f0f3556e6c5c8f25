//! `moe`: the fused-MoE kernel's config file for a layer, on one or several GPUs, from the cost
//! model alone. Also the inputs every front end reads for it: Hugging Face model configs,
//! routing histograms, block shapes and batch-size lists.

use std::path::Path;

use carver::TopK;
use carver::moe::{Engine, MoeDtype, MoeTemplate, Routing, config_file_name, recommend_moe_file};
use carver_schema::{MoeOutput, MoeProblemSpec, SCHEMA_VERSION};

use crate::archs::{self, ArchChoice};
use crate::{FlowError, Locations, Progress};

/// What to configure: one MoE layer, for each GPU of `archs`.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeRequest {
    pub archs: Vec<ArchChoice>,
    pub template: MoeTemplate,
    /// vLLM's tuner's ladder when `None`.
    pub batch_sizes: Option<Vec<u64>>,
    /// Ranked configurations per batch size.
    pub candidates: TopK,
}

impl MoeRequest {
    /// A bf16 layer with uniform routing on one database GPU, the tuner's batch sizes.
    pub fn new(arch: &str, experts: u32, topk: u32, hidden: u64, intermediate: u64) -> Self {
        Self {
            archs: vec![ArchChoice::parse(arch)],
            template: MoeTemplate::new(experts, topk, hidden, intermediate),
            batch_sizes: None,
            candidates: TopK::DEFAULT,
        }
    }
}

/// One document per GPU, in the order given.
pub fn moe(
    loc: &Locations,
    request: &MoeRequest,
    progress: &dyn Progress,
) -> Result<Vec<MoeOutput>, FlowError> {
    let archs = archs::resolve(loc, &request.archs, progress)?;
    let t = &request.template;
    archs
        .iter()
        .map(|arch| {
            let file =
                recommend_moe_file(t, arch, request.batch_sizes.as_deref(), request.candidates)?;
            Ok(MoeOutput {
                schema_version: SCHEMA_VERSION,
                carver_version: env!("CARGO_PKG_VERSION").to_string(),
                problem: MoeProblemSpec {
                    experts: t.experts,
                    topk: t.topk,
                    hidden: t.hidden,
                    intermediate: t.intermediate,
                    tp: t.tp,
                    shard_intermediate: file.problem.shard_intermediate,
                    dtype: t.dtype.as_str().to_string(),
                    block_shape: t.block_shape,
                    routing: match t.routing {
                        Routing::Uniform => "uniform",
                        Routing::Histogram(_) => "histogram",
                    }
                    .to_string(),
                },
                arch: arch.key().to_string(),
                device_name: file.device_name.clone(),
                sglang_file_name: config_file_name(&file.problem, arch, Engine::Sglang),
                file_name: file.file_name.clone(),
                batches: file.batches.iter().map(Into::into).collect(),
            })
        })
        .collect()
}

fn moe_input(source: &Path, reason: impl Into<String>) -> FlowError {
    FlowError::MoeInput {
        file: source.display().to_string(),
        reason: reason.into(),
    }
}

fn read_json(path: &Path) -> Result<serde_json::Value, FlowError> {
    let text = std::fs::read_to_string(path).map_err(|source| FlowError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| moe_input(path, format!("is not JSON: {e}")))
}

/// The MoE fields of a Hugging Face model config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HfMoeFields {
    pub experts: u32,
    pub topk: u32,
    pub hidden: u64,
    pub intermediate: u64,
}

/// Reads `num_local_experts` | `num_experts` | `n_routed_experts`, `num_experts_per_tok`,
/// `hidden_size` and `moe_intermediate_size` (else `intermediate_size`) from a Hugging Face
/// `config.json` (or its `text_config`, as multimodal models nest it).
pub fn read_hf_config(path: &Path) -> Result<HfMoeFields, FlowError> {
    let root = read_json(path)?;
    let has_experts = |v: &serde_json::Value| {
        ["num_local_experts", "num_experts", "n_routed_experts"]
            .iter()
            .any(|k| v.get(k).is_some_and(|x| !x.is_null()))
    };
    let v = match root.get("text_config") {
        Some(text) if !has_experts(&root) && has_experts(text) => text,
        _ => &root,
    };
    let int = |keys: &[&str]| -> Result<Option<u64>, FlowError> {
        for k in keys {
            match v.get(*k) {
                None | Some(serde_json::Value::Null) => continue,
                Some(x) => {
                    return x.as_u64().filter(|&n| n > 0).map(Some).ok_or_else(|| {
                        moe_input(
                            path,
                            format!("`{k}` is {x}; it must be a whole number of at least 1"),
                        )
                    });
                }
            }
        }
        Ok(None)
    };
    let need = |keys: &[&str]| -> Result<u64, FlowError> {
        int(keys)?.ok_or_else(|| {
            moe_input(
                path,
                format!(
                    "has no {}: not a mixture-of-experts config (needs num_local_experts, \
                     num_experts or n_routed_experts; num_experts_per_tok; hidden_size; \
                     moe_intermediate_size or intermediate_size)",
                    keys.join(" / ")
                ),
            )
        })
    };
    let small = |n: u64, what: &str| {
        u32::try_from(n).map_err(|_| moe_input(path, format!("`{what}` = {n} is too large")))
    };
    Ok(HfMoeFields {
        experts: small(
            need(&["num_local_experts", "num_experts", "n_routed_experts"])?,
            "experts",
        )?,
        topk: small(need(&["num_experts_per_tok"])?, "num_experts_per_tok")?,
        hidden: need(&["hidden_size"])?,
        intermediate: need(&["moe_intermediate_size", "intermediate_size"])?,
    })
}

/// Reads a routing histogram: a JSON array of tokens (or any relative weight) per expert, or an
/// object with that array under `tokens_per_expert`. The template checks its length and values.
pub fn read_routing(path: &Path) -> Result<Routing, FlowError> {
    let v = read_json(path)?;
    let list = v
        .as_array()
        .or_else(|| v.get("tokens_per_expert").and_then(|x| x.as_array()))
        .ok_or_else(|| {
            moe_input(
                path,
                "must be a JSON array of tokens per expert, or {\"tokens_per_expert\": [...]}",
            )
        })?;
    let weights = list
        .iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_f64()
                .filter(|w| w.is_finite() && *w >= 0.0)
                .ok_or_else(|| {
                    moe_input(
                        path,
                        format!("entry {i} is {x}; each must be a finite number >= 0"),
                    )
                })
        })
        .collect::<Result<Vec<f64>, _>>()?;
    Ok(Routing::Histogram(weights))
}

/// `128,128` (or `[128, 128]`) as a block shape.
pub fn parse_block_shape(text: &str) -> Result<[u32; 2], String> {
    let inner = text.trim().trim_start_matches('[').trim_end_matches(']');
    let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
    let bad = || {
        format!("block shape `{text}`: give two whole numbers, block_n,block_k (accepted: 128,128)")
    };
    match parts.as_slice() {
        [n, k] => Ok([n.parse().map_err(|_| bad())?, k.parse().map_err(|_| bad())?]),
        _ => Err(bad()),
    }
}

/// `1,2,4` as batch sizes (the template checks ranges and repeats).
pub fn parse_batch_sizes(text: &str) -> Result<Vec<u64>, String> {
    text.split(',')
        .map(|s| {
            s.trim().parse::<u64>().map_err(|_| {
                format!("batch sizes `{text}`: `{s}` is not a whole number; give a list like 1,2,4")
            })
        })
        .collect()
}

/// The dtype as the front ends spell it (`bf16`, `fp16`, `fp8_w8a8`).
pub fn parse_dtype(text: &str) -> Result<MoeDtype, FlowError> {
    Ok(text.parse::<MoeDtype>()?)
}

/// What `write_files` writes for each GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoeFileFormat {
    /// vLLM's config file, under vLLM's name (`fused_moe/configs/` or `VLLM_TUNED_CONFIG_FOLDER`).
    Vllm,
    /// The same content under SGLang's name (`configs/triton_<version>/`).
    Sglang,
    /// carver's ranking document, `<vLLM name without .json>.carver.json`.
    Json,
}

/// The file text of one GPU's document in `format` (what `write_files` writes, and what a front
/// end prints without an output directory).
pub fn file_text(doc: &MoeOutput, format: MoeFileFormat) -> String {
    let text = match format {
        MoeFileFormat::Vllm | MoeFileFormat::Sglang => {
            serde_json::to_string_pretty(&doc.config_file())
        }
        MoeFileFormat::Json => serde_json::to_string_pretty(doc),
    };
    // Serializing plain numbers and strings cannot fail.
    text.unwrap_or_default() + "\n"
}

/// The file name of one GPU's document in `format`.
pub fn file_name(doc: &MoeOutput, format: MoeFileFormat) -> String {
    match format {
        MoeFileFormat::Vllm => doc.file_name.clone(),
        MoeFileFormat::Sglang => doc.sglang_file_name.clone(),
        MoeFileFormat::Json => {
            let stem = doc
                .file_name
                .strip_suffix(".json")
                .unwrap_or(&doc.file_name);
            format!("{stem}.carver.json")
        }
    }
}

/// Writes one file per GPU into `dir` (created when missing), replacing files of the same name;
/// returns the paths written.
pub fn write_files(
    docs: &[MoeOutput],
    format: MoeFileFormat,
    dir: &Path,
) -> Result<Vec<std::path::PathBuf>, FlowError> {
    std::fs::create_dir_all(dir).map_err(|source| FlowError::Io {
        action: "create",
        path: dir.to_path_buf(),
        source,
    })?;
    docs.iter()
        .map(|doc| {
            let path = dir.join(file_name(doc, format));
            crate::files::write_file(&path, false, |w| {
                w.write_all(file_text(doc, format).as_bytes())
                    .map_err(|source| FlowError::Io {
                        action: "write",
                        path: path.clone(),
                        source,
                    })
            })?;
            Ok(path)
        })
        .collect()
}
