//! The layering ARCHITECTURE.md promises, checked on the sources: no import cycles between the
//! files of a crate, a CLI that only parses, calls a flow and renders, and a schema crate that
//! depends on nothing of carver's; and every test or function it names still exists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The files below `dir` whose extension is one of `extensions`.
fn files_with(dir: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_with(&path, extensions, out);
        } else if path
            .extension()
            .is_some_and(|e| extensions.iter().any(|x| e == *x))
        {
            out.push(path);
        }
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    files_with(dir, &["rs"], out);
}

/// `a/b.rs` and `a/b/mod.rs` -> `a::b`; `lib.rs` and `main.rs` -> `` (the crate root).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    parts.join("::")
}

/// The code before a file's unit tests (tests may import anything), without comment lines: a
/// doc link to another module (`[`crate::policy::every_config`]`) is not an import.
fn code_of(text: &str) -> String {
    let code = text
        .find("#[cfg(test)]\nmod tests")
        .map_or(text, |i| &text[..i]);
    code.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::`, `super::` and `self::` path in `code`, resolved to the longest module of
/// `modules` it names.
fn imports(module: &str, code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue;
            }
            let path: String = code[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let mut parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
            let mut base: Vec<&str> = if module.is_empty() {
                Vec::new()
            } else {
                module.split("::").collect()
            };
            match parts.first() {
                Some(&"crate") => base.clear(),
                Some(&"self") => {}
                _ => {
                    while parts.first() == Some(&"super") {
                        base.pop();
                        parts.remove(0);
                    }
                    parts.insert(0, "super");
                }
            }
            parts.remove(0);
            for len in (0..=parts.len()).rev() {
                let candidate = base
                    .iter()
                    .chain(&parts[..len])
                    .copied()
                    .collect::<Vec<_>>()
                    .join("::");
                if modules.contains(&candidate) {
                    out.insert(candidate);
                    break;
                }
            }
        }
    }
    out
}

fn is_ancestor(a: &str, b: &str) -> bool {
    a.is_empty() || b.starts_with(&format!("{a}::"))
}

/// Cycles among the files of one crate's `src`, ignoring a module and its own descendants
/// (a `mod.rs` re-exporting its children is not a cycle).
fn cycles(src: &Path) -> Vec<Vec<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let texts: BTreeMap<String, String> = files
        .iter()
        .map(|f| (module_of(src, f), std::fs::read_to_string(f).unwrap()))
        .collect();
    let modules: BTreeSet<String> = texts.keys().cloned().collect();
    let edges: BTreeMap<&str, BTreeSet<String>> = texts
        .iter()
        .map(|(m, t)| {
            let to = imports(m, &code_of(t), &modules)
                .into_iter()
                .filter(|o| o != m && !is_ancestor(m, o) && !is_ancestor(o, m))
                .collect();
            (m.as_str(), to)
        })
        .collect();
    // A cycle exists where a module reaches itself; report each module that does, with the
    // path back.
    let mut found = Vec::new();
    for start in edges.keys() {
        let mut stack = vec![(start.to_string(), vec![start.to_string()])];
        let mut seen = BTreeSet::new();
        while let Some((at, path)) = stack.pop() {
            for next in &edges[at.as_str()] {
                if next == start {
                    found.push(path.clone());
                } else if seen.insert(next.clone()) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    found
}

#[test]
fn no_crate_has_an_import_cycle_between_its_files() {
    let crates = workspace().join("crates");
    let mut all = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap().flatten() {
        let src = entry.path().join("src");
        if src.is_dir() {
            for cycle in cycles(&src) {
                all.push(format!(
                    "{}: {}",
                    entry.file_name().to_string_lossy(),
                    cycle.join(" -> ")
                ));
            }
        }
    }
    assert!(all.is_empty(), "import cycles:\n{}", all.join("\n"));
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    std::fs::write(src.join("b.rs"), "use super::a::A;\npub struct B;\n").unwrap();
    assert!(!cycles(src).is_empty());
    std::fs::write(src.join("b.rs"), "pub struct B;\n").unwrap();
    assert!(cycles(src).is_empty());
}

#[test]
fn cli_modules_parse_call_a_flow_and_render() {
    let mut files = Vec::new();
    rust_files(&workspace().join("crates/carver-cli/src"), &mut files);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.display();
        // The model, the GPU and the databases are reached through carver-flows only.
        for reach in [
            "carver::cost",
            "carver::policy",
            "recommend_hints",
            "carver_gpu",
            "carver_arch",
            "TuneDb",
        ] {
            assert!(!text.contains(reach), "{name} uses `{reach}`");
        }
        let lines = text.lines().count();
        assert!(
            lines <= 420,
            "{name} has {lines} lines; the CLI only parses and renders"
        );
    }
}

#[test]
fn the_python_package_reaches_the_model_through_the_flows() {
    let mut files = Vec::new();
    rust_files(&workspace().join("crates/carver-py/src"), &mut files);
    assert!(!files.is_empty(), "crates/carver-py/src has no Rust files");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.display();
        // carver-arch is used for its error type only (to tell an unknown GPU apart).
        for reach in [
            "carver::cost",
            "carver::policy",
            "recommend_hints",
            "predict_native",
            "carver_gpu",
            "TuneDb",
            "HardwareDb",
        ] {
            assert!(!text.contains(reach), "{name} uses `{reach}`");
        }
    }
}

#[test]
fn the_schema_crate_depends_on_serde_only() {
    let manifest =
        std::fs::read_to_string(workspace().join("crates/carver-schema/Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .unwrap_or("");
    let names: Vec<&str> = deps
        .lines()
        .filter_map(|l| l.split(['.', '=', ' ']).next())
        .filter(|n| !n.trim().is_empty() && !n.starts_with('#'))
        .collect();
    assert!(
        names.iter().all(|n| *n == "serde" || *n == "serde_json"),
        "carver-schema depends on {names:?}"
    );
}

/// Long `snake_case` names between backticks in `text`: the names a document cites (tests,
/// functions, fields, examples), not prose.
fn cited_names(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            s.len() >= 12
                && s.starts_with(|c: char| c.is_ascii_lowercase())
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                && s.contains('_')
        })
        .map(str::to_owned)
        .collect()
}

/// Whether `source` defines `name`: a function, a field or a Python function.
fn defines(source: &str, name: &str) -> bool {
    [
        format!("fn {name}("),
        format!("fn {name}<"),
        format!("def {name}("),
        format!("{name}: "),
    ]
    .iter()
    .any(|pattern| source.contains(pattern.as_str()))
}

/// A test, function, field or example that ARCHITECTURE.md names still exists: an invariant
/// that names its test must not name one that was renamed or removed.
#[test]
fn every_name_architecture_md_cites_exists() {
    let root = workspace();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut files = Vec::new();
    files_with(&root.join("crates"), &["rs", "py"], &mut files);
    files_with(&root.join("benches"), &["rs", "py"], &mut files);
    let sources: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
            (stem, std::fs::read_to_string(f).unwrap_or_default())
        })
        .collect();
    let missing: Vec<String> = cited_names(&text)
        .into_iter()
        .filter(|name| {
            !sources
                .iter()
                .any(|(stem, source)| stem == name || defines(source, name))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md cites names no source defines: {missing:?}"
    );
}

#[test]
fn the_citation_check_reads_backticked_names_only() {
    let names = cited_names("test `a_test_that_exists` and `Short` or `not a_name` `x_y`");
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["a_test_that_exists"]
    );
    assert!(defines("fn a_test_that_exists() {}", "a_test_that_exists"));
    assert!(!defines(
        "fn a_test_that_exists_too() {}",
        "a_test_that_exists"
    ));
}
