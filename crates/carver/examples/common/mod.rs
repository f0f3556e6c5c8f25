//! What several examples share: running `main` (`cli`: help, usage, errors, closed pipes), and
//! reading saved measurements (JSON, xz-compressed, gzipped or plain) and shape sets.
#![allow(dead_code)] // each example uses part of it

mod cli;
pub use cli::*;

use std::io::Read;
use std::path::Path;

/// A JSON file, decompressed first when its name ends in `.xz` (the stored runs) or `.gz`.
pub fn read_json(path: &Path) -> Result<serde_json::Value> {
    let file = std::fs::File::open(path).context(path.display())?;
    let mut reader = std::io::BufReader::new(file);
    let text = match path.extension().and_then(|e| e.to_str()) {
        Some("xz") => {
            let mut bytes = Vec::new();
            lzma_rs::xz_decompress(&mut reader, &mut bytes).context(path.display())?;
            String::from_utf8(bytes).context(path.display())?
        }
        Some("gz") => {
            let mut text = String::new();
            flate2::read::GzDecoder::new(reader)
                .read_to_string(&mut text)
                .context(path.display())?;
            text
        }
        _ => {
            let mut text = String::new();
            reader.read_to_string(&mut text).context(path.display())?;
            text
        }
    };
    serde_json::from_str(&text).context(path.display())
}

/// A non-negative integer field of a JSON object, or an error saying where it is missing.
pub fn field_u64(v: &serde_json::Value, key: &str, what: impl std::fmt::Display) -> Result<u64> {
    v[key]
        .as_u64()
        .context(format!("{what}: no whole number `{key}`"))
}

/// An array field of a JSON object, or an error saying where it is missing.
pub fn field_array<'a>(
    v: &'a serde_json::Value,
    key: &str,
    what: impl std::fmt::Display,
) -> Result<&'a Vec<serde_json::Value>> {
    v[key]
        .as_array()
        .context(format!("{what}: no array `{key}`"))
}

/// (M, N, K) of every shape in a shapes file: JSON in the form of `eval/dev-shapes.json`, or CSV
/// with a header and `name,M,N,K` rows (rows without three numbers are skipped).
pub fn shapes(path: &str) -> Result<Vec<(u64, u64, u64)>> {
    if path.ends_with(".json") {
        let v = read_json(Path::new(path))?;
        field_array(&v, "shapes", path)?
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let at = format!("{path}: shape {}", i + 1);
                Ok((
                    field_u64(s, "M", &at)?,
                    field_u64(s, "N", &at)?,
                    field_u64(s, "K", &at)?,
                ))
            })
            .collect()
    } else {
        let text = std::fs::read_to_string(path).context(path)?;
        Ok(text
            .lines()
            .skip(1)
            .filter_map(|line| {
                let f: Vec<u64> = line
                    .split(',')
                    .skip(1)
                    .filter_map(|x| x.parse().ok())
                    .collect();
                (f.len() == 3).then(|| (f[0], f[1], f[2]))
            })
            .collect())
    }
}
