//! Per-shape recommendation latency: for every shape of a set, the median time of `reps` calls
//! of `recommend_hints` (top-8, H100); then the median, 90th percentile and maximum of those
//! per-shape medians, per target. The divan benchmark (`benches/recommend.rs`) times a fixed
//! rotation of six shapes; this shows the whole distribution over a shape set. With the system
//! allocator, as a Rust caller of the library links it; `latency_mimalloc` times what the CLI
//! and the Python module run.
use std::process::ExitCode;

#[path = "common/mod.rs"]
mod common;
#[path = "common/latency.rs"]
mod latency;

fn main() -> ExitCode {
    common::main(latency::USAGE, latency::run)
}
