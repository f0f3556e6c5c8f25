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

/// Lines on which each item of the shapes list starts, whatever the item is (an object, a
/// number, a string, an array), so a bad item is reported where it stands. `text` has been
/// parsed already, so a small scanner suffices: it tracks nesting and strings, and in the object
/// form which top-level key an array belongs to. `wrapped`: the list is the `shapes` array of a
/// top-level object, not the top-level array.
fn item_lines(text: &str, wrapped: bool) -> Vec<usize> {
    let list_depth = if wrapped { 2 } else { 1 };
    let (mut line, mut depth) = (1usize, 0usize);
    let (mut in_str, mut escaped) = (false, false);
    // The last string closed at depth 1: in the object form, the key of the value that follows.
    let (mut string, mut last_key) = (String::new(), String::new());
    let (mut in_list, mut expect_item) = (false, false);
    let mut out = Vec::new();
    for ch in text.chars() {
        if in_str {
            match (escaped, ch) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => {
                    in_str = false;
                    if depth == 1 {
                        last_key = std::mem::take(&mut string);
                    }
                }
                _ => string.push(ch),
            }
        } else if !ch.is_whitespace() {
            // Any character that is not a separator or a closer starts a value.
            if in_list && depth == list_depth && expect_item && !matches!(ch, ',' | ']' | '}') {
                out.push(line);
                expect_item = false;
            }
            match ch {
                '"' => {
                    in_str = true;
                    string.clear();
                }
                '{' | '[' => {
                    depth += 1;
                    let is_list = depth == list_depth && (!wrapped || last_key == "shapes");
                    if ch == '[' && is_list {
                        // A later `shapes` key wins, as it does for the parser.
                        out.clear();
                        (in_list, expect_item) = (true, true);
                    }
                }
                '}' | ']' => {
                    if depth == list_depth {
                        in_list = false;
                    }
                    depth = depth.saturating_sub(1);
                }
                ',' if in_list && depth == list_depth => expect_item = true,
                _ => {}
            }
        }
        if ch == '\n' {
            line += 1;
        }
    }
    out
}

/// Keys that would change the problem, which a shapes file cannot set per row: silently
/// ignoring them would answer a different problem than the user asked for.
const RUN_WIDE_KEYS: [&str; 10] = [
    "dtype",
    "dtype_a",
    "dtype_b",
    "dtype_c",
    "dtype_acc",
    "out_dtype",
    "acc_dtype",
    "layout",
    "target",
    "arch",
];

/// Why a row's (or a CSV header's) key `key` cannot be used.
fn run_wide_key(key: &str, value: Option<&str>) -> String {
    let shown = value.map(|v| format!(" = {v:?}")).unwrap_or_default();
    let refusal = format!(
        "`{key}`{shown} cannot be set per row of a shapes file (row keys: name, M, N, K, batch)"
    );
    let lower = key.to_ascii_lowercase();
    let flag = match lower.as_str() {
        "dtype" | "dtype_a" | "dtype_b" => "--dtype",
        "dtype_c" | "out_dtype" => "--out-dtype",
        "dtype_acc" | "acc_dtype" => "--acc-dtype",
        other => return format!("{refusal}; pass --{other} for the whole run"),
    };
    // A value that is no dtype at all is worth saying too, with the accepted ones.
    match value.map(|v| v.parse::<carver::DType>()) {
        Some(Err(e)) => format!("{refusal}; pass {flag} for the whole run; {e}"),
        _ => format!("{refusal}; pass {flag} for the whole run"),
    }
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
    let lines = item_lines(text, depth == 2);
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
                let Some(fields) = item.as_object() else {
                    return Err(format!(
                        "expected an object with M, N, K (like {{\"M\": 4096, \"N\": 4096, \
                         \"K\": 4096}}), got {item}"
                    ));
                };
                if let Some((key, value)) = fields
                    .iter()
                    .find(|(k, _)| RUN_WIDE_KEYS.contains(&k.to_ascii_lowercase().as_str()))
                {
                    let text = value
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or(value.to_string());
                    return Err(run_wide_key(key, Some(&text)));
                }
                let name = match item.get("name") {
                    None | Some(serde_json::Value::Null) => None,
                    Some(serde_json::Value::String(n)) => Some(n.clone()),
                    Some(other) => return Err(format!("`name` = {other} is not a string")),
                };
                Ok(ParsedShape {
                    name,
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
            // A header has no numbers; a first row with one bad number is a row, reported as
            // such, not a header without M, N and K.
            if cells.iter().all(|c| c.parse::<f64>().is_err()) {
                columns = Some(cells.iter().map(|c| c.to_ascii_lowercase()).collect());
                let cols = columns.as_ref().unwrap();
                if let Some(col) = cols.iter().find(|c| RUN_WIDE_KEYS.contains(&c.as_str())) {
                    return Err(format!("line {line}: column {}", run_wide_key(col, None)));
                }
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
    fn every_item_carries_its_own_line_whatever_it_is() {
        let text = "{\n \"about\": [{\"M\": 9}, \"x\"],\n \"shapes\": [\n  1,\n  \"x\",\n  \
                    [],\n  null, {\"M\": 1,\n \"N\": 2, \"K\": 3},\n  -4.5e3\n ]\n}";
        let rows = parse_json(text).unwrap();
        let lines: Vec<usize> = rows.iter().map(|r| r.line).collect();
        assert_eq!(lines, [4, 5, 6, 7, 7, 9]);
        assert!(rows[0].parsed.as_ref().unwrap_err().contains("got 1"));
        assert_eq!(rows[4].parsed.as_ref().unwrap().k, 3);
        let rows = parse_json("[\n\"a[{\\\"\",\n {\"M\": 1, \"N\": 1, \"K\": 1}]").unwrap();
        assert_eq!(rows.iter().map(|r| r.line).collect::<Vec<_>>(), [2, 3]);
    }

    #[test]
    fn problem_settings_cannot_hide_in_a_row() {
        let rows = parse_json(r#"[{"M": 1, "N": 1, "K": 1, "dtype": "banana"}]"#).unwrap();
        let err = rows[0].parsed.as_ref().unwrap_err();
        assert!(err.contains("`dtype` = \"banana\""), "{err}");
        assert!(err.contains("--dtype"), "{err}");
        assert!(err.contains("accepted: f16, bf16"), "{err}");
        let rows = parse_json(r#"[{"M": 1, "N": 1, "K": 1, "Layout": "rc"}]"#).unwrap();
        assert!(rows[0].parsed.as_ref().unwrap_err().contains("--layout"));
        let rows = parse_json(r#"[{"M": 1, "N": 1, "K": 1, "name": 7}]"#).unwrap();
        assert!(rows[0].parsed.as_ref().unwrap_err().contains("`name` = 7"));
        // Other keys are the file's own notes and are left alone.
        let rows = parse_json(r#"[{"M": 1, "N": 1, "K": 1, "flops": 2}]"#).unwrap();
        assert!(rows[0].parsed.is_ok());
        let err = parse_csv("M,N,K,dtype\n1,2,3,f16\n").unwrap_err();
        assert!(err.contains("line 1: column `dtype`"), "{err}");
    }

    #[test]
    fn csv_with_and_without_header() {
        let rows = parse_csv("M,N,K,name\n1,2,3,x\n4,five,6,y\n").unwrap();
        assert_eq!(rows[0].parsed.as_ref().unwrap().k, 3);
        assert_eq!(rows[1].line, 3);
        assert!(rows[1].parsed.as_ref().unwrap_err().contains("N = `five`"));
        let rows = parse_csv("7,8,9\n").unwrap();
        assert_eq!(rows[0].parsed.as_ref().unwrap().m, 7);
        // One bad cell in a first row without a header is that row's error.
        for (text, why) in [("64,64,1.5\n", "K = `1.5`"), ("64,abc,64\n", "N = `abc`")] {
            let rows = parse_csv(text).unwrap();
            assert_eq!(rows[0].line, 1);
            assert!(rows[0].parsed.as_ref().unwrap_err().contains(why), "{text}");
        }
    }
}
