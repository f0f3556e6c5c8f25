//! Untrusted input that reaches the hardware model, on the real binary: user hardware files
//! (`--hardware-db`, `CARVER_HARDWARE_DB`), calibration files in the cache directory, and shapes
//! (files and flags). Every case must end in a clear refusal with a non-zero exit, or (for a
//! calibration, which is optional) a warning naming the file and a run on the uncalibrated
//! model; never a panic, a hang, or a NaN or infinite time.
//!
//! Each group's cases are listed in one table, so the size of the corpus is the sum of the
//! tables' lengths (see `CORPUS` at the end).

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;
use tempfile::TempDir;

use common::{carver_bin, text};

/// Long enough for a debug build on a loaded machine; a hang fails the test instead of the run.
const TIMEOUT: Duration = Duration::from_secs(120);

const PROBLEM: [&str; 8] = [
    "recommend",
    "--arch",
    "h100",
    "--m",
    "4096",
    "--n",
    "4096",
    "--k",
];

/// `carver --cache-dir CACHE ARGS`, no inherited CARVER_* settings, with a time limit.
fn carver(cache: &Path, args: &[&str]) -> Command {
    let mut cmd = common::carver(cache, args);
    cmd.timeout(TIMEOUT);
    cmd
}

/// What a run printed and how it ended.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(cmd: &mut Command) -> Run {
    let out = cmd.output().expect("carver runs");
    let run = Run {
        code: out.status.code(),
        stdout: text(&out.stdout),
        stderr: text(&out.stderr),
    };
    // Killed by the timeout, or a panic (exit 101): never acceptable.
    assert!(
        run.code.is_some(),
        "no exit code (timed out?): {}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("panicked") && run.code != Some(101),
        "panic: {}",
        run.stderr
    );
    for bad in ["NaN", " inf ", "inf us"] {
        assert!(
            !run.stdout.contains(bad),
            "`{bad}` printed:\n{}",
            run.stdout
        );
    }
    run
}

/// Asserts a refusal: non-zero exit, and an error on stderr that mentions every needle.
fn refused(run: &Run, needles: &[&str], case: &str) {
    assert!(
        matches!(run.code, Some(c) if c != 0),
        "{case}: exit {:?}, stderr: {}",
        run.code,
        run.stderr
    );
    assert!(run.stderr.contains("error"), "{case}: {}", run.stderr);
    for needle in needles {
        assert!(
            run.stderr.contains(needle),
            "{case}: stderr lacks `{needle}`:\n{}",
            run.stderr
        );
    }
}

// ---- Hardware files ----

fn shipped(key: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../hardware-db")
        .join(format!("{key}.toml"));
    fs::read_to_string(path).unwrap()
}

/// `text` with `key = ...` of the first `[section]` (or `[[section]]`) set to `value`.
fn set(text: &str, section: &str, key: &str, value: &str) -> String {
    let mut out = Vec::new();
    let (mut in_section, mut done) = (false, false);
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            in_section = trimmed.trim_matches(['[', ']']) == section;
        }
        let top_level = section.is_empty() && !trimmed.starts_with('[');
        if !done && (in_section || top_level) && trimmed.starts_with(&format!("{key} =")) {
            out.push(format!("{key} = {value}"));
            done = true;
        } else {
            out.push(line.to_string());
        }
    }
    assert!(done, "no `{key}` in [{section}]");
    out.join("\n")
}

/// (section, key, bad value, what the error must mention besides the file). Each row is a user
/// file `h100-sxm.toml` with one figure of the shipped description replaced.
const HARDWARE_CASES: [(&str, &str, &str, &[&str]); 40] = [
    // The reported failure: a NaN clock gave 3146 TFLOP/s on a 989 TFLOP/s GPU.
    (
        "sm",
        "sustained_clock_mhz",
        "nan",
        &["sm.sustained_clock_mhz", "NaN", "accepted"],
    ),
    (
        "sm",
        "sustained_clock_mhz",
        "inf",
        &["sm.sustained_clock_mhz", "inf", "accepted"],
    ),
    (
        "sm",
        "sustained_clock_mhz",
        "-1830",
        &["sm.sustained_clock_mhz", "-1830"],
    ),
    (
        "sm",
        "sustained_clock_mhz",
        "0",
        &["sm.sustained_clock_mhz", "is 0 MHz"],
    ),
    (
        "sm",
        "sustained_clock_mhz",
        "1e300",
        &["sm.sustained_clock_mhz", "1e300"],
    ),
    (
        "sm",
        "boost_clock_mhz",
        "nan",
        &["sm.boost_clock_mhz", "NaN"],
    ),
    (
        "sm",
        "boost_clock_mhz",
        "-inf",
        &["sm.boost_clock_mhz", "-inf"],
    ),
    (
        "sm",
        "boost_clock_mhz",
        "1.98e9",
        &["sm.boost_clock_mhz", "100 MHz to 5000 MHz"],
    ),
    ("sm", "count", "0", &["sm.count", "1 to 1024"]),
    ("sm", "count", "-132", &["count = -132", "expected u32"]),
    ("sm", "count", "132000", &["sm.count", "132000"]),
    ("sm", "count", "1e30", &["count = 1e30", "expected u32"]),
    ("sm", "count", "nan", &["count = nan", "expected u32"]),
    (
        "sm",
        "tensor_cores",
        "0",
        &["sm.tensor_cores", "tensor-core peak"],
    ),
    ("sm", "max_threads", "0", &["sm.max_threads", "256 to 4096"]),
    ("registers", "per_sm", "0", &["registers.per_sm"]),
    (
        "shared_memory",
        "per_sm_bytes",
        "0",
        &["shared_memory.per_sm_bytes"],
    ),
    (
        "shared_memory",
        "per_block_optin_bytes",
        "9223372036854775807",
        &["shared_memory.per_block_optin_bytes"],
    ),
    (
        "memory",
        "bandwidth_bytes_per_s",
        "nan",
        &["memory.bandwidth_bytes_per_s", "NaN"],
    ),
    (
        "memory",
        "bandwidth_bytes_per_s",
        "-3.35e12",
        &["memory.bandwidth_bytes_per_s"],
    ),
    (
        "memory",
        "bandwidth_bytes_per_s",
        "0",
        &["memory.bandwidth_bytes_per_s"],
    ),
    (
        "memory",
        "bandwidth_bytes_per_s",
        "3.35e30",
        &["memory.bandwidth_bytes_per_s"],
    ),
    (
        "memory",
        "memory_clock_mhz",
        "nan",
        &["memory.memory_clock_mhz"],
    ),
    (
        "memory",
        "memory_clock_mhz",
        "0",
        &["memory.memory_clock_mhz"],
    ),
    ("memory", "bus_width_bits", "0", &["memory.bus_width_bits"]),
    ("memory", "capacity_bytes", "0", &["memory.capacity_bytes"]),
    (
        "l2",
        "bandwidth_bytes_per_s",
        "nan",
        &["l2.bandwidth_bytes_per_s", "NaN"],
    ),
    (
        "l2",
        "bandwidth_bytes_per_s",
        "inf",
        &["l2.bandwidth_bytes_per_s", "inf"],
    ),
    (
        "l2",
        "bandwidth_bytes_per_s",
        "1",
        &["l2.bandwidth_bytes_per_s"],
    ),
    ("l2", "size_bytes", "0", &["l2.size_bytes"]),
    (
        "l2",
        "size_bytes",
        "9223372036854775807",
        &["l2.size_bytes"],
    ),
    ("peak.f16", "tflops", "nan", &["peak.f16.tflops", "NaN"]),
    ("peak.f16", "tflops", "-989.4", &["peak.f16.tflops"]),
    ("peak.f16", "tflops", "0", &["peak.f16.tflops"]),
    ("peak.f16", "tflops", "1e300", &["peak.f16.tflops"]),
    (
        "peak.f16",
        "flops_per_clock_per_tensor_core",
        "nan",
        &["peak.f16.flops_per_clock_per_tensor_core"],
    ),
    (
        "peak.f16",
        "flops_per_clock_per_tensor_core",
        "0",
        &["peak.f16.flops_per_clock_per_tensor_core"],
    ),
    ("peak.fp32", "clock_mhz", "nan", &["peak.fp32.clock_mhz"]),
    ("peak.fp32", "clock_mhz", "1e6", &["peak.fp32.clock_mhz"]),
    (
        "tensor_instructions",
        "n",
        "{ min = 8, max = 1000000, step = 8 }",
        &["tensor_instructions[0].n.max", "to 256"],
    ),
];

/// A user directory holding one description `key.toml` with `text`.
fn user_dir(key: &str, text: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(format!("{key}.toml"));
    fs::write(&file, text).unwrap();
    (dir, file)
}

#[test]
fn every_bad_figure_in_a_user_hardware_file_is_refused_naming_file_and_field() {
    let cache = tempfile::tempdir().unwrap();
    let h100 = shipped("h100-sxm");
    for (i, (section, key, value, needles)) in HARDWARE_CASES.iter().enumerate() {
        let case = format!("[{section}] {key} = {value}");
        let (dir, file) = user_dir("h100-sxm", &set(&h100, section, key, value));
        let file = file.display().to_string();
        let mut needles = needles.to_vec();
        needles.push(&file);
        // Through the flag, and (every other case) through the environment variable.
        let mut cmd = carver(cache.path(), &PROBLEM);
        cmd.arg("4096");
        if i % 2 == 0 {
            cmd.args(["--hardware-db".as_ref(), dir.path().as_os_str()]);
        } else {
            cmd.env("CARVER_HARDWARE_DB", dir.path());
        }
        refused(&run(&mut cmd), &needles, &case);
    }
}

#[test]
fn a_bad_user_file_stops_every_command_that_reads_the_database() {
    let cache = tempfile::tempdir().unwrap();
    let text = set(&shipped("h100-sxm"), "sm", "sustained_clock_mhz", "nan");
    let (dir, file) = user_dir("h100-sxm", &text);
    let db = dir.path().to_str().unwrap();
    let file = file.display().to_string();
    for args in [
        vec!["--hardware-db", db, "arch", "list"],
        vec!["--hardware-db", db, "arch", "show", "h100"],
        // Even a GPU the bad file does not describe: the user asked for that directory.
        vec![
            "--hardware-db",
            db,
            "recommend",
            "--arch",
            "a100",
            "--m",
            "64",
            "--n",
            "64",
            "--k",
            "64",
        ],
    ] {
        let case = args.join(" ");
        refused(
            &run(&mut carver(cache.path(), &args)),
            &[&file, "sm.sustained_clock_mhz", "NaN"],
            &case,
        );
    }
}

// ---- Calibration files ----

/// A good calibration of the H100 SXM as JSON, for `uuid`.
fn calibration(uuid: &str) -> Value {
    serde_json::json!({
        "format": 1,
        "uuid": uuid,
        "device_name": "NVIDIA H100 80GB HBM3",
        "base_key": "h100-sxm",
        "driver_version": "580.159.04",
        "carver_version": "0.1.0",
        "measured_at_unix_s": 1_795_321_213u64,
        "dram_bandwidth_bytes_per_s": 3.0e12,
        "l2_bandwidth_bytes_per_s": 7.88e12,
        "smem_bandwidth_bytes_per_s": 3.29e13,
        "peak_tflops": { "f16": 743.5, "bf16": 757.4 },
        "method": {}
    })
}

/// A calibration file's contents, from a good one with `edit` applied.
fn edited(edit: impl Fn(&mut Value)) -> String {
    let mut v = calibration("GPU-1");
    edit(&mut v);
    serde_json::to_string_pretty(&v).unwrap()
}

/// Every bad calibration file: (file name, contents, what the warning must mention).
fn calibration_cases() -> Vec<(&'static str, String, &'static [&'static str])> {
    let good = edited(|_| {});
    vec![
        ("GPU-1.json", "not json".into(), &["not a calibration"]),
        ("GPU-1.json", String::new(), &["not a calibration"]),
        (
            "GPU-1.json",
            good[..good.len() / 2].into(),
            &["not a calibration"],
        ),
        ("GPU-1.json", "[]".into(), &["not a calibration"]),
        ("GPU-1.json", "{}".into(), &["not a calibration", "format"]),
        (
            "GPU-1.json",
            edited(|v| v["dram_bandwidth_bytes_per_s"] = (-1.0).into()),
            &["dram_bandwidth_bytes_per_s", "is -1 B/s"],
        ),
        (
            // The reported file: "inf us" in the table.
            "GPU-1.json",
            edited(|v| {
                v["dram_bandwidth_bytes_per_s"] = (-1.0).into();
                v["peak_tflops"]["f16"] = 1e-9.into();
            }),
            &["dram_bandwidth_bytes_per_s"],
        ),
        (
            "GPU-1.json",
            edited(|v| v["peak_tflops"]["f16"] = 1e-9.into()),
            &["peak_tflops.f16", "1e-9"],
        ),
        (
            "GPU-1.json",
            edited(|v| v["dram_bandwidth_bytes_per_s"] = 1e300.into()),
            &["dram_bandwidth_bytes_per_s", "1e300"],
        ),
        (
            "GPU-1.json",
            edited(|v| v["l2_bandwidth_bytes_per_s"] = 0.0.into()),
            &["l2_bandwidth_bytes_per_s", "is 0 B/s"],
        ),
        (
            // Plausible for some GPU, but 100x the H100's shared memory.
            "GPU-1.json",
            edited(|v| v["smem_bandwidth_bytes_per_s"] = 3.29e15.into()),
            &["smem_bandwidth_bytes_per_s"],
        ),
        (
            // A fifth of the spec sheet is a throttled GPU; a hundredth is a broken measurement.
            "GPU-1.json",
            edited(|v| v["peak_tflops"]["bf16"] = 7.5.into()),
            &["peak_tflops.bf16", "0.05x to 2x"],
        ),
        (
            "GPU-1.json",
            edited(|v| v["peak_tflops"]["f16"] = 2500.0.into()),
            &["peak_tflops.f16", "0.05x to 2x"],
        ),
        (
            // JSON cannot say NaN or inf; a number too large for a double is what comes closest.
            "GPU-1.json",
            edited(|v| v["dram_bandwidth_bytes_per_s"] = "@INF@".into())
                .replace("\"@INF@\"", "1e999"),
            &["not a calibration"],
        ),
        (
            "GPU-1.json",
            edited(|v| v["dram_bandwidth_bytes_per_s"] = "fast".into()),
            &["not a calibration", "string \"fast\""],
        ),
        (
            "GPU-1.json",
            edited(|v| v["uuid"] = "GPU-2".into()),
            &["`uuid`", "GPU-2", "GPU-1.json"],
        ),
        ("GPU-1.json", edited(|v| v["uuid"] = "".into()), &["`uuid`"]),
        (
            "GPU-1.json",
            edited(|v| v["format"] = 99.into()),
            &["newer carver"],
        ),
        (
            "GPU-1.json",
            edited(|v| v["format"] = 0.into()),
            &["`format`", "is 0"],
        ),
        (
            "GPU-1.json",
            edited(|v| v["format"] = (-1).into()),
            &["not a calibration"],
        ),
        (
            "GPU-1.json",
            edited(|v| v["peak_tflops"]["fp16"] = 1500.0.into()),
            &["not a calibration", "fp16"],
        ),
        (
            "GPU-1.json",
            edited(|v| v["measured_at_unix_s"] = (-5).into()),
            &["not a calibration"],
        ),
    ]
}

/// The hints for the test problem as (config, predicted time), from `--format json`.
fn hints(stdout: &str) -> Vec<(String, f64)> {
    let doc: Value = serde_json::from_str(stdout).expect("JSON output");
    doc["results"][0]["hints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let t = h["prediction"]["time_us"]
                .as_f64()
                .expect("a finite time (JSON writes NaN and inf as null)");
            assert!(t.is_finite() && t > 0.0, "{t}");
            (h["config"].to_string(), t)
        })
        .collect()
}

fn recommend_json(cache: &Path) -> Run {
    let mut cmd = carver(cache, &PROBLEM);
    cmd.args(["4096", "--format", "json"]);
    run(&mut cmd)
}

#[test]
fn a_bad_calibration_file_is_reported_and_the_uncalibrated_model_answers() {
    let clean = tempfile::tempdir().unwrap();
    let baseline = recommend_json(clean.path());
    assert_eq!(baseline.code, Some(0), "{}", baseline.stderr);
    assert!(baseline.stderr.is_empty(), "{}", baseline.stderr);
    let uncalibrated = hints(&baseline.stdout);

    for (name, contents, needles) in calibration_cases() {
        let cache = tempfile::tempdir().unwrap();
        let dir = cache.path().join("calibration");
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join(name);
        fs::write(&file, &contents).unwrap();
        let case = format!("{name}: {}", contents.replace('\n', " "));

        let answer = recommend_json(cache.path());
        assert_eq!(answer.code, Some(0), "{case}: {}", answer.stderr);
        let warning = &answer.stderr;
        assert!(
            warning.starts_with("warning: calibration file ignored"),
            "{case}: {warning}"
        );
        assert!(
            warning.contains(&file.display().to_string()),
            "{case}: {warning}"
        );
        for needle in needles {
            assert!(
                warning.contains(needle),
                "{case}: lacks `{needle}`: {warning}"
            );
        }
        assert_eq!(hints(&answer.stdout), uncalibrated, "{case}");

        // The table, and `arch show`, say the same and show no calibration.
        let table = run(&mut carver(
            cache.path(),
            &[&PROBLEM[..], &["4096"]].concat(),
        ));
        assert_eq!(table.code, Some(0), "{case}");
        assert!(
            table.stderr.contains("warning: calibration file ignored"),
            "{case}"
        );
        let show = run(&mut carver(
            cache.path(),
            &["arch", "show", "h100", "--format", "json"],
        ));
        assert_eq!(show.code, Some(0), "{case}");
        assert!(show.stderr.contains(&file.display().to_string()), "{case}");
        let doc: Value = serde_json::from_str(&show.stdout).unwrap();
        assert!(doc["arch"].get("calibration").is_none(), "{case}");
    }
}

#[test]
fn a_good_calibration_beside_a_bad_one_is_still_used_and_each_bad_file_is_named_once() {
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().join("calibration");
    fs::create_dir_all(&dir).unwrap();
    let mut good = calibration("GPU-good");
    good["measured_at_unix_s"] = 1.into();
    fs::write(dir.join("GPU-good.json"), good.to_string()).unwrap();
    fs::write(dir.join("GPU-bad.json"), "{ truncated").unwrap();
    // Two GPUs planned for: the unreadable file is still reported once.
    let mut cmd = carver(
        cache.path(),
        &[
            "recommend",
            "--arch",
            "h100,a100",
            "--m",
            "64",
            "--n",
            "64",
            "--k",
            "64",
        ],
    );
    let answer = run(&mut cmd);
    assert_eq!(answer.code, Some(0), "{}", answer.stderr);
    assert_eq!(
        answer.stderr.matches("GPU-bad.json").count(),
        1,
        "{}",
        answer.stderr
    );
    assert!(
        !answer.stderr.contains("GPU-good.json"),
        "{}",
        answer.stderr
    );
    let show = run(&mut carver(
        cache.path(),
        &["arch", "show", "h100", "--format", "json"],
    ));
    let doc: Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(doc["arch"]["calibration"]["uuid"], "GPU-good");
}

#[test]
fn a_calibration_of_a_class_the_gpu_lacks_is_reported() {
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().join("calibration");
    fs::create_dir_all(&dir).unwrap();
    let mut c = calibration("GPU-a100");
    c["base_key"] = "a100-sxm4-80gb".into();
    c["dram_bandwidth_bytes_per_s"] = 1.9e12.into();
    c["l2_bandwidth_bytes_per_s"] = Value::Null;
    c["smem_bandwidth_bytes_per_s"] = Value::Null;
    // The A100 has no fp8 at all.
    c["peak_tflops"] = serde_json::json!({ "f16": 280.0, "fp8": 500.0 });
    fs::write(dir.join("GPU-a100.json"), c.to_string()).unwrap();
    let mut cmd = carver(
        cache.path(),
        &[
            "recommend",
            "--arch",
            "a100",
            "--m",
            "64",
            "--n",
            "64",
            "--k",
            "64",
        ],
    );
    let answer = run(&mut cmd);
    assert_eq!(answer.code, Some(0), "{}", answer.stderr);
    for needle in [
        "GPU-a100.json",
        "peak_tflops.fp8",
        "no [peak.fp8]",
        "accepted: peak_tflops.f16",
    ] {
        assert!(
            answer.stderr.contains(needle),
            "lacks `{needle}`: {}",
            answer.stderr
        );
    }
}

// ---- Shapes ----

/// A shapes file's contents, the flags given with it, and what stderr must mention. Every one
/// must exit non-zero: a bad row is reported (the good rows are still answered), a bad file or
/// flag ends the run.
const SHAPES_CASES: [(&str, &str, &[&str], &[&str]); 33] = [
    (
        "non-object items, each on its own line",
        "[\n 1,\n \"x\",\n null,\n [],\n true,\n {\"M\": 64, \"N\": 64, \"K\": 64}\n]\n",
        &[],
        &[
            ":2: bad shape row",
            ":3: bad shape row",
            ":4: bad shape row",
            ":5: bad shape row",
            ":6: bad shape row",
            "got 1",
            "got \"x\"",
        ],
    ),
    (
        "non-object items in the object form",
        "{\"about\": [{\"M\": 1}],\n \"shapes\": [\n  {\"M\": 64, \"N\": 64, \"K\": 64},\n  42\n ]\n}\n",
        &[],
        &[":4: bad shape row", "got 42"],
    ),
    (
        "string sizes",
        "[{\"M\": \"64\", \"N\": 64, \"K\": 64}]",
        &[],
        &["`M` = \"64\"", "non-negative integer"],
    ),
    (
        "2^62 sizes",
        "[{\"M\": 4611686018427387904, \"N\": 64, \"K\": 64}]",
        &[],
        &["M = 4611686018427387904", "largest supported size"],
    ),
    (
        "2^62 batch",
        "[{\"M\": 64, \"N\": 64, \"K\": 64, \"batch\": 4611686018427387904}]",
        &[],
        &["batch = 4611686018427387904"],
    ),
    (
        "2^64 sizes",
        "[{\"M\": 18446744073709551616, \"N\": 64, \"K\": 64}]",
        &[],
        &["`M`", "non-negative integer"],
    ),
    (
        "sizes beyond a double",
        "[{\"M\": 1e400, \"N\": 64, \"K\": 64}]",
        &[],
        &["not valid JSON"],
    ),
    (
        "negative sizes",
        "[{\"M\": 64, \"N\": -64, \"K\": 64}]",
        &[],
        &["`N` = -64"],
    ),
    (
        "float sizes",
        "[{\"M\": 64, \"N\": 64, \"K\": 64.5}]",
        &[],
        &["`K` = 64.5"],
    ),
    (
        "float sizes that look whole",
        "[{\"M\": 64.0, \"N\": 64, \"K\": 64}]",
        &[],
        &["`M` = 64.0"],
    ),
    (
        "zero sizes",
        "[{\"M\": 0, \"N\": 64, \"K\": 64}]",
        &[],
        &["M is 0", "at least 1"],
    ),
    (
        "missing sizes",
        "[{\"M\": 64, \"N\": 64}]",
        &[],
        &["missing `K`"],
    ),
    (
        "null sizes",
        "[{\"M\": null, \"N\": 64, \"K\": 64}]",
        &[],
        &["`M` = null"],
    ),
    ("an empty array", "[]", &[], &["lists no shapes"]),
    (
        "an empty shapes array",
        "{\"shapes\": []}",
        &[],
        &["lists no shapes"],
    ),
    (
        "shapes that are not an array",
        "{\"shapes\": 5}",
        &[],
        &["`shapes` array"],
    ),
    (
        "truncated JSON",
        "[{\"M\": 64, \"N\": 64,",
        &[],
        &["not valid JSON"],
    ),
    (
        "a dtype of banana in a row",
        "[{\"M\": 64, \"N\": 64, \"K\": 64, \"dtype\": \"banana\"}]",
        &[],
        &["`dtype` = \"banana\"", "--dtype", "accepted: f16, bf16"],
    ),
    (
        "a valid dtype in a row",
        "[{\"M\": 64, \"N\": 64, \"K\": 64, \"dtype\": \"bf16\"}]",
        &[],
        &["`dtype` = \"bf16\"", "--dtype"],
    ),
    (
        "a layout in a row",
        "[{\"M\": 64, \"N\": 64, \"K\": 64, \"layout\": \"cc\"}]",
        &[],
        &["`layout`", "--layout"],
    ),
    (
        "an out_dtype in a row",
        "[{\"M\": 64, \"N\": 64, \"K\": 64, \"out_dtype\": 3}]",
        &[],
        &["`out_dtype`", "--out-dtype"],
    ),
    (
        "a name that is not a string",
        "[{\"name\": 7, \"M\": 64, \"N\": 64, \"K\": 64}]",
        &[],
        &["`name` = 7"],
    ),
    (
        "CSV letters",
        "M,N,K\n64,abc,64\n",
        &[],
        &[":2: bad shape row", "N = `abc`"],
    ),
    (
        "CSV negative",
        "64,-1,64\n",
        &[],
        &[":1: bad shape row", "N = `-1`"],
    ),
    ("CSV floats", "64,64,1.5\n", &[], &["K = `1.5`"]),
    (
        "CSV 2^62",
        "4611686018427387904,64,64\n",
        &[],
        &["largest supported size"],
    ),
    (
        "CSV too few columns",
        "M,N,K\n64,64\n",
        &[],
        &["expected 3 columns"],
    ),
    (
        "CSV dtype column",
        "M,N,K,dtype\n64,64,64,banana\n",
        &[],
        &["column `dtype`", "--dtype"],
    ),
    (
        "CSV header without K",
        "M,N,X\n1,2,3\n",
        &[],
        &["M, N and K columns"],
    ),
    ("an empty file", "", &[], &["lists no shapes"]),
    (
        "unknown --dtype with a file",
        "[{\"M\": 64, \"N\": 64, \"K\": 64}]",
        &["--dtype", "banana"],
        &["unknown dtype `banana`", "accepted: f16, bf16"],
    ),
    (
        "unknown --out-dtype with a file",
        "[{\"M\": 64, \"N\": 64, \"K\": 64}]",
        &["--out-dtype", "f128"],
        &["unknown dtype `f128`"],
    ),
    (
        "unknown --acc-dtype with a file",
        "[{\"M\": 64, \"N\": 64, \"K\": 64}]",
        &["--acc-dtype", "7"],
        &["unknown dtype `7`"],
    ),
];

#[test]
fn every_bad_shapes_file_or_dtype_flag_is_refused_with_its_line() {
    let cache = tempfile::tempdir().unwrap();
    for (case, contents, flags, needles) in SHAPES_CASES {
        let dir = tempfile::tempdir().unwrap();
        let csv = !contents.trim_start().starts_with(['[', '{']) && !contents.is_empty();
        let file = dir
            .path()
            .join(if csv { "shapes.csv" } else { "shapes.json" });
        fs::write(&file, contents).unwrap();
        let mut cmd = carver(cache.path(), &["recommend", "--arch", "h100", "--shapes"]);
        cmd.arg(&file).args(flags);
        let answer = run(&mut cmd);
        let mut needles = needles.to_vec();
        let name = file.display().to_string();
        // A flag's error comes from the argument parser, before the file is read.
        if flags.is_empty() {
            needles.push(&name);
        }
        refused(&answer, &needles, case);
        assert!(
            !answer.stderr.contains(":0:"),
            "{case}: line 0 reported: {}",
            answer.stderr
        );
    }
}

/// Sizes given as flags: (flags after `recommend --arch h100`, what stderr must mention). The
/// argument parser or the model refuses each; the needles hold whichever does.
const SIZE_FLAG_CASES: [(&[&str], &[&str]); 8] = [
    (
        &["--m", "abc", "--n", "64", "--k", "64"],
        &["invalid value 'abc' for '--m"],
    ),
    (
        &["--m", "64", "--n", "64", "--k", "64", "--batch", "-3"],
        &["-3"],
    ),
    (
        &["--m", "4611686018427387904", "--n", "64", "--k", "64"],
        &["4611686018427387904", "largest supported size"],
    ),
    (
        &[
            "--m",
            "64",
            "--n",
            "64",
            "--k",
            "64",
            "--batch",
            "4611686018427387904",
        ],
        &["4611686018427387904", "largest supported size"],
    ),
    (&["--m", "-1", "--n", "64", "--k", "64"], &["-1"]),
    (
        &["--m", "1.5", "--n", "64", "--k", "64"],
        &["invalid value '1.5' for '--m"],
    ),
    (
        &["--m", "18446744073709551616", "--n", "64", "--k", "64"],
        &["invalid value '18446744073709551616' for '--m"],
    ),
    (
        &["--m", "64", "--n", "64", "--k", "64", "--dtype", "banana"],
        &["unknown dtype `banana`", "accepted: f16"],
    ),
];

#[test]
fn bad_sizes_and_dtypes_as_flags_are_refused() {
    let cache = tempfile::tempdir().unwrap();
    for (flags, needles) in SIZE_FLAG_CASES {
        let mut cmd = carver(cache.path(), &["recommend", "--arch", "h100"]);
        cmd.args(flags);
        refused(&run(&mut cmd), needles, &flags.join(" "));
    }
}

// ---- The corpus ----

/// Bad inputs covered here: refused ones (hardware files, shapes files, flags) and warned ones
/// (calibration files). The project records these counts; keep them in step with the tables.
#[test]
fn corpus_size_is_recorded() {
    let refused = HARDWARE_CASES.len() + 3 + SHAPES_CASES.len() + SIZE_FLAG_CASES.len();
    let warned = calibration_cases().len() + 1;
    assert_eq!((refused, warned), (84, 23));
    assert!(carver_bin().ends_with("carver") || carver_bin().ends_with("carver.exe"));
}
