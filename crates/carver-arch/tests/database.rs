//! The shipped hardware database: every file loads, the figures agree with each other and with the
//! CUDA programming guide, names resolve unambiguously, and bad user files are rejected with an
//! error that says where and why.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use carver_arch::{
    Arch, ArchError, ArchField, ComputeCapability, ComputeClass, DERIVED_TOLERANCE, Extent,
    HardwareDb, InstructionFamily, Origin, normalize_name, parse_arch, validate,
};
use proptest::prelude::*;

fn shipped() -> HardwareDb {
    HardwareDb::embedded().expect("the shipped hardware database loads")
}

fn shipped_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hardware-db")
}

fn h100_text() -> String {
    fs::read_to_string(shipped_dir().join("h100-sxm.toml")).expect("hardware-db/h100-sxm.toml")
}

fn relative_gap(stated: f64, derived: f64) -> f64 {
    (stated - derived).abs() / derived
}

/// Dense peak in TFLOP/s from the per-clock rate, the unit count and the clock the figure
/// assumes, as the validation derives it.
fn derived_peak_tflops(arch: &Arch, class: ComputeClass) -> f64 {
    arch.peak[&class].derived_tflops(class, &arch.sm).unwrap()
}

#[test]
fn every_shipped_file_parses_validates_and_is_embedded() {
    let mut stems = Vec::new();
    for entry in fs::read_dir(shipped_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        let text = fs::read_to_string(&path).unwrap();
        let label = path.display().to_string();
        if let Err(e) = parse_arch(&label, Some(&stem), &text) {
            panic!("{e}");
        }
        stems.push(stem);
    }
    stems.sort();
    assert_eq!(
        shipped().keys(),
        stems,
        "the binary embeds exactly the files in hardware-db/"
    );
}

#[test]
fn at_least_twelve_gpus_including_every_required_one() {
    let db = shipped();
    assert!(db.len() >= 12, "only {} GPUs shipped", db.len());
    for key in [
        "v100-sxm2",
        "a100-sxm4-80gb",
        "a100-pcie-80gb",
        "a10",
        "l4",
        "l40s",
        "rtx-3090",
        "rtx-4090",
        "h100-sxm",
        "h100-pcie",
        "h200",
        "b200",
    ] {
        assert!(db.keys().iter().any(|k| k == key), "`{key}` is missing");
    }
}

#[test]
fn keys_equal_file_stems() {
    for arch in shipped().iter() {
        match &arch.origin {
            Origin::Embedded { file } => assert_eq!(file, &format!("{}.toml", arch.key())),
            other => panic!("{} has origin {other:?}", arch.key()),
        }
    }
}

#[test]
fn no_name_or_alias_is_shared_between_files() {
    let db = shipped();
    let mut owner: BTreeMap<String, &str> = BTreeMap::new();
    let mut collisions = Vec::new();
    for arch in db.iter() {
        let names = std::iter::once(&arch.gpu.key)
            .chain(std::iter::once(&arch.gpu.name))
            .chain(&arch.gpu.aliases);
        for name in names {
            let normalized = normalize_name(name);
            match owner.get(&normalized) {
                Some(&other) if other != arch.key() => {
                    collisions.push(format!("`{name}` names both {other} and {}", arch.key()));
                }
                _ => {
                    owner.insert(normalized, arch.key());
                }
            }
        }
    }
    assert!(collisions.is_empty(), "{collisions:#?}");
}

#[test]
fn every_alias_resolves_to_its_own_entry_and_adds_a_new_name() {
    let db = shipped();
    for arch in db.iter() {
        let mut seen = vec![
            normalize_name(&arch.gpu.key),
            normalize_name(&arch.gpu.name),
        ];
        for alias in &arch.gpu.aliases {
            assert_eq!(db.get(alias).unwrap().key(), arch.key(), "alias `{alias}`");
            let normalized = normalize_name(alias);
            assert!(
                !seen.contains(&normalized),
                "{}: alias `{alias}` repeats its key, name or another alias",
                arch.key()
            );
            seen.push(normalized);
        }
    }
}

#[test]
fn bare_short_names_pick_the_most_common_variant() {
    let db = shipped();
    for (typed, key) in [
        ("v100", "v100-sxm2"),
        ("a100", "a100-sxm4-80gb"),
        ("a100-40gb", "a100-sxm4-40gb"),
        ("a100-pcie", "a100-pcie-80gb"),
        ("a10", "a10"),
        ("a6000", "rtx-a6000"),
        ("3090", "rtx-3090"),
        ("4090", "rtx-4090"),
        ("RTX 4090", "rtx-4090"),
        ("l4", "l4"),
        ("L40S", "l40s"),
        ("h100", "h100-sxm"),
        ("h100-pcie", "h100-pcie"),
        ("h200", "h200"),
        ("b200", "b200"),
    ] {
        assert_eq!(db.get(typed).unwrap().key(), key, "`{typed}`");
    }
}

#[test]
fn names_the_driver_reports_match_with_their_compute_capability() {
    let db = shipped();
    for (device_name, cc, key) in [
        ("Tesla V100-SXM2-32GB", "7.0", "v100-sxm2"),
        ("NVIDIA A100-SXM4-80GB", "8.0", "a100-sxm4-80gb"),
        ("NVIDIA A100-SXM4-40GB", "8.0", "a100-sxm4-40gb"),
        ("NVIDIA A100 80GB PCIe", "8.0", "a100-pcie-80gb"),
        ("NVIDIA A10", "8.6", "a10"),
        ("NVIDIA RTX A6000", "8.6", "rtx-a6000"),
        ("NVIDIA GeForce RTX 3090", "8.6", "rtx-3090"),
        ("NVIDIA L4", "8.9", "l4"),
        ("NVIDIA L40S", "8.9", "l40s"),
        ("NVIDIA GeForce RTX 4090", "8.9", "rtx-4090"),
        ("NVIDIA H100 80GB HBM3", "9.0", "h100-sxm"),
        ("NVIDIA H100 PCIe", "9.0", "h100-pcie"),
        ("NVIDIA H200", "9.0", "h200"),
        ("NVIDIA B200", "10.0", "b200"),
    ] {
        let cc: ComputeCapability = cc.parse().unwrap();
        let found = db.match_device(device_name, cc).map(Arch::key);
        assert_eq!(found, Some(key), "{device_name}");
    }
    // The same name with another compute capability is a different part, not this entry.
    let wrong = ComputeCapability::new(8, 0);
    assert!(db.match_device("NVIDIA H100 80GB HBM3", wrong).is_none());
}

#[test]
fn peaks_agree_with_units_rate_and_clock_within_three_percent() {
    // The loader allows DERIVED_TOLERANCE; the shipped files are held to a tighter bar.
    let mut worst = (0.0, String::new());
    for arch in shipped().iter() {
        for class in arch.peak.keys() {
            let derived = derived_peak_tflops(arch, *class);
            let gap = relative_gap(arch.peak[class].tflops, derived);
            if gap > worst.0 {
                worst = (gap, format!("{} {class}", arch.key()));
            }
            assert!(
                gap <= 0.03,
                "{} {class}: stated {} TFLOP/s, derived {derived:.1}",
                arch.key(),
                arch.peak[class].tflops
            );
        }
    }
    assert!(worst.0 < DERIVED_TOLERANCE, "worst: {worst:?}");
}

#[test]
fn dram_bandwidth_agrees_with_memory_clock_and_bus_width_within_three_percent() {
    for arch in shipped().iter() {
        let m = &arch.memory;
        let derived = 2.0 * m.memory_clock_mhz * 1e6 * f64::from(m.bus_width_bits) / 8.0;
        assert!(
            relative_gap(m.bandwidth_bytes_per_s, derived) <= 0.03,
            "{}: stated {:.4e} B/s, 2 x {} MHz x {} bit / 8 = {derived:.4e}",
            arch.key(),
            m.bandwidth_bytes_per_s,
            m.memory_clock_mhz,
            m.bus_width_bits
        );
    }
}

#[test]
fn memory_hierarchy_is_ordered() {
    for arch in shipped().iter() {
        let key = arch.key();
        assert!(arch.l2.size_bytes < arch.memory.capacity_bytes, "{key}");
        assert!(
            arch.l2.bandwidth_bytes_per_s > arch.memory.bandwidth_bytes_per_s,
            "{key}"
        );
        assert!(
            arch.smem_bandwidth() > arch.l2.bandwidth_bytes_per_s,
            "{key}"
        );
        assert!(
            arch.sm.sustained_clock_mhz <= arch.sm.boost_clock_mhz,
            "{key}"
        );
    }
}

#[test]
fn h100_sxm_spot_checks() {
    let db = shipped();
    let h100 = db.get("h100").unwrap();
    assert_eq!(h100.key(), "h100-sxm");
    assert_eq!(h100.gpu.name, "NVIDIA H100 80GB HBM3");
    assert_eq!(h100.sm.count, 132);
    assert_eq!(h100.shared_memory.per_block_optin_bytes, 232448);
    assert_eq!(h100.l2.size_bytes, 50 * 1024 * 1024);
    assert_eq!(h100.memory.bandwidth_bytes_per_s, 3.35e12);
    assert_eq!(h100.peak_flops(ComputeClass::Bf16), Some(989.4e12));
    let wgmma = h100
        .instructions_for(ComputeClass::Bf16)
        .find(|i| i.family == InstructionFamily::Wgmma)
        .expect("H100 has wgmma");
    assert_eq!((wgmma.m, wgmma.k), (Extent::Fixed(64), 16));
    assert!(wgmma.n.contains(8) && wgmma.n.contains(256) && !wgmma.n.contains(260));
}

#[test]
fn v100_computes_fp16_only_on_its_tensor_cores() {
    let db = shipped();
    let v100 = db.get("v100").unwrap();
    assert!(v100.supports(ComputeClass::F16));
    for class in [
        ComputeClass::Bf16,
        ComputeClass::Tf32,
        ComputeClass::Fp8,
        ComputeClass::Int8,
    ] {
        assert!(!v100.supports(class), "V100 has no {class} tensor math");
        assert!(!v100.peak.contains_key(&class));
    }
    let mma: Vec<_> = v100.instructions_for(ComputeClass::F16).collect();
    assert_eq!(mma.len(), 1);
    assert_eq!(
        (mma[0].m, mma[0].n, mma[0].k),
        (Extent::Fixed(8), Extent::Fixed(8), 4)
    );
}

#[test]
fn fp8_exists_exactly_on_sm89_and_later() {
    for arch in shipped().iter() {
        let sm = arch.gpu.compute_capability.sm();
        let has_fp8 = arch.peak.contains_key(&ComputeClass::Fp8);
        assert_eq!(has_fp8, sm >= 89, "{} (sm_{sm})", arch.key());
        assert_eq!(arch.supports(ComputeClass::Fp8), sm >= 89, "{}", arch.key());
    }
}

#[test]
fn instruction_families_match_the_architecture() {
    for arch in shipped().iter() {
        let sm = arch.gpu.compute_capability.sm();
        let has = |f: InstructionFamily| arch.tensor_instructions.iter().any(|i| i.family == f);
        assert!(has(InstructionFamily::MmaSync), "{}", arch.key());
        assert_eq!(
            has(InstructionFamily::Wgmma),
            sm == 90,
            "{}: wgmma is sm_90a only",
            arch.key()
        );
        assert_eq!(has(InstructionFamily::Tcgen05), sm >= 100, "{}", arch.key());
        if sm >= 80 {
            // m16n8k16 is the half-precision mma.sync shape from Ampere on.
            let mma_f16 = arch
                .instructions_for(ComputeClass::F16)
                .find(|i| i.family == InstructionFamily::MmaSync)
                .unwrap();
            assert_eq!((mma_f16.m.min(), mma_f16.n.min(), mma_f16.k), (16, 8, 16));
        }
        // Every tensor class with a peak has an instruction and the reverse.
        for class in ComputeClass::ALL.into_iter().filter(|c| c.is_tensor()) {
            let listed = arch.instructions_for(class).next().is_some();
            assert_eq!(
                listed,
                arch.peak.contains_key(&class),
                "{} {class}",
                arch.key()
            );
        }
    }
}

#[test]
fn blackwell_tcgen05_shapes_follow_the_ptx_isa() {
    let db = shipped();
    let b200 = db.get("b200").unwrap();
    let shapes: Vec<_> = b200
        .instructions_for(ComputeClass::F16)
        .filter(|i| i.family == InstructionFamily::Tcgen05)
        .collect();
    // M=64 takes N in steps of 8, M=128 in steps of 16 (one CTA).
    assert!(
        shapes
            .iter()
            .any(|i| i.m.contains(64) && i.n.contains(8) && i.n.contains(24))
    );
    assert!(
        shapes
            .iter()
            .any(|i| i.m.contains(128) && i.n.contains(16) && !i.n.contains(24))
    );
    assert!(shapes.iter().all(|i| i.k == 16 && i.n.max() == 256));
    let fp8_k: Vec<u32> = b200
        .instructions_for(ComputeClass::Fp8)
        .map(|i| i.k)
        .collect();
    assert!(fp8_k.iter().all(|&k| k == 32), "{fp8_k:?}");
}

/// Limits from the CUDA C++ Programming Guide's "Technical Specifications per Compute
/// Capability" (7.0 from the Volta-era edition): shared memory per SM, per block after opt-in,
/// reserved per block, resident threads and blocks per SM.
const GUIDE_LIMITS: [(&str, u64, u64, u64, u32, u32); 6] = [
    ("7.0", 96 * 1024, 96 * 1024, 0, 2048, 32),
    ("8.0", 164 * 1024, 163 * 1024, 1024, 2048, 32),
    ("8.6", 100 * 1024, 99 * 1024, 1024, 1536, 16),
    ("8.9", 100 * 1024, 99 * 1024, 1024, 1536, 24),
    ("9.0", 228 * 1024, 227 * 1024, 1024, 2048, 32),
    ("10.0", 228 * 1024, 227 * 1024, 1024, 2048, 32),
];

#[test]
fn per_sm_limits_match_the_programming_guide() {
    for arch in shipped().iter() {
        let cc = arch.gpu.compute_capability.to_string();
        let Some(&(_, per_sm, optin, reserved, threads, blocks)) =
            GUIDE_LIMITS.iter().find(|row| row.0 == cc)
        else {
            panic!(
                "{}: compute capability {cc} is not in the test's table",
                arch.key()
            );
        };
        let s = &arch.shared_memory;
        let got = (
            s.per_sm_bytes,
            s.per_block_optin_bytes,
            s.reserved_per_block_bytes,
            arch.sm.max_threads,
            arch.sm.max_blocks,
        );
        assert_eq!(
            got,
            (per_sm, optin, reserved, threads, blocks),
            "{} (cc {cc})",
            arch.key()
        );
        assert_eq!(s.per_block_default_bytes, 48 * 1024, "{}", arch.key());
        let r = &arch.registers;
        assert_eq!(
            (r.per_sm, r.per_block, r.per_thread_max),
            (65536, 65536, 255),
            "{}",
            arch.key()
        );
    }
}

#[test]
fn every_estimate_is_explained_in_the_sources() {
    for arch in shipped().iter() {
        for path in &arch.estimated {
            assert!(
                arch.gpu
                    .sources
                    .iter()
                    .any(|s| s.contains(path.path().as_ref())),
                "{}: `{path}` is marked estimated but no source says how it was estimated",
                arch.key()
            );
        }
    }
}

// ---- Bad input: a user directory with one broken file. ----

/// Writes `text` as `file_name` in a fresh directory and loads it on top of the shipped files.
fn load_user_file(
    file_name: &str,
    text: &str,
) -> (tempfile::TempDir, Result<HardwareDb, ArchError>) {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(file_name), text).unwrap();
    let mut db = shipped();
    let result = db.add_dir(dir.path()).map(|()| db);
    (dir, result)
}

fn expect_rejected(file_name: &str, text: &str, must_mention: &[&str]) -> ArchError {
    let (dir, result) = load_user_file(file_name, text);
    let err = result.expect_err("the broken file must be rejected");
    let message = err.to_string();
    let path = dir.path().join(file_name).display().to_string();
    assert!(
        message.contains(&path),
        "the error names the file: {message}"
    );
    for needle in must_mention {
        assert!(
            message.contains(needle),
            "the error mentions `{needle}`: {message}"
        );
    }
    err
}

fn replace_once(text: &str, from: &str, to: &str) -> String {
    assert_eq!(
        text.matches(from).count(),
        1,
        "`{from}` occurs once in the exemplar"
    );
    text.replacen(from, to, 1)
}

#[test]
fn malformed_toml_is_rejected_with_its_location() {
    let text = replace_once(&h100_text(), "count = 132", "count = = 132");
    let err = expect_rejected("h100-sxm.toml", &text, &["cannot parse", "count"]);
    assert!(matches!(err, ArchError::Parse { .. }), "{err:?}");
}

#[test]
fn unknown_field_is_rejected_by_name() {
    let text = replace_once(
        &h100_text(),
        "warp_size = 32",
        "warp_size = 32\nwarp_width = 32",
    );
    let err = expect_rejected("h100-sxm.toml", &text, &["unknown field", "warp_width"]);
    assert!(matches!(err, ArchError::Parse { .. }), "{err:?}");
}

#[test]
fn missing_field_is_rejected_by_name() {
    let text = replace_once(&h100_text(), "bus_width_bits = 5120\n", "");
    let err = expect_rejected("h100-sxm.toml", &text, &["missing field", "bus_width_bits"]);
    assert!(matches!(err, ArchError::Parse { .. }), "{err:?}");
}

#[test]
fn bandwidth_off_by_two_is_rejected_with_the_derivation() {
    let text = replace_once(
        &h100_text(),
        "bandwidth_bytes_per_s = 3.35e12",
        "bandwidth_bytes_per_s = 6.7e12",
    );
    let err = expect_rejected(
        "h100-sxm.toml",
        &text,
        &[
            "memory.bandwidth_bytes_per_s",
            "2 x memory_clock_mhz x bus_width_bits / 8",
            "apart",
        ],
    );
    assert!(
        matches!(err, ArchError::Invalid { ref field, .. } if field == "memory.bandwidth_bytes_per_s")
    );
}

#[test]
fn l2_request_coalescing_outside_one_to_eight_is_rejected() {
    for bad in ["0.5", "nan", "inf", "9.0"] {
        let text = replace_once(
            &h100_text(),
            "request_coalescing = 2.0",
            &format!("request_coalescing = {bad}"),
        );
        let err = expect_rejected("h100-sxm.toml", &text, &["l2.request_coalescing"]);
        assert!(
            matches!(err, ArchError::OutOfRange { ref field, .. } if field == "l2.request_coalescing"),
            "{bad}: {err:?}"
        );
    }
    // Absent is allowed: nothing is coalesced.
    let text = replace_once(&h100_text(), "request_coalescing = 2.0\n", "");
    let (_dir, result) = load_user_file("h100-sxm.toml", &text);
    assert_eq!(
        result.unwrap().get("h100").unwrap().l2.request_coalescing,
        None
    );
}

#[test]
fn an_mma_sync_step_outside_one_to_a_thousand_cycles_is_rejected() {
    let field = "tensor_instructions[3].step_cycles";
    for bad in ["0.0", "-63.0", "nan", "inf", "5000.0"] {
        let text = replace_once(
            &h100_text(),
            "step_cycles = 63.0",
            &format!("step_cycles = {bad}"),
        );
        let err = expect_rejected("h100-sxm.toml", &text, &[field, "cycles"]);
        assert!(
            matches!(err, ArchError::OutOfRange { field: ref f, .. } if f == field),
            "{bad}: {err:?}"
        );
    }
    // Absent is allowed: the wait is not priced.
    let text = replace_once(&h100_text(), "step_cycles = 63.0\n", "");
    let (_dir, result) = load_user_file("h100-sxm.toml", &text);
    let arch = result.unwrap();
    assert!(
        arch.get("h100")
            .unwrap()
            .tensor_instructions
            .iter()
            .all(|i| i.step_cycles.is_none())
    );
}

#[test]
fn a_step_wait_on_a_wgmma_instruction_is_rejected() {
    // wgmma loops are asynchronous: a figure there would be silently unused.
    let text = replace_once(
        &h100_text(),
        "n = { min = 8, max = 256, step = 8 }\nk = 16\n",
        "n = { min = 8, max = 256, step = 8 }\nk = 16\nstep_cycles = 63.0\n",
    );
    let err = expect_rejected(
        "h100-sxm.toml",
        &text,
        &["tensor_instructions[0].step_cycles", "mma-sync"],
    );
    assert!(matches!(err, ArchError::Invalid { .. }), "{err:?}");
}

/// The entries of the H100 description's segment table.
const H100_SEGMENTS: &str = "  { bytes = 32, efficiency = 0.72 },\n  { bytes = 64, efficiency = 0.74 },\n  { bytes = 128, efficiency = 1.0 },\n";

/// The H100 description's segment table with its entries replaced by `entries`.
fn with_segments(entries: &str) -> String {
    replace_once(&h100_text(), H100_SEGMENTS, entries)
}

#[test]
fn segment_efficiency_must_ascend_never_fall_and_end_at_the_full_rate() {
    for (entries, field, says) in [
        // Widths out of order.
        (
            "  { bytes = 64, efficiency = 0.74 },\n  { bytes = 32, efficiency = 0.72 },\n  { bytes = 128, efficiency = 1.0 },\n",
            "memory.segment_efficiency[1].bytes",
            "widths must ascend",
        ),
        // A wider segment slower than a narrower one.
        (
            "  { bytes = 32, efficiency = 0.8 },\n  { bytes = 64, efficiency = 0.74 },\n  { bytes = 128, efficiency = 1.0 },\n",
            "memory.segment_efficiency[1].efficiency",
            "never streams slower",
        ),
        // The widest not at the full rate.
        (
            "  { bytes = 32, efficiency = 0.72 },\n  { bytes = 64, efficiency = 0.9 },\n",
            "memory.segment_efficiency[1].efficiency",
            "the full rate",
        ),
        // Narrower than a sector.
        (
            "  { bytes = 16, efficiency = 0.5 },\n  { bytes = 128, efficiency = 1.0 },\n",
            "memory.segment_efficiency[0].bytes",
            "32 B to 4096 B",
        ),
    ] {
        let err = expect_rejected("h100-sxm.toml", &with_segments(entries), &[field, says]);
        assert!(err.to_string().contains(says), "{entries}: {err}");
    }
    for bad in ["nan", "inf", "0", "1.5"] {
        let entries = format!(
            "  {{ bytes = 32, efficiency = {bad} }},\n  {{ bytes = 128, efficiency = 1.0 }},\n"
        );
        let err = expect_rejected(
            "h100-sxm.toml",
            &with_segments(&entries),
            &["memory.segment_efficiency[0].efficiency"],
        );
        assert!(
            matches!(err, ArchError::OutOfRange { .. }),
            "{bad}: {err:?}"
        );
    }
    // Absent is allowed: every segment of at least a sector streams at the full rate.
    let text = replace_once(
        &h100_text(),
        &format!("segment_efficiency = [\n{H100_SEGMENTS}]\n"),
        "",
    );
    let (_dir, result) = load_user_file("h100-sxm.toml", &text);
    let db = result.unwrap();
    let memory = &db.get("h100").unwrap().memory;
    assert!(memory.segment_efficiency.is_empty());
    assert_eq!(memory.segment_rate(64.0), 1.0);
}

#[test]
fn a_segment_streams_at_the_rate_of_the_widest_listed_width_not_above_it() {
    let db = shipped();
    let memory = &db.get("h200").unwrap().memory;
    assert_eq!(
        memory.segment_rate(16.0),
        0.72,
        "below the narrowest: the narrowest's"
    );
    assert_eq!(memory.segment_rate(32.0), 0.72);
    assert_eq!(memory.segment_rate(64.0), 0.74);
    assert_eq!(
        memory.segment_rate(96.0),
        0.74,
        "between two: the narrower's"
    );
    assert_eq!(memory.segment_rate(128.0), 1.0);
    assert_eq!(
        memory.segment_rate(512.0),
        1.0,
        "beyond the widest: the widest's"
    );
}

#[test]
fn peak_that_disagrees_with_its_rate_is_rejected() {
    let text = replace_once(
        &h100_text(),
        "[peak.tf32]\ntflops = 494.7",
        "[peak.tf32]\ntflops = 989.4",
    );
    let err = expect_rejected(
        "h100-sxm.toml",
        &text,
        &["peak.tf32.tflops", "flops_per_clock_per_tensor_core"],
    );
    assert!(matches!(err, ArchError::Invalid { .. }), "{err:?}");
}

#[test]
fn key_that_differs_from_the_file_stem_is_rejected() {
    let err = expect_rejected(
        "my-h100.toml",
        &h100_text(),
        &["gpu.key", "h100-sxm", "my-h100.toml"],
    );
    assert!(matches!(err, ArchError::Invalid { ref field, .. } if field == "gpu.key"));
}

#[test]
fn estimated_path_that_names_no_field_is_rejected() {
    let text = replace_once(
        &h100_text(),
        r#"estimated = []"#,
        r#"estimated = ["l2.bandwidth_bytes_per_s", "l2.latency_ns"]"#,
    );
    let err = expect_rejected(
        "h100-sxm.toml",
        &text,
        &[
            "estimated",
            "`l2.latency_ns`",
            "accepted: gpu.name",
            "l2.bandwidth_bytes_per_s",
            "peak.<class>.tflops",
        ],
    );
    assert!(matches!(err, ArchError::Parse { .. }), "{err:?}");
}

#[test]
fn estimated_peak_of_a_class_without_a_peak_is_rejected() {
    let a100 = fs::read_to_string(shipped_dir().join("a100-sxm4-80gb.toml")).unwrap();
    let text = replace_once(
        &a100,
        r#"estimated = ["l2.bandwidth_bytes_per_s"]"#,
        r#"estimated = ["peak.fp8.tflops"]"#,
    );
    let err = expect_rejected(
        "a100-sxm4-80gb.toml",
        &text,
        &["estimated", "peak.fp8.tflops", "not a field"],
    );
    assert!(matches!(err, ArchError::Invalid { ref field, .. } if field == "estimated"));
}

#[test]
fn estimated_fields_are_written_back_as_they_were_read() {
    for arch in shipped().iter() {
        let written = toml::Value::try_from(arch).unwrap();
        let reread: BTreeSet<ArchField> = written["estimated"].clone().try_into().unwrap();
        assert_eq!(reread, arch.estimated, "{}", arch.key());
        let json = serde_json::to_value(arch).unwrap();
        let paths: Vec<String> = arch.estimated.iter().map(ToString::to_string).collect();
        assert_eq!(
            json["estimated"],
            serde_json::json!(paths),
            "{}",
            arch.key()
        );
    }
    let db = shipped();
    let a6000 = db.get("rtx-a6000").unwrap();
    let json = serde_json::to_value(a6000).unwrap();
    // Listed in path order, exactly as the file spells them.
    assert_eq!(
        json["estimated"],
        serde_json::json!([
            "l2.bandwidth_bytes_per_s",
            "memory.memory_clock_mhz",
            "peak.int8.tflops",
            "peak.tf32.tflops"
        ])
    );
}

#[test]
fn missing_user_directory_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir");
    let err = HardwareDb::load(Some(&missing)).unwrap_err();
    assert!(matches!(err, ArchError::MissingDbDir { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&missing.display().to_string()),
        "{err}"
    );
}

// ---- User directories that are fine. ----

#[test]
fn user_file_with_a_shipped_key_replaces_that_entry() {
    let text = replace_once(
        &h100_text(),
        "bandwidth_bytes_per_s = 7.85e12",
        "bandwidth_bytes_per_s = 9.1e12",
    );
    let (dir, result) = load_user_file("h100-sxm.toml", &text);
    let db = result.unwrap();
    assert_eq!(db.len(), shipped().len());
    let h100 = db.get("h100").unwrap();
    assert_eq!(h100.l2.bandwidth_bytes_per_s, 9.1e12);
    let path = dir.path().join("h100-sxm.toml").display().to_string();
    assert_eq!(h100.origin, Origin::UserFile { path });
}

#[test]
fn user_file_with_a_new_key_is_added() {
    let text = replace_once(&h100_text(), r#"key = "h100-sxm""#, r#"key = "h100-lab""#);
    let text = replace_once(
        &text,
        r#"name = "NVIDIA H100 80GB HBM3""#,
        r#"name = "Lab H100""#,
    );
    let text = replace_once(
        &text,
        r#"aliases = ["h100", "h100-sxm5", "h100-sxm5-80gb"]"#,
        "aliases = []",
    );
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("h100-lab.toml"), text).unwrap();
    fs::write(dir.path().join("notes.txt"), "not a description; ignored").unwrap();
    let db = HardwareDb::load(Some(dir.path())).unwrap();
    assert_eq!(db.len(), shipped().len() + 1);
    assert_eq!(db.get("Lab H100").unwrap().key(), "h100-lab");
    assert_eq!(db.get("h100").unwrap().key(), "h100-sxm");
    assert!(matches!(
        db.get("h100").unwrap().origin,
        Origin::Embedded { .. }
    ));
}

#[test]
fn unknown_gpu_lists_known_keys_and_the_closest_match() {
    let db = shipped();
    let err = db.get("h1000").unwrap_err();
    let ArchError::UnknownGpu { closest, known, .. } = &err else {
        panic!("{err:?}");
    };
    let closest = closest.as_deref().expect("a closest match");
    assert!(
        closest.starts_with("h100"),
        "closest to h1000 was {closest}"
    );
    assert_eq!(known, &db.keys());
    let message = err.to_string();
    assert!(
        message.contains("did you mean") && message.contains(closest),
        "{message}"
    );
    for key in db.keys() {
        assert!(message.contains(&key), "{message}");
    }
}

#[test]
fn far_off_names_still_get_the_list_of_known_gpus() {
    let db = shipped();
    let message = db.get("quantum-annealer").unwrap_err().to_string();
    assert!(
        message.contains("unknown GPU `quantum-annealer`"),
        "{message}"
    );
    assert!(
        message.contains("h100-sxm") && message.contains("v100-sxm2"),
        "{message}"
    );
}

// ---- The tolerance on derived figures is exactly where it says. ----

/// A shipped description with every derived figure made exact, so that a perturbation by a factor
/// `1 + e` is off by exactly `|e|`, and with an L2 bandwidth high enough not to interfere.
fn exact(mut arch: Arch) -> Arch {
    arch.memory.bandwidth_bytes_per_s = arch.derived_dram_bandwidth();
    let classes: Vec<_> = arch.peak.keys().copied().collect();
    for class in classes {
        let derived = derived_peak_tflops(&arch, class);
        arch.peak.get_mut(&class).unwrap().tflops = derived;
    }
    arch.l2.bandwidth_bytes_per_s = 9e13;
    arch
}

#[derive(Clone, Debug)]
enum Perturbed {
    DramBandwidth,
    /// Index into the GPU's peak table.
    Peak(usize),
}

fn perturb(arch: &mut Arch, what: &Perturbed, factor: f64) -> String {
    match what {
        Perturbed::DramBandwidth => {
            arch.memory.bandwidth_bytes_per_s *= factor;
            "memory.bandwidth_bytes_per_s".to_string()
        }
        Perturbed::Peak(i) => {
            let class = *arch.peak.keys().nth(i % arch.peak.len()).unwrap();
            arch.peak.get_mut(&class).unwrap().tflops *= factor;
            format!("peak.{class}.tflops")
        }
    }
}

fn perturbation() -> impl Strategy<Value = Perturbed> {
    prop_oneof![
        Just(Perturbed::DramBandwidth),
        (0usize..7).prop_map(Perturbed::Peak)
    ]
}

proptest! {
    #[test]
    fn perturbation_within_tolerance_is_accepted(
        gpu in 0usize..64,
        what in perturbation(),
        e in -DERIVED_TOLERANCE * 0.998..DERIVED_TOLERANCE * 0.998,
    ) {
        let db = shipped();
        let mut arch = exact(db.iter().nth(gpu % db.len()).unwrap().clone());
        prop_assert!(validate(&arch, "exact", None).is_ok());
        perturb(&mut arch, &what, 1.0 + e);
        let result = validate(&arch, "perturbed", None);
        prop_assert!(result.is_ok(), "{:?}", result);
    }

    #[test]
    fn perturbation_beyond_tolerance_is_rejected_naming_the_field(
        gpu in 0usize..64,
        what in perturbation(),
        e in prop_oneof![DERIVED_TOLERANCE * 1.002..1.0, -0.9..-DERIVED_TOLERANCE * 1.002],
    ) {
        let db = shipped();
        let mut arch = exact(db.iter().nth(gpu % db.len()).unwrap().clone());
        let field = perturb(&mut arch, &what, 1.0 + e);
        match validate(&arch, "perturbed", None) {
            Err(ArchError::Invalid { field: got, .. }) => prop_assert_eq!(got, field),
            other => prop_assert!(false, "expected {} to be rejected, got {:?}", field, other),
        }
    }
}
