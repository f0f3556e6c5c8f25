//! Reading many shapes from a file: JSON in the form of `eval/dev-shapes.json` (`name`
//! optional) or CSV with M, N, K columns (header optional, `name` and `batch` columns allowed).

use std::path::Path;

use crate::FlowError;

/// One shape to answer, or the reason its row is unusable (the other rows still run).
#[derive(Debug, Clone, PartialEq)]
pub struct ShapeRow {
    /// 1-based line of the row in the file.
    pub line: usize,
    pub parsed: Result<ParsedShape, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ParsedShape {
    pub name: Option<String>,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub batch: u64,
}

impl ShapeRow {
    /// One shape given directly (not from a file).
    pub fn one(m: u64, n: u64, k: u64, batch: u64) -> Self {
        Self {
            line: 0,
            parsed: Ok(ParsedShape {
                name: None,
                m,
                n,
                k,
                batch,
            }),
        }
    }
}

impl ParsedShape {
    /// `MxNxK`, or the shape's name when it has one.
    pub fn label(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("{}x{}x{}", self.m, self.n, self.k))
    }
}

/// The rows of a shapes file; a bad row is reported in its place and the others still run.
pub fn read_shapes(path: &Path) -> Result<Vec<ShapeRow>, FlowError> {
    let text = std::fs::read_to_string(path).map_err(|source| FlowError::Io {
        action: "read shapes file",
        path: path.to_path_buf(),
        source,
    })?;
    let file_error = |reason: String| FlowError::ShapesFile {
        path: path.to_path_buf(),
        reason,
    };
    let looks_json = text.trim_start().starts_with(['{', '[']);
    let rows = if looks_json {
        parse_json(&text)
    } else {
        parse_csv(&text)
    }
    .map_err(file_error)?;
    if rows.is_empty() {
        return Err(file_error("lists no shapes".into()));
    }
    Ok(rows)
}

/// `MxNxK` (e.g. `4096x4096x4096`), each size a positive integer.
pub fn parse_mnk(text: &str) -> Result<[u64; 3], String> {
    let error = || {
        format!(
            "`{text}` is not a shape: expected MxNxK with positive integers, e.g. 4096x4096x4096"
        )
    };
    let sizes: Vec<u64> = text
        .split(['x', 'X'])
        .map(|part| part.trim().parse::<u64>().ok().filter(|&n| n > 0))
        .collect::<Option<_>>()
        .ok_or_else(error)?;
    sizes.try_into().map_err(|_| error())
}

fn size(v: Option<&serde_json::Value>, key: &str) -> Result<u64, String> {
    match v {
        None => Err(format!("missing `{key}`")),
        Some(x) => x
            .as_u64()
            .ok_or_else(|| format!("`{key}` = {x} is not a non-negative integer")),
    }
}

/// Lines on which each object of the shapes array starts (a small scanner: depth and strings).
fn object_lines(text: &str, depth_of_objects: usize) -> Vec<usize> {
    let (mut line, mut depth, mut in_str, mut escaped) = (1usize, 0usize, false, false);
    let mut out = Vec::new();
    for ch in text.chars() {
        if in_str {
            match (escaped, ch) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
        } else {
            match ch {
                '"' => in_str = true,
                '{' | '[' => {
                    depth += 1;
                    if ch == '{' && depth == depth_of_objects + 1 {
                        out.push(line);
                    }
                }
                '}' | ']' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        if ch == '\n' {
            line += 1;
        }
    }
    out
}

fn parse_json(text: &str) -> Result<Vec<ShapeRow>, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let not_a_list =
        || "expected an object with a `shapes` array (or a top-level array)".to_string();
    let (list, depth) = match &value {
        serde_json::Value::Array(a) => (a, 1),
        serde_json::Value::Object(o) => (
            o.get("shapes")
                .and_then(|s| s.as_array())
                .ok_or_else(not_a_list)?,
            2,
        ),
        _ => return Err(not_a_list()),
    };
    let lines = object_lines(text, depth);
    Ok(list
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let line = lines.get(i).copied().unwrap_or(0);
            let get = |k: &str| {
                item.get(k)
                    .or_else(|| item.get(k.to_ascii_lowercase().as_str()))
            };
            let parsed = (|| {
                if !item.is_object() {
                    return Err(format!("expected an object with M, N, K, got {item}"));
                }
                Ok(ParsedShape {
                    name: item
                        .get("name")
                        .and_then(|n| n.as_str())
                        .map(str::to_string),
                    m: size(get("M"), "M")?,
                    n: size(get("N"), "N")?,
                    k: size(get("K"), "K")?,
                    batch: match get("batch") {
                        None => 1,
                        v => size(v, "batch")?,
                    },
                })
            })();
            ShapeRow { line, parsed }
        })
        .collect())
}

fn parse_csv(text: &str) -> Result<Vec<ShapeRow>, String> {
    let mut columns: Option<Vec<String>> = None;
    let mut rows = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let cells: Vec<&str> = trimmed.split(',').map(str::trim).collect();
        if columns.is_none() {
            if cells.iter().any(|c| c.parse::<i128>().is_err()) {
                columns = Some(cells.iter().map(|c| c.to_ascii_lowercase()).collect());
                let cols = columns.as_ref().unwrap();
                for need in ["m", "n", "k"] {
                    if !cols.iter().any(|c| c == need) {
                        return Err(format!(
                            "line {line}: CSV header must have M, N and K columns (got {trimmed})"
                        ));
                    }
                }
                continue;
            }
            columns = Some(vec!["m".into(), "n".into(), "k".into()]);
        }
        let cols = columns.as_ref().unwrap();
        let cell = |name: &str| {
            cols.iter()
                .position(|c| c == name)
                .and_then(|i| cells.get(i).copied())
        };
        let num = |name: &str, default: Option<u64>| -> Result<u64, String> {
            match (cell(name), default) {
                (Some(s), _) if !s.is_empty() => s.parse::<u64>().map_err(|_| {
                    format!(
                        "{} = `{s}` is not a non-negative integer",
                        name.to_uppercase()
                    )
                }),
                (_, Some(d)) => Ok(d),
                _ => Err(format!("missing {}", name.to_uppercase())),
            }
        };
        let parsed = (|| {
            if cells.len() < cols.len() {
                return Err(format!(
                    "expected {} columns, got {}",
                    cols.len(),
                    cells.len()
                ));
            }
            Ok(ParsedShape {
                name: cell("name").filter(|s| !s.is_empty()).map(str::to_string),
                m: num("m", None)?,
                n: num("n", None)?,
                k: num("k", None)?,
                batch: num("batch", Some(1))?,
            })
        })();
        rows.push(ShapeRow { line, parsed });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mnk_parses_and_bad_ones_say_what_is_expected() {
        assert_eq!(parse_mnk("4096x4096x4096"), Ok([4096, 4096, 4096]));
        assert_eq!(parse_mnk("1X2x3"), Ok([1, 2, 3]));
        for bad in ["", "4096", "1x2", "1x2x3x4", "0x1x1", "ax1x1", "-1x1x1"] {
            assert!(
                parse_mnk(bad).unwrap_err().contains("expected MxNxK"),
                "{bad}"
            );
        }
    }

    #[test]
    fn json_rows_carry_their_lines() {
        let text = "{\n \"shapes\": [\n  {\"name\": \"a\", \"M\": 1, \"N\": 2, \"K\": 3},\n  {\"M\": -1, \"N\": 2, \"K\": 3}\n ]\n}";
        let rows = parse_json(text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].line, 3);
        assert_eq!(rows[0].parsed.as_ref().unwrap().name.as_deref(), Some("a"));
        assert_eq!(rows[1].line, 4);
        assert!(rows[1].parsed.as_ref().unwrap_err().contains("`M`"));
    }

    #[test]
    fn csv_with_and_without_header() {
        let rows = parse_csv("M,N,K,name\n1,2,3,x\n4,five,6,y\n").unwrap();
        assert_eq!(rows[0].parsed.as_ref().unwrap().k, 3);
        assert_eq!(rows[1].line, 3);
        assert!(rows[1].parsed.as_ref().unwrap_err().contains("N = `five`"));
        let rows = parse_csv("7,8,9\n").unwrap();
        assert_eq!(rows[0].parsed.as_ref().unwrap().m, 7);
    }
}
