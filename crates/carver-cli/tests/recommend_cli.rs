//! `carver recommend` as a user runs it.

use std::io::Write;

use assert_cmd::Command;
use predicates::prelude::*;

/// Cache directory of these tests: `recommend` only reads it, so one shared path suffices.
fn cache_dir() -> std::path::PathBuf {
    std::env::temp_dir().join("carver-recommend-cli-tests")
}

/// `recommend` for every dev shape as Triton JSON (the `--shapes` path follows).
const DEV_SHAPES_TRITON_JSON: [&str; 8] = [
    "recommend",
    "--arch",
    "h100",
    "--target",
    "triton",
    "--format",
    "json",
    "--shapes",
];

fn carver() -> Command {
    let mut cmd = Command::cargo_bin("carver").unwrap();
    cmd.arg("--cache-dir").arg(cache_dir());
    cmd.env_remove("CARVER_HARDWARE_DB")
        .env_remove("CARVER_CACHE_DIR");
    cmd
}

fn json(cmd: &mut Command) -> serde_json::Value {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn dev_shapes() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../eval/dev-shapes.json")
}

#[test]
fn one_shape_as_a_table() {
    carver()
        .args([
            "recommend",
            "--arch",
            "h100",
            "--target",
            "triton",
            "--m",
            "4096",
            "--n",
            "4096",
            "--k",
            "4096",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("RANK").and(predicate::str::contains("wgmma")));
}

/// The table with its planning time (which varies run to run) replaced by `N`.
fn table_of(args: &[&str]) -> String {
    let out = carver().arg("recommend").args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|line| match line.split_once(", planned in ") {
            Some((head, _)) => format!("{head}, planned in N us"),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

const H100_TRITON_4096: [&str; 10] = [
    "--arch", "h100", "--target", "triton", "--m", "4096", "--n", "4096", "--k", "4096",
];
const A100_TRITON_1024: [&str; 10] = [
    "--arch",
    "a100-sxm4-80gb",
    "--target",
    "triton",
    "--m",
    "1024",
    "--n",
    "4096",
    "--k",
    "4096",
];

/// The README's first command, as a newcomer sees it: planning time labelled, the config
/// notation explained, and ranks out of predicted-time order explained exactly when there are
/// some (`ranks_out_of_order_are_listed_as_ranges` has a table with them).
#[test]
fn the_table_labels_its_timing_and_explains_configs_and_order() {
    let table = table_of(&H100_TRITON_4096);
    insta::assert_snapshot!("recommend_h100_triton_4096_table", table);
    let header = table.lines().next().unwrap();
    assert!(
        header.ends_with("(target triton), planned in N us"),
        "{header}"
    );
    assert!(
        table.contains("CONFIG: block MxNxK, wN warps, sN pipeline stages"),
        "{table}"
    );
    // The TIME column of the ranked rows (seventh from the end): is one faster than a row
    // above it?
    let times: Vec<f64> = table
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .map(|l| l.split_whitespace().rev().nth(6).unwrap().parse().unwrap())
        .collect();
    let out_of_order = (1..times.len()).any(|i| times[..i].iter().any(|&t| times[i] < t));
    assert_eq!(
        table.contains("is predicted faster than a rank above it")
            && table.contains("12% when every operand is loaded in vectors, 35%"),
        out_of_order,
        "{table}"
    );
}

/// Several ranks out of order are listed as single ranks and ranges, comma-separated.
#[test]
fn ranks_out_of_order_are_listed_as_ranges() {
    let table = table_of(&A100_TRITON_1024);
    assert!(
        table.contains("ranks 3, 6-7 are predicted faster than a rank above them"),
        "{table}"
    );
}

#[test]
fn ranks_in_predicted_time_order_get_no_note() {
    // The top-1 alone is trivially in order; the legend is still there.
    let mut args = H100_TRITON_4096.to_vec();
    args.extend(["--topk", "1"]);
    let table = table_of(&args);
    assert!(!table.contains("note:"), "{table}");
    assert!(table.contains("CONFIG: block MxNxK"), "{table}");
}

#[test]
fn many_tables_share_one_legend() {
    let table = table_of(&[
        "--arch",
        "h100,a100",
        "--m",
        "512",
        "--n",
        "512",
        "--k",
        "512",
    ]);
    assert_eq!(table.matches("planned in N us").count(), 2, "{table}");
    assert_eq!(table.matches("CONFIG: block").count(), 1, "{table}");
    assert!(
        table.trim_end().ends_with("tensor-core instruction"),
        "{table}"
    );
}

#[test]
fn help_documents_the_shape_options_and_sets_the_global_ones_apart() {
    let out = carver().args(["recommend", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let (own, global) = help
        .split_once("Global options:")
        .unwrap_or_else(|| panic!("no `Global options:` heading in\n{help}"));
    for (flag, words) in [
        ("--m <M>", "Rows of A and C"),
        ("--n <N>", "Columns of B and C"),
        ("--k <K>", "reduction dimension"),
        ("--topk <TOPK>", "How many configurations"),
        ("--batch <BATCH>", "Independent matmuls"),
    ] {
        let at = own
            .find(flag)
            .unwrap_or_else(|| panic!("{flag} not among the options:\n{own}"));
        // The help sits on the flag's line or the next (long help), before the next flag.
        let doc = &own[at + flag.len()..];
        let doc = &doc[..doc.find("\n      --").unwrap_or(doc.len())];
        assert!(doc.contains(words), "{flag}: `{words}` not in {doc:?}");
    }
    for flag in ["--hardware-db", "--cache-dir"] {
        assert!(
            global.contains(flag),
            "{flag} not under Global options:\n{help}"
        );
        assert!(
            !own.contains(flag),
            "{flag} among the subcommand's own:\n{help}"
        );
    }
}

#[test]
fn json_is_versioned_and_ranked_with_triton_configs() {
    let v = json(carver().args([
        "recommend",
        "--arch",
        "h100",
        "--target",
        "triton",
        "--m",
        "16",
        "--n",
        "12288",
        "--k",
        "4096",
        "--topk",
        "8",
        "--format",
        "json",
    ]));
    assert_eq!(v["schema_version"], 1);
    let hints = v["results"][0]["hints"].as_array().unwrap();
    assert_eq!(hints.len(), 8);
    for (i, h) in hints.iter().enumerate() {
        assert_eq!(h["rank"], i + 1);
        let kw = &h["config"]["kwargs"];
        for key in [
            "BLOCK_SIZE_M",
            "BLOCK_SIZE_N",
            "BLOCK_SIZE_K",
            "GROUP_SIZE_M",
            "SPLIT_K",
        ] {
            assert!(kw[key].as_u64().is_some(), "{key} missing in {h}");
        }
        for key in ["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"] {
            let v = kw[key].as_u64().unwrap();
            assert!(v >= 16 && v.is_power_of_two(), "{key} = {v}");
        }
        assert!(h["config"]["num_warps"].as_u64().unwrap().is_power_of_two());
        assert!(h["prediction"]["time_us"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn tilelang_configs_have_its_parameter_names() {
    let v = json(carver().args([
        "recommend",
        "--arch",
        "a100",
        "--target",
        "tilelang",
        "--m",
        "1024",
        "--n",
        "1024",
        "--k",
        "1024",
        "--format",
        "json",
    ]));
    let cfg = &v["results"][0]["hints"][0]["config"];
    for key in [
        "block_M",
        "block_N",
        "block_K",
        "num_stages",
        "thread_num",
        "enable_rasteration",
    ] {
        assert!(!cfg[key].is_null(), "{key} missing in {cfg}");
    }
}

#[test]
fn several_archs_answer_side_by_side() {
    let v = json(carver().args([
        "recommend",
        "--arch",
        "h100,a100,l40s",
        "--target",
        "triton",
        "--m",
        "512",
        "--n",
        "4096",
        "--k",
        "4096",
        "--format",
        "json",
    ]));
    let archs: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["arch"].as_str().unwrap())
        .collect();
    assert_eq!(archs, ["h100-sxm", "a100-sxm4-80gb", "l40s"]);
}

#[test]
fn dev_shapes_file_gets_hints_for_every_shape() {
    let v = json(carver().args(DEV_SHAPES_TRITON_JSON).arg(dev_shapes()));
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 22);
    for r in results {
        assert!(r["error"].is_null(), "{r}");
        assert_eq!(r["hints"].as_array().unwrap().len(), 8, "{}", r["shape"]);
        assert!(r["shape"]["name"].is_string());
    }
}

#[test]
fn a_bad_row_is_named_by_line_and_the_others_still_answer() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    writeln!(
        f,
        "M,N,K,name\n64,64,64,ok\n0,64,64,zero\n64,x,64,text\n128,128,128,ok2"
    )
    .unwrap();
    let out = carver()
        .args([
            "recommend",
            "--arch",
            "h100",
            "--format",
            "json",
            "--shapes",
        ])
        .arg(f.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(":4: bad shape row") && stderr.contains("N = `x`"),
        "{stderr}"
    );
    assert!(
        stderr.contains(":3: zero on h100-sxm") && stderr.contains("at least 1"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["error"].is_null())
        .map(|r| r["shape"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ok", "ok2"]);
}

#[test]
fn bad_input_exits_non_zero_with_a_reason() {
    let cases: &[(&[&str], &str)] = &[
        (&["--m", "0", "--n", "8", "--k", "8"], "at least 1"),
        (&["--m", "-3", "--n", "8", "--k", "8"], "-3"),
        (
            &["--m", "99999999999999", "--n", "8", "--k", "8"],
            "exceeds",
        ),
        (
            &["--m", "8", "--n", "8", "--k", "8", "--topk", "0"],
            "--topk",
        ),
        (
            &["--m", "8", "--n", "8", "--k", "8", "--target", "cutlass"],
            "triton, tilelang, cuda-sm90, generic",
        ),
        (
            &[
                "--m", "8", "--n", "8", "--k", "8", "--dtype", "e4m3", "--arch", "a100",
            ],
            "fp8",
        ),
        (
            &["--m", "8", "--n", "8", "--k", "8", "--dtype", "f64"],
            "accepted",
        ),
        (
            &["--m", "8", "--n", "8", "--k", "8", "--layout", "rx"],
            "r (row-major) or c",
        ),
        (
            &["--m", "8", "--n", "8", "--k", "8", "--arch", "h1000"],
            "did you mean",
        ),
    ];
    for (args, needle) in cases {
        let out = carver().arg("recommend").args(*args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(
            stderr.contains(needle),
            "{args:?}: `{needle}` not in {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn cuda_sm90_prices_the_repack_of_unaligned_operands() {
    // K = 999 and N = 777: neither A's nor B's rows are 16 bytes, so both are copied first.
    let v = json(carver().args([
        "recommend",
        "--arch",
        "h100",
        "--target",
        "cuda-sm90",
        "--dtype",
        "bf16",
        "--m",
        "333",
        "--n",
        "777",
        "--k",
        "999",
        "--format",
        "json",
    ]));
    let hints = v["results"][0]["hints"].as_array().unwrap();
    assert!(!hints.is_empty(), "{v}");
    for h in hints {
        let p = &h["prediction"];
        let repack = p["breakdown"]["repack_us"].as_f64().unwrap();
        assert!(repack > 0.0, "{h}");
        assert!(p["time_us"].as_f64().unwrap() > repack, "{h}");
    }
    // Aligned operands are read in place: the field is left out.
    let v = json(carver().args([
        "recommend",
        "--arch",
        "h100",
        "--target",
        "cuda-sm90",
        "--dtype",
        "bf16",
        "--m",
        "1024",
        "--n",
        "1024",
        "--k",
        "1024",
        "--format",
        "json",
    ]));
    for h in v["results"][0]["hints"].as_array().unwrap() {
        assert!(
            h["prediction"]["breakdown"].get("repack_us").is_none(),
            "{h}"
        );
    }
}

#[test]
fn explain_prints_the_breakdown() {
    carver()
        .args([
            "recommend",
            "--arch",
            "h100",
            "--m",
            "333",
            "--n",
            "777",
            "--k",
            "999",
            "--topk",
            "2",
            "--explain",
        ])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("compute").and(predicate::str::contains("wave efficiency")),
        );
}

#[test]
fn a_reader_that_stops_early_ends_carver_quietly() {
    use std::io::Read;
    use std::process::{Command as Std, Stdio};
    let mut child = Std::new(assert_cmd::cargo::cargo_bin("carver"))
        .arg("--cache-dir")
        .arg(cache_dir())
        .args(DEV_SHAPES_TRITON_JSON)
        .arg(dev_shapes())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 64];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The read end is dropped here; carver's next write hits a closed pipe.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A tuning result imported into the database shows up next to the model's ranking for the same
/// problem and GPU kind, and not for another problem.
#[test]
fn a_measured_winner_is_reported_next_to_the_ranking() {
    use carver_schema::{MeasuredCandidate, TuneRecord};
    let cache = tempfile::tempdir().unwrap();
    let winner = serde_json::json!({"kwargs": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 32,
        "GROUP_SIZE_M": 8, "SPLIT_K": 1}, "num_warps": 8, "num_stages": 5});
    // An H100 f16 Triton result for M = N = K = 4096 (sample keys have M = 128 + n).
    let key = carver_tunedb::test_support::sample_key(4096 - 128);
    assert_eq!(
        (key.problem.m, key.problem.n, key.problem.k),
        (4096, 4096, 4096)
    );
    let record = TuneRecord {
        key,
        winner: winner.clone(),
        candidates: vec![MeasuredCandidate {
            config: winner.clone(),
            model_rank: 1,
            predicted_time_s: 190e-6,
            measured_time_s: Some(195e-6),
            failure: None,
        }],
        cublas_time_s: Some(185e-6),
        measured_at_unix_s: 1_795_000_000,
        method: serde_json::json!({"timer": "cuda-events"}),
    };
    let file = cache.path().join("results.jsonl");
    let mut text = Vec::new();
    carver_tunedb::write_export(&[record], &mut text).unwrap();
    std::fs::write(&file, text).unwrap();
    let mut import = Command::cargo_bin("carver").unwrap();
    import
        .arg("--cache-dir")
        .arg(cache.path())
        .args(["cache", "import"])
        .arg(&file)
        .assert()
        .success();

    let run = |m: &str| {
        let mut cmd = Command::cargo_bin("carver").unwrap();
        cmd.arg("--cache-dir").arg(cache.path()).args([
            "recommend",
            "--arch",
            "h100",
            "--target",
            "triton",
            "--m",
            m,
            "--n",
            "4096",
            "--k",
            "4096",
            "--format",
            "json",
        ]);
        json(&mut cmd)
    };
    let v = run("4096");
    let measured = &v["results"][0]["measured"];
    assert_eq!(measured["config"], winner);
    assert!((measured["measured_time_us"].as_f64().unwrap() - 195.0).abs() < 1e-6);
    assert_eq!(measured["device_name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(
        v["results"][0]["hints"].as_array().unwrap().len(),
        8,
        "the ranking is still there"
    );
    assert!(run("2048")["results"][0].get("measured").is_none());
}
