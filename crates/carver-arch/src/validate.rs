//! Sanity rules every hardware description must pass: plausible units, and derived figures that
//! agree with the stated ones (a typo in a clock or a bus width shows up here, not in a ranking).

use crate::error::ArchError;
use crate::model::{Arch, ComputeClass, Extent};

/// Relative tolerance for derived-vs-stated figures (vendor figures are rounded).
pub const DERIVED_TOLERANCE: f64 = 0.05;

struct Checker<'a> {
    path: &'a str,
}

impl Checker<'_> {
    fn fail(&self, field: &str, reason: impl Into<String>) -> ArchError {
        ArchError::Invalid {
            path: self.path.to_string(),
            field: field.to_string(),
            reason: reason.into(),
        }
    }

    fn range<T: PartialOrd + std::fmt::Display + Copy>(
        &self,
        field: &str,
        v: T,
        lo: T,
        hi: T,
        unit: &str,
    ) -> Result<(), ArchError> {
        if v < lo || v > hi {
            return Err(self.fail(
                field,
                format!("is {v}{unit}; a GPU's value lies between {lo}{unit} and {hi}{unit}"),
            ));
        }
        Ok(())
    }

    fn agrees(&self, field: &str, stated: f64, derived: f64, how: &str) -> Result<(), ArchError> {
        let rel = (stated - derived).abs() / derived.abs().max(f64::MIN_POSITIVE);
        if rel > DERIVED_TOLERANCE {
            return Err(self.fail(
                field,
                format!(
                    "is {stated:.4e} but {how} gives {derived:.4e} ({:.1}% apart; at most {:.0}% allowed)",
                    rel * 100.0,
                    DERIVED_TOLERANCE * 100.0
                ),
            ));
        }
        Ok(())
    }
}

/// Checks one description; `path` names it in errors and `stem` (file name without `.toml`)
/// must equal its key when given.
pub fn validate(arch: &Arch, path: &str, stem: Option<&str>) -> Result<(), ArchError> {
    let c = Checker { path };
    let g = &arch.gpu;
    if g.key.is_empty()
        || !g
            .key
            .chars()
            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-')
    {
        return Err(c.fail(
            "gpu.key",
            "must be non-empty lower-case letters, digits and dashes",
        ));
    }
    if let Some(stem) = stem {
        if stem != g.key {
            return Err(c.fail(
                "gpu.key",
                format!(
                    "is `{}` but the file is named `{stem}.toml`; they must match",
                    g.key
                ),
            ));
        }
    }
    if g.name.trim().is_empty() {
        return Err(c.fail("gpu.name", "must not be empty"));
    }
    if g.sources.iter().all(|s| s.trim().is_empty()) {
        return Err(c.fail(
            "gpu.sources",
            "must cite at least one source for the figures",
        ));
    }
    c.range(
        "gpu.compute_capability",
        g.compute_capability.major,
        3,
        15,
        "",
    )?;

    let sm = &arch.sm;
    c.range("sm.count", sm.count, 1, 1024, "")?;
    if sm.warp_size != 32 {
        return Err(c.fail(
            "sm.warp_size",
            format!("is {}; NVIDIA GPUs have 32", sm.warp_size),
        ));
    }
    c.range(
        "sm.boost_clock_mhz",
        sm.boost_clock_mhz,
        300.0,
        4000.0,
        " MHz",
    )?;
    c.range(
        "sm.sustained_clock_mhz",
        sm.sustained_clock_mhz,
        300.0,
        sm.boost_clock_mhz,
        " MHz",
    )?;
    c.range("sm.max_threads", sm.max_threads, 256, 4096, "")?;
    c.range(
        "sm.max_threads_per_block",
        sm.max_threads_per_block,
        32,
        sm.max_threads,
        "",
    )?;
    c.range("sm.max_blocks", sm.max_blocks, 1, 64, "")?;
    c.range("sm.tensor_cores", sm.tensor_cores, 0, 16, "")?;

    let r = &arch.registers;
    c.range("registers.per_sm", r.per_sm, 8192, 1 << 20, "")?;
    c.range("registers.per_block", r.per_block, 1024, r.per_sm, "")?;
    c.range("registers.per_thread_max", r.per_thread_max, 63, 256, "")?;
    c.range("registers.allocation_unit", r.allocation_unit, 1, 1024, "")?;

    let s = &arch.shared_memory;
    c.range(
        "shared_memory.per_sm_bytes",
        s.per_sm_bytes,
        16 * 1024,
        1 << 20,
        " B",
    )?;
    c.range(
        "shared_memory.per_block_default_bytes",
        s.per_block_default_bytes,
        16 * 1024,
        s.per_block_optin_bytes,
        " B",
    )?;
    c.range(
        "shared_memory.per_block_optin_bytes",
        s.per_block_optin_bytes + s.reserved_per_block_bytes,
        16 * 1024,
        s.per_sm_bytes,
        " B (with the reserved bytes)",
    )?;
    c.range(
        "shared_memory.reserved_per_block_bytes",
        s.reserved_per_block_bytes,
        0,
        4096,
        " B",
    )?;
    if s.banks != 32 {
        return Err(c.fail(
            "shared_memory.banks",
            format!("is {}; NVIDIA GPUs have 32", s.banks),
        ));
    }
    if !matches!(s.bank_width_bytes, 4 | 8) {
        return Err(c.fail("shared_memory.bank_width_bytes", "must be 4 or 8"));
    }
    c.range(
        "shared_memory.bytes_per_clock_per_sm",
        s.bytes_per_clock_per_sm,
        32,
        512,
        " B/clk",
    )?;

    let m = &arch.memory;
    c.range("memory.bus_width_bits", m.bus_width_bits, 32, 16384, " bit")?;
    c.range(
        "memory.memory_clock_mhz",
        m.memory_clock_mhz,
        100.0,
        40000.0,
        " MHz",
    )?;
    c.range(
        "memory.bandwidth_bytes_per_s",
        m.bandwidth_bytes_per_s,
        1e10,
        1e14,
        " B/s",
    )?;
    c.range(
        "memory.capacity_bytes",
        m.capacity_bytes,
        1 << 30,
        1 << 42,
        " B",
    )?;
    c.agrees(
        "memory.bandwidth_bytes_per_s",
        m.bandwidth_bytes_per_s,
        arch.derived_dram_bandwidth(),
        "2 x memory_clock_mhz x bus_width_bits / 8",
    )?;
    if m.sector_bytes != 32 {
        return Err(c.fail("memory.sector_bytes", "must be 32 on NVIDIA GPUs"));
    }
    if m.line_bytes != 128 {
        return Err(c.fail("memory.line_bytes", "must be 128 on NVIDIA GPUs"));
    }

    let l2 = &arch.l2;
    c.range("l2.size_bytes", l2.size_bytes, 256 * 1024, 1 << 30, " B")?;
    if l2.bandwidth_bytes_per_s < m.bandwidth_bytes_per_s || l2.bandwidth_bytes_per_s > 1e14 {
        return Err(c.fail(
            "l2.bandwidth_bytes_per_s",
            format!(
                "is {:.3e} B/s; L2 bandwidth lies between the DRAM bandwidth ({:.3e}) and 1e14 B/s",
                l2.bandwidth_bytes_per_s, m.bandwidth_bytes_per_s
            ),
        ));
    }

    for (i, ins) in arch.tensor_instructions.iter().enumerate() {
        let field = format!("tensor_instructions[{i}]");
        if ins.dtypes.is_empty() {
            return Err(c.fail(&field, "lists no dtypes"));
        }
        if let Some(d) = ins.dtypes.iter().find(|d| !d.is_tensor()) {
            return Err(c.fail(
                &field,
                format!("lists `{d}`, which does not run on tensor cores"),
            ));
        }
        for (dim, e) in [("m", ins.m), ("n", ins.n)] {
            if let Extent::Range(r) = e {
                if r.step == 0 || r.min == 0 || r.min > r.max {
                    return Err(c.fail(
                        &format!("{field}.{dim}"),
                        "needs 0 < min <= max and step > 0",
                    ));
                }
            } else if e.min() == 0 {
                return Err(c.fail(&format!("{field}.{dim}"), "must be positive"));
            }
        }
        if ins.k == 0 {
            return Err(c.fail(&format!("{field}.k"), "must be positive"));
        }
        for d in &ins.dtypes {
            if !arch.peak.contains_key(d) {
                return Err(c.fail(&field, format!("lists `{d}` but [peak.{d}] is missing")));
            }
        }
    }

    for (class, p) in &arch.peak {
        let field = format!("peak.{class}");
        c.range(
            &format!("{field}.tflops"),
            p.tflops,
            0.01,
            100_000.0,
            " TFLOP/s",
        )?;
        if class.is_tensor() {
            if arch.instructions_for(*class).next().is_none() {
                return Err(c.fail(
                    &field,
                    "has a tensor-core peak but no tensor_instructions entry lists it",
                ));
            }
            let Some(derived) = p.derived_tflops(*class, sm) else {
                return Err(c.fail(
                    &field,
                    "needs flops_per_clock_per_tensor_core (a tensor-core class)",
                ));
            };
            c.agrees(
                &format!("{field}.tflops"),
                p.tflops,
                derived,
                "sm.count x sm.tensor_cores x flops_per_clock_per_tensor_core x clock",
            )?;
        } else {
            let Some(derived) = p.derived_tflops(*class, sm) else {
                return Err(c.fail(&field, "needs flops_per_clock_per_sm (a SIMT class)"));
            };
            c.agrees(
                &format!("{field}.tflops"),
                p.tflops,
                derived,
                "sm.count x flops_per_clock_per_sm x clock",
            )?;
        }
    }
    if !arch.peak.contains_key(&ComputeClass::Fp32) {
        return Err(c.fail("peak.fp32", "is required (every GPU has SIMT fp32)"));
    }

    // A peak field must name a class this description has a peak for.
    for field in &arch.estimated {
        if let Some(class) = field.peak_class()
            && !arch.peak.contains_key(&class)
        {
            return Err(c.fail(
                "estimated",
                format!("names `{field}`, but [peak.{class}] is not a field of this description"),
            ));
        }
    }
    Ok(())
}
