//! What several examples read: saved measurements (JSON, gzipped or not) and shape sets.
#![allow(dead_code)] // each example uses part of it

use std::io::Read;
use std::path::Path;

/// A JSON file, gunzipped first when its name ends in `.gz`.
pub fn read_json(path: &Path) -> serde_json::Value {
    let mut text = String::new();
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if path.extension().is_some_and(|e| e == "gz") {
        flate2::read::GzDecoder::new(file)
            .read_to_string(&mut text)
            .unwrap();
    } else {
        std::io::BufReader::new(file)
            .read_to_string(&mut text)
            .unwrap();
    }
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// (M, N, K) of every shape in a shapes file: JSON in the form of `eval/dev-shapes.json`, or CSV
/// with a header and `name,M,N,K` rows.
pub fn shapes(path: &str) -> Vec<(u64, u64, u64)> {
    if path.ends_with(".json") {
        read_json(Path::new(path))["shapes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let d = |k: &str| s[k].as_u64().unwrap();
                (d("M"), d("N"), d("K"))
            })
            .collect()
    } else {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        text.lines()
            .skip(1)
            .filter_map(|line| {
                let f: Vec<u64> = line
                    .split(',')
                    .skip(1)
                    .filter_map(|x| x.parse().ok())
                    .collect();
                (f.len() == 3).then(|| (f[0], f[1], f[2]))
            })
            .collect()
    }
}
