//! Sanity rules every hardware description must pass, whether read from a file or assembled from
//! a live device: every number finite and within what a GPU can have, and derived figures that
//! agree with the stated ones (a typo in a clock or a bus width shows up here, not in a ranking).
//!
//! The bounds are wide on purpose: each admits every shipped description and any GPU NVIDIA is
//! likely to build, and refuses only values no GPU can have (a zero, a negative, a NaN, a unit
//! slip of a thousand). The comment on each says where its ends come from.

use crate::check::Check;
use crate::error::ArchError;
use crate::model::{Arch, ComputeClass, DeviceMemory, Extent, InstructionFamily};

/// Largest extent of a tensor-core instruction in any dimension: no generation exceeds 256
/// (wgmma n, tcgen05 m and n), and larger values would blow up the tile enumeration.
pub const MAX_INSTRUCTION_EXTENT: u32 = 256;

/// Checks one description; `path` names it in errors and `stem` (file name without `.toml`)
/// must equal its key when given.
pub fn validate(arch: &Arch, path: &str, stem: Option<&str>) -> Result<(), ArchError> {
    let c = Check::new(path);
    identity(&c, arch, stem)?;
    multiprocessor(&c, arch)?;
    registers_and_shared_memory(&c, arch)?;
    memory(&c, arch)?;
    instructions(&c, arch)?;
    peaks(&c, arch)?;
    Ok(())
}

fn identity(c: &Check, arch: &Arch, stem: Option<&str>) -> Result<(), ArchError> {
    let g = &arch.gpu;
    if g.key.is_empty()
        || !g
            .key
            .chars()
            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-')
    {
        return Err(c.invalid(
            "gpu.key",
            "must be non-empty lower-case letters, digits and dashes",
        ));
    }
    if let Some(stem) = stem
        && stem != g.key
    {
        return Err(c.invalid(
            "gpu.key",
            format!(
                "is `{}` but the file is named `{stem}.toml`; they must match",
                g.key
            ),
        ));
    }
    if g.name.trim().is_empty() {
        return Err(c.invalid("gpu.name", "must not be empty"));
    }
    if g.sources.iter().all(|s| s.trim().is_empty()) {
        return Err(c.invalid(
            "gpu.sources",
            "must cite at least one source for the figures",
        ));
    }
    // CUDA 12 supports 5.0 and later, older toolkits 3.0; 15 leaves room above Blackwell (10.x,
    // 12.x). Minors are one digit in every capability shipped (sm_XY).
    c.whole(
        "gpu.compute_capability",
        g.compute_capability.major,
        3..=15,
        "(major)",
    )?;
    c.whole(
        "gpu.compute_capability",
        g.compute_capability.minor,
        0..=9,
        "(minor)",
    )?;
    Ok(())
}

fn multiprocessor(c: &Check, arch: &Arch) -> Result<(), ArchError> {
    let sm = &arch.sm;
    // B200 has 148 SMs; 1024 leaves room for several more generations.
    c.whole("sm.count", sm.count, 1..=1024, "")?;
    c.fixed("sm.warp_size", sm.warp_size, &[32], "every NVIDIA GPU")?;
    // Shipped SM clocks lie between about 700 MHz (base clocks) and 2.6 GHz; 100 and 5000 MHz
    // admit locked or embedded boards and refuse kHz or GHz typed as MHz.
    c.real(
        "sm.boost_clock_mhz",
        sm.boost_clock_mhz,
        100.0..=5000.0,
        "MHz",
    )?;
    // A sustained clock above the boost clock cannot be sustained.
    c.real(
        "sm.sustained_clock_mhz",
        sm.sustained_clock_mhz,
        100.0..=sm.boost_clock_mhz,
        "MHz",
    )?;
    // 2048 threads per SM since Kepler (1536 on some consumer parts); a block holds 1024.
    c.whole("sm.max_threads", sm.max_threads, 256..=4096, "")?;
    c.whole(
        "sm.max_threads_per_block",
        sm.max_threads_per_block,
        32..=sm.max_threads,
        "",
    )?;
    // 16 to 32 resident blocks per SM in every generation so far.
    c.whole("sm.max_blocks", sm.max_blocks, 1..=64, "")?;
    // 0 (Pascal and older) to 8 (Volta); 4 since Ampere.
    c.whole("sm.tensor_cores", sm.tensor_cores, 0..=16, "")?;
    Ok(())
}

fn registers_and_shared_memory(c: &Check, arch: &Arch) -> Result<(), ArchError> {
    let r = &arch.registers;
    // 64K 32-bit registers per SM since Kepler; a block may use all of them, a thread 255.
    c.whole("registers.per_sm", r.per_sm, 8192..=1 << 20, "")?;
    c.whole("registers.per_block", r.per_block, 1024..=r.per_sm, "")?;
    c.whole("registers.per_thread_max", r.per_thread_max, 63..=256, "")?;
    c.whole("registers.allocation_unit", r.allocation_unit, 1..=1024, "")?;

    let s = &arch.shared_memory;
    // 64 KiB (Turing) to 228 KiB (Hopper) per SM; 1 MiB leaves room for growth.
    c.whole(
        "shared_memory.per_sm_bytes",
        s.per_sm_bytes,
        16 * 1024..=1 << 20,
        "B",
    )?;
    // 1 KiB on every GPU since Ampere, 0 before.
    c.whole(
        "shared_memory.reserved_per_block_bytes",
        s.reserved_per_block_bytes,
        0..=4096,
        "B",
    )?;
    // What a block opts into plus what the system reserves for it fits in one SM.
    c.whole(
        "shared_memory.per_block_optin_bytes",
        s.per_block_optin_bytes,
        16 * 1024..=s.per_sm_bytes - s.reserved_per_block_bytes.min(s.per_sm_bytes),
        "B",
    )?;
    // 48 KiB on every GPU so far; never above the opt-in limit.
    c.whole(
        "shared_memory.per_block_default_bytes",
        s.per_block_default_bytes,
        16 * 1024..=s.per_block_optin_bytes,
        "B",
    )?;
    c.fixed("shared_memory.banks", s.banks, &[32], "every NVIDIA GPU")?;
    c.fixed(
        "shared_memory.bank_width_bytes",
        s.bank_width_bytes,
        &[4, 8],
        "4, or 8 on Kepler",
    )?;
    // 128 B per clock per SM (32 banks x 4 B) on every GPU since Maxwell.
    c.whole(
        "shared_memory.bytes_per_clock_per_sm",
        s.bytes_per_clock_per_sm,
        32..=512,
        "B/clk",
    )?;
    Ok(())
}

fn memory(c: &Check, arch: &Arch) -> Result<(), ArchError> {
    let m = &arch.memory;
    if m.kind.trim().is_empty() {
        return Err(c.invalid("memory.kind", "must name the memory (HBM3, GDDR6X, ...)"));
    }
    // 64-bit buses on the smallest boards, 8192 bits on B200; 16384 leaves room.
    c.whole("memory.bus_width_bits", m.bus_width_bits, 32..=16384, "bit")?;
    // NVML reports 877 MHz (V100 HBM2) to 10501 MHz (GDDR6X); GDDR7 stays under 40000.
    c.real(
        "memory.memory_clock_mhz",
        m.memory_clock_mhz,
        100.0..=40000.0,
        "MHz",
    )?;
    // 25 GB/s on embedded boards to 8 TB/s on B200: 1 GB/s and 100 TB/s refuse only unit slips.
    c.real(
        "memory.bandwidth_bytes_per_s",
        m.bandwidth_bytes_per_s,
        1e9..=1e14,
        "B/s",
    )?;
    // 1 GiB to 4 TiB: from the smallest CUDA board to far beyond B200's 192 GB.
    c.whole(
        "memory.capacity_bytes",
        m.capacity_bytes,
        1 << 30..=1 << 42,
        "B",
    )?;
    c.agrees(
        "memory.bandwidth_bytes_per_s",
        m.bandwidth_bytes_per_s,
        arch.derived_dram_bandwidth(),
        "2 x memory_clock_mhz x bus_width_bits / 8",
    )?;
    c.fixed("memory.sector_bytes", m.sector_bytes, &[32], "NVIDIA GPUs")?;
    c.fixed("memory.line_bytes", m.line_bytes, &[128], "NVIDIA GPUs")?;
    segment_efficiency(c, m)?;

    let l2 = &arch.l2;
    // 256 KiB (Jetson Nano) to 126 MiB (B200); 1 GiB leaves room.
    c.whole("l2.size_bytes", l2.size_bytes, 256 * 1024..=1 << 30, "B")?;
    // L2 is never slower than the DRAM behind it.
    c.real(
        "l2.bandwidth_bytes_per_s",
        l2.bandwidth_bytes_per_s,
        m.bandwidth_bytes_per_s..=1e14,
        "B/s",
    )?;
    if let Some(requests) = l2.request_coalescing {
        // 1 is none; a handful of SMs reading in step is what has been measured.
        c.real("l2.request_coalescing", requests, 1.0..=8.0, "")?;
    }
    Ok(())
}

/// `memory.segment_efficiency`: ascending widths from a sector to 4 KiB, rates from 0.05 to 1
/// that never fall as segments widen, the widest at the full rate.
fn segment_efficiency(c: &Check, m: &DeviceMemory) -> Result<(), ArchError> {
    let entries = &m.segment_efficiency;
    for (i, e) in entries.iter().enumerate() {
        let field = format!("memory.segment_efficiency[{i}]");
        c.whole(
            &format!("{field}.bytes"),
            e.bytes,
            m.sector_bytes..=4096,
            "B",
        )?;
        c.real(&format!("{field}.efficiency"), e.efficiency, 0.05..=1.0, "")?;
        if let Some(prev) = i.checked_sub(1).map(|j| entries[j]) {
            if e.bytes <= prev.bytes {
                return Err(c.invalid(
                    &format!("{field}.bytes"),
                    format!("{} B after {} B: widths must ascend", e.bytes, prev.bytes),
                ));
            }
            if e.efficiency < prev.efficiency {
                return Err(c.invalid(
                    &format!("{field}.efficiency"),
                    format!(
                        "{} after {} for narrower segments: a wider segment never streams slower",
                        e.efficiency, prev.efficiency
                    ),
                ));
            }
        }
    }
    if let Some(widest) = entries.last()
        && widest.efficiency != 1.0
    {
        return Err(c.invalid(
            &format!("memory.segment_efficiency[{}].efficiency", entries.len() - 1),
            format!(
                "{}: the widest listed segment is the full rate (1), the others are fractions of it",
                widest.efficiency
            ),
        ));
    }
    Ok(())
}

fn instructions(c: &Check, arch: &Arch) -> Result<(), ArchError> {
    for (i, ins) in arch.tensor_instructions.iter().enumerate() {
        let field = format!("tensor_instructions[{i}]");
        if ins.dtypes.is_empty() {
            return Err(c.invalid(&field, "lists no dtypes"));
        }
        if let Some(d) = ins.dtypes.iter().find(|d| !d.is_tensor()) {
            return Err(c.invalid(
                &field,
                format!("lists `{d}`, which does not run on tensor cores"),
            ));
        }
        for (dim, e) in [("m", ins.m), ("n", ins.n)] {
            let at = format!("{field}.{dim}");
            match e {
                Extent::Fixed(v) => {
                    c.whole(&at, v, 1..=MAX_INSTRUCTION_EXTENT, "")?;
                }
                Extent::Range(r) => {
                    c.whole(&format!("{at}.min"), r.min, 1..=MAX_INSTRUCTION_EXTENT, "")?;
                    c.whole(
                        &format!("{at}.max"),
                        r.max,
                        r.min..=MAX_INSTRUCTION_EXTENT,
                        "",
                    )?;
                    c.whole(&format!("{at}.step"), r.step, 1..=r.max, "")?;
                }
            }
        }
        c.whole(&format!("{field}.k"), ins.k, 1..=MAX_INSTRUCTION_EXTENT, "")?;
        if let Some(step) = ins.step_cycles {
            let at = format!("{field}.step_cycles");
            if ins.family != InstructionFamily::MmaSync {
                return Err(c.invalid(
                    &at,
                    format!(
                        "is given for a `{}` instruction; only `mma-sync` loops wait step by step",
                        ins.family
                    ),
                ));
            }
            // An instruction's latency plus its operands' shared-memory loads: tens of cycles.
            c.real(&at, step, 1.0..=1000.0, "cycles")?;
        }
        for d in &ins.dtypes {
            if !arch.peak.contains_key(d) {
                return Err(c.invalid(&field, format!("lists `{d}` but [peak.{d}] is missing")));
            }
        }
    }
    Ok(())
}

fn peaks(c: &Check, arch: &Arch) -> Result<(), ArchError> {
    let sm = &arch.sm;
    for (class, p) in &arch.peak {
        let field = format!("peak.{class}");
        // 0.1 TFLOP/s (fp64 on consumer boards) to 4.5 PFLOP/s (B200 fp8); the agreement with
        // the per-clock rate below holds each peak far tighter.
        c.real(
            &format!("{field}.tflops"),
            p.tflops,
            0.01..=100_000.0,
            "TFLOP/s",
        )?;
        if let Some(clock) = p.clock_mhz {
            // A peak quoted above the boost clock is never reached.
            c.real(
                &format!("{field}.clock_mhz"),
                clock,
                100.0..=sm.boost_clock_mhz,
                "MHz",
            )?;
        }
        if class.is_tensor() {
            if arch.instructions_for(*class).next().is_none() {
                return Err(c.invalid(
                    &field,
                    "has a tensor-core peak but no tensor_instructions entry lists it",
                ));
            }
            let Some(rate) = p.flops_per_clock_per_tensor_core else {
                return Err(c.invalid(
                    &field,
                    "needs flops_per_clock_per_tensor_core (a tensor-core class)",
                ));
            };
            // 64 (Turing int8 per core) to 4096 (B200 fp8); 65536 leaves room for fp4 and
            // beyond.
            c.real(
                &format!("{field}.flops_per_clock_per_tensor_core"),
                rate,
                1.0..=65536.0,
                "",
            )?;
            if sm.tensor_cores == 0 {
                return Err(c.invalid(
                    "sm.tensor_cores",
                    format!(
                        "is 0, but [{field}] is a tensor-core peak; a GPU without tensor cores \
                         lists SIMT peaks (fp32, fp64) only"
                    ),
                ));
            }
        } else {
            let Some(rate) = p.flops_per_clock_per_sm else {
                return Err(c.invalid(&field, "needs flops_per_clock_per_sm (a SIMT class)"));
            };
            // 2 (fp64 on consumer boards) to 256 (fp32 since Ampere); 4096 leaves room.
            c.real(
                &format!("{field}.flops_per_clock_per_sm"),
                rate,
                1.0..=4096.0,
                "",
            )?;
        }
        let how = if class.is_tensor() {
            "sm.count x sm.tensor_cores x flops_per_clock_per_tensor_core x clock"
        } else {
            "sm.count x flops_per_clock_per_sm x clock"
        };
        let derived = p.derived_tflops(*class, sm).unwrap_or(f64::NAN);
        c.agrees(&format!("{field}.tflops"), p.tflops, derived, how)?;
    }
    if !arch.peak.contains_key(&ComputeClass::Fp32) {
        return Err(c.invalid("peak.fp32", "is required (every GPU has SIMT fp32)"));
    }

    // A peak field must name a class this description has a peak for.
    for field in &arch.estimated {
        if let Some(class) = field.peak_class()
            && !arch.peak.contains_key(&class)
        {
            return Err(c.invalid(
                "estimated",
                format!("names `{field}`, but [peak.{class}] is not a field of this description"),
            ));
        }
    }
    Ok(())
}
