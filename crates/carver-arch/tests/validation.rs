//! Properties of the validation every hardware description passes, through the same path a user
//! file takes (TOML text -> `parse_arch`): any non-finite or out-of-range number in any numeric
//! field of a shipped description is refused with an error naming that field; the shipped
//! descriptions pass; and no value at all, however absurd, makes the validator panic.

use std::fs;
use std::path::{Path, PathBuf};

use carver_arch::{ArchError, CALIBRATION_FORMAT, Calibration, CalibrationStore, parse_arch};
use proptest::prelude::*;
use toml::{Table, Value};

fn shipped_files() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hardware-db");
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let stem = p.file_stem().unwrap().to_str().unwrap().to_string();
            (stem, fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// Fields the model reads as real numbers (`f64`); every other numeric field is a count or size.
const REAL_FIELDS: [&str; 8] = [
    "boost_clock_mhz",
    "sustained_clock_mhz",
    "memory_clock_mhz",
    "bandwidth_bytes_per_s",
    "tflops",
    "flops_per_clock_per_tensor_core",
    "flops_per_clock_per_sm",
    "clock_mhz",
];

/// Size fields the model reads as `u64`; the other counts are `u32`.
const U64_FIELDS: [&str; 6] = [
    "per_sm_bytes",
    "per_block_default_bytes",
    "per_block_optin_bytes",
    "reserved_per_block_bytes",
    "capacity_bytes",
    "size_bytes",
];

/// One numeric leaf of a description: its dotted path as the validator names it
/// (`peak.f16.tflops`, `tensor_instructions[2].n.min`) and the keys that reach it.
#[derive(Clone, Debug)]
struct Leaf {
    path: String,
    keys: Vec<Key>,
    name: String,
    value: f64,
}

#[derive(Clone, Debug)]
enum Key {
    Name(String),
    Index(usize),
}

fn leaves(value: &Value, path: &str, keys: &mut Vec<Key>, out: &mut Vec<Leaf>) {
    match value {
        Value::Table(t) => {
            for (k, v) in t {
                keys.push(Key::Name(k.clone()));
                let sub = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                leaves(v, &sub, keys, out);
                keys.pop();
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                keys.push(Key::Index(i));
                leaves(v, &format!("{path}[{i}]"), keys, out);
                keys.pop();
            }
        }
        Value::Integer(_) | Value::Float(_) => {
            let name = match keys.last() {
                Some(Key::Name(n)) => n.clone(),
                _ => return,
            };
            out.push(Leaf {
                path: path.to_string(),
                keys: keys.clone(),
                name,
                value: value
                    .as_float()
                    .or(value.as_integer().map(|i| i as f64))
                    .unwrap(),
            });
        }
        _ => {}
    }
}

fn numeric_leaves(text: &str) -> Vec<Leaf> {
    let table: Table = text.parse().unwrap();
    let mut out = Vec::new();
    leaves(&Value::Table(table), "", &mut Vec::new(), &mut out);
    out
}

/// `text` with the leaf replaced by `value`.
fn with_value(text: &str, leaf: &Leaf, value: Value) -> String {
    let mut root = Value::Table(text.parse::<Table>().unwrap());
    let mut at = &mut root;
    for key in &leaf.keys {
        at = match key {
            Key::Name(n) => at.as_table_mut().unwrap().get_mut(n).unwrap(),
            Key::Index(i) => at.as_array_mut().unwrap().get_mut(*i).unwrap(),
        };
    }
    *at = value;
    toml::to_string(&root).unwrap()
}

/// Values no field of its kind accepts.
fn bad_values(leaf: &Leaf) -> Vec<Value> {
    if REAL_FIELDS.contains(&leaf.name.as_str()) {
        let v = leaf.value;
        [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -1.0,
            0.0,
            -v,
            1e300,
            1e-300,
            v * 1e6,
            v * 1e-6,
        ]
        .into_iter()
        .map(Value::Float)
        .collect()
    } else {
        let mut values = if U64_FIELDS.contains(&leaf.name.as_str()) {
            vec![1 << 62, i64::MAX, -1]
        } else {
            vec![i64::from(u32::MAX), i64::from(u32::MAX) + 1, -1]
        };
        // Zero is a legal count of reserved shared memory and nothing else.
        if leaf.name != "reserved_per_block_bytes" {
            values.push(0);
        }
        values.into_iter().map(Value::Integer).collect()
    }
}

/// Asserts the error names the leaf: by its path for a refused value, by its key (and the
/// line it is on) for a value the type cannot hold.
fn names_the_field(err: &ArchError, leaf: &Leaf) -> Result<(), String> {
    let message = err.to_string();
    let ok = match err {
        ArchError::OutOfRange { field, .. } | ArchError::Invalid { field, .. } => {
            *field == leaf.path
        }
        ArchError::Parse { reason, .. } => reason.contains(&leaf.name),
        _ => false,
    };
    if ok && message.contains("label.toml") {
        Ok(())
    } else {
        Err(format!("{}: {message}", leaf.path))
    }
}

#[test]
fn every_shipped_description_passes_and_has_its_numbers_found() {
    for (stem, text) in shipped_files() {
        parse_arch("label.toml", Some(&stem), &text).unwrap();
        let paths: Vec<String> = numeric_leaves(&text).into_iter().map(|l| l.path).collect();
        for must in [
            "sm.count",
            "memory.bandwidth_bytes_per_s",
            "peak.fp32.tflops",
        ] {
            assert!(paths.iter().any(|p| p == must), "{stem}: {paths:?}");
        }
    }
}

#[test]
fn every_bad_value_in_every_numeric_field_of_every_shipped_file_is_refused_by_name() {
    let mut failures = Vec::new();
    let mut cases = 0;
    for (stem, text) in shipped_files() {
        for leaf in numeric_leaves(&text) {
            for value in bad_values(&leaf) {
                cases += 1;
                let shown = value.to_string();
                let bad = with_value(&text, &leaf, value);
                match parse_arch("label.toml", Some(&stem), &bad) {
                    Ok(_) => failures.push(format!("{stem}: {} = {shown} accepted", leaf.path)),
                    Err(e) => {
                        if let Err(why) = names_the_field(&e, &leaf) {
                            failures.push(format!("{stem}: {shown}: {why}"));
                        }
                    }
                }
            }
        }
    }
    assert!(cases > 1000, "only {cases} cases");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A description and one of its numeric leaves, picked at random.
fn file_and_leaf() -> impl Strategy<Value = (String, String, Leaf)> {
    let files = shipped_files();
    (0..files.len(), any::<prop::sample::Index>()).prop_map(move |(f, i)| {
        let (stem, text) = files[f].clone();
        let leaves = numeric_leaves(&text);
        let leaf = leaves[i.index(leaves.len())].clone();
        (stem, text, leaf)
    })
}

/// Any value a TOML number can hold, absurd ones included.
fn any_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<f64>().prop_map(Value::Float),
        any::<i64>().prop_map(Value::Integer),
        (0i64..=1 << 20).prop_map(Value::Integer),
        prop::num::f64::ANY.prop_map(Value::Float),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Out-of-range values, at random: refused, naming the field.
    #[test]
    fn out_of_range_values_are_refused_naming_the_field(
        (stem, text, leaf) in file_and_leaf(),
        pick in any::<prop::sample::Index>(),
    ) {
        let values = bad_values(&leaf);
        let value = values[pick.index(values.len())].clone();
        let bad = with_value(&text, &leaf, value.clone());
        match parse_arch("label.toml", Some(&stem), &bad) {
            Ok(_) => prop_assert!(false, "{} = {} accepted", leaf.path, value),
            Err(e) => {
                let named = names_the_field(&e, &leaf);
                prop_assert!(named.is_ok(), "{:?}", named);
            }
        }
    }

    /// Any value at all in up to three fields: an answer, never a panic; and what is accepted
    /// has only finite real numbers.
    #[test]
    fn no_value_makes_the_validator_panic(
        (stem, text, leaf) in file_and_leaf(),
        more in prop::collection::vec((any::<prop::sample::Index>(), any_number()), 0..3),
        value in any_number(),
    ) {
        let mut bad = with_value(&text, &leaf, value);
        let leaves = numeric_leaves(&bad);
        for (i, v) in more {
            bad = with_value(&bad, &leaves[i.index(leaves.len())], v);
        }
        if let Ok(arch) = parse_arch("label.toml", Some(&stem), &bad) {
            for l in numeric_leaves(&toml::to_string(&arch).unwrap()) {
                prop_assert!(l.value.is_finite(), "{} = {}", l.path, l.value);
            }
        }
    }

    /// Finite real numbers moved by a few percent either way: accepted or refused, never a
    /// panic, and a refusal names a field.
    #[test]
    fn small_perturbations_of_real_fields_never_panic(
        (stem, text, leaf) in file_and_leaf(),
        factor in 0.9f64..1.1,
    ) {
        let value = if REAL_FIELDS.contains(&leaf.name.as_str()) {
            Value::Float(leaf.value * factor)
        } else {
            Value::Integer((leaf.value * factor).round() as i64)
        };
        let moved = with_value(&text, &leaf, value);
        if let Err(e) = parse_arch("label.toml", Some(&stem), &moved) {
            let field_named = matches!(
                e,
                ArchError::OutOfRange { .. } | ArchError::Invalid { .. }
            );
            prop_assert!(field_named, "{e:?}");
        }
    }
}

// ---- Calibration files: checked on load and against the description they calibrate. ----

fn h100_calibration() -> Calibration {
    let mut c = Calibration {
        format: CALIBRATION_FORMAT,
        uuid: "GPU-0123".into(),
        device_name: "NVIDIA H100 80GB HBM3".into(),
        base_key: Some("h100-sxm".into()),
        // Set, so that the only `null` a non-finite figure leaves in the JSON is that figure's.
        driver_version: Some("580.159.04".into()),
        carver_version: "test".into(),
        measured_at_unix_s: 10,
        dram_bandwidth_bytes_per_s: Some(3.0e12),
        l2_bandwidth_bytes_per_s: Some(7.9e12),
        smem_bandwidth_bytes_per_s: Some(3.3e13),
        peak_tflops: Default::default(),
        method: Default::default(),
    };
    c.peak_tflops.insert(carver_arch::ComputeClass::F16, 743.5);
    c
}

const CALIBRATION_FIELDS: [&str; 4] = [
    "dram_bandwidth_bytes_per_s",
    "l2_bandwidth_bytes_per_s",
    "smem_bandwidth_bytes_per_s",
    "peak_tflops.f16",
];

fn set_figure(c: &mut Calibration, field: &str, value: f64) {
    let figure = field.parse().unwrap();
    c.record(figure, value, "test".into());
}

#[test]
fn the_measured_h100_calibration_passes() {
    let db = carver_arch::HardwareDb::embedded().unwrap();
    let h100 = db.get("h100-sxm").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = CalibrationStore::new(dir.path());
    let measured = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../carver-gpu/measurements/h100-calibration.json");
    let c: Calibration = serde_json::from_str(&fs::read_to_string(measured).unwrap()).unwrap();
    store.save(&c).unwrap();
    let lookup = store.for_entry(h100);
    assert!(lookup.ignored.is_empty(), "{:?}", lookup.ignored);
    assert_eq!(lookup.calibration, Some(c.clone()));
    let lookup = store.for_device(&c.uuid, h100);
    assert_eq!(lookup.calibration, Some(c));
}

proptest! {
    /// A figure that is not finite, or not within 0.05x..2x of the description's, makes the file
    /// ignored with an error naming it; an older good file of the same GPU is used instead.
    #[test]
    fn implausible_calibration_figures_are_ignored_by_name(
        field in prop::sample::select(CALIBRATION_FIELDS.to_vec()),
        value in prop_oneof![
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(0.0),
            -1e300..0.0f64,
            Just(1e300),
            Just(1e-9),
        ],
        // Relative to the good figures, which lie within 0.75x..1.1x of the description's.
        factor in prop_oneof![1e-6..0.04f64, 3.0..1e6f64],
        by_factor in any::<bool>(),
    ) {
        let db = carver_arch::HardwareDb::embedded().unwrap();
        let h100 = db.get("h100-sxm").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = CalibrationStore::new(dir.path());
        let good = h100_calibration();
        store.save(&good).unwrap();
        let mut bad = h100_calibration();
        bad.uuid = "GPU-4567".into();
        bad.measured_at_unix_s = 20;
        let value = if by_factor {
            good.measured(field.parse().unwrap()).unwrap() * factor
        } else {
            value
        };
        set_figure(&mut bad, field, value);
        // serde_json writes non-finite numbers as null, so write such files by hand.
        let text = serde_json::to_string(&bad).unwrap();
        let text = if value.is_finite() {
            text
        } else {
            text.replace("null", "1e999")
        };
        fs::write(store.dir().join("GPU-4567.json"), text).unwrap();
        let lookup = store.for_entry(h100);
        prop_assert_eq!(lookup.calibration, Some(good));
        prop_assert_eq!(lookup.ignored.len(), 1);
        let message = lookup.ignored[0].to_string();
        prop_assert!(message.contains("GPU-4567.json"), "{}", message);
        prop_assert!(
            message.contains(field) || message.contains("not a calibration"),
            "{}",
            message
        );
        let ok = store.for_device("GPU-4567", h100);
        prop_assert!(ok.calibration.is_none());
        prop_assert_eq!(ok.ignored.len(), 1);
    }
}
