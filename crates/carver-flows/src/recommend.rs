//! `recommend`: rank configurations with the cost model, for many shapes on several GPUs, and
//! report a measured winner from the tuning database next to each ranking.

use std::time::Instant;

use carver::{DType, Family, Layout, MatmulTemplate, TopK, recommend_hints};
use carver_schema::{ProblemSpec, RecommendOutput, RecommendResult, SCHEMA_VERSION, ShapeSpec};

use crate::archs::{self, ArchChoice};
use crate::shapes::{ParsedShape, ShapeRow};
use crate::{FlowError, Locations, Progress};

/// What to rank: the same problem kind for every shape and GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct RecommendRequest {
    pub archs: Vec<ArchChoice>,
    pub shapes: Vec<ShapeRow>,
    /// Input dtype of A and B.
    pub dtype: DType,
    /// Output dtype; the usual one for `dtype` when unset.
    pub out_dtype: Option<DType>,
    /// Accumulator dtype; the usual one for `dtype` when unset.
    pub acc_dtype: Option<DType>,
    /// Storage order of A and B.
    pub layouts: (Layout, Layout),
    pub family: Family,
    pub topk: TopK,
}

impl RecommendRequest {
    /// One shape, f16 row-major, on one database GPU, for `family`.
    pub fn new(arch: &str, family: Family, m: u64, n: u64, k: u64) -> Self {
        Self {
            archs: vec![ArchChoice::parse(arch)],
            shapes: vec![ShapeRow::one(m, n, k, 1)],
            dtype: DType::F16,
            out_dtype: None,
            acc_dtype: None,
            layouts: (Layout::Row, Layout::Row),
            family,
            topk: TopK::DEFAULT,
        }
    }

    /// The template of one shape.
    pub fn template(&self, shape: &ParsedShape) -> MatmulTemplate {
        template(
            shape,
            self.dtype,
            self.out_dtype,
            self.acc_dtype,
            self.layouts,
            self.family,
        )
    }
}

/// The template of one shape: `dtype` inputs with the usual output and accumulator unless given.
pub(crate) fn template(
    shape: &ParsedShape,
    dtype: DType,
    out_dtype: Option<DType>,
    acc_dtype: Option<DType>,
    layouts: (Layout, Layout),
    family: Family,
) -> MatmulTemplate {
    let mut t = MatmulTemplate::new(shape.m, shape.n, shape.k)
        .with_dtype(dtype)
        .with_batch(shape.batch)
        .with_layouts(layouts.0, layouts.1)
        .with_family(family);
    if let Some(c) = out_dtype {
        t.dtype_c = c;
    }
    if let Some(acc) = acc_dtype {
        t.dtype_acc = acc;
    }
    t
}

/// Storage orders of A then B as two letters, r (row-major) or c (column-major): `rr`, `rc`,
/// `cr`, `cc` (any case). The form every front end takes (`--layout`, `layout=`).
pub fn parse_layouts(text: &str) -> Result<(Layout, Layout), String> {
    let letters: Vec<char> = text.chars().collect();
    let one = |c: char| match c.to_ascii_lowercase() {
        'r' => Ok(Layout::Row),
        'c' => Ok(Layout::Col),
        _ => Err(format!(
            "layout `{text}`: use two letters, r (row-major) or c (column-major), for A then B, like `rr` or `rc`"
        )),
    };
    if letters.len() != 2 {
        return Err(format!(
            "layout `{text}`: use two letters, r or c, for A then B (like `rr` or `rc`)"
        ));
    }
    Ok((one(letters[0])?, one(letters[1])?))
}

/// A row of the shapes that could not be read; the other rows were answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedRow {
    /// 1-based line in the shapes file.
    pub line: usize,
    pub reason: String,
}

/// A (shape, GPU) that got no hints: its `error` in the output, and where the shape came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedShape {
    /// 1-based line in the shapes file (0 for a shape given directly).
    pub line: usize,
    /// The shape's name, or `MxNxK`.
    pub shape: String,
    pub arch: String,
    pub error: String,
}

/// The answer: the versioned document, the rows that were skipped and the shapes that failed.
#[derive(Clone, Debug, PartialEq)]
pub struct Recommendation {
    pub output: RecommendOutput,
    pub skipped_rows: Vec<SkippedRow>,
    pub failures: Vec<FailedShape>,
}

impl Recommendation {
    /// Whether every row was read and every (shape, GPU) got hints.
    pub fn is_complete(&self) -> bool {
        self.skipped_rows.is_empty() && self.failures.is_empty()
    }
}

/// Ranks every shape on every GPU. A shape that cannot be answered (bad size, unsupported
/// dtype) gets its `error` in the output; only unusable inputs (an unknown GPU, an unreadable
/// database) end the flow. Never writes to the cache directory.
pub fn recommend(
    loc: &Locations,
    request: &RecommendRequest,
    progress: &dyn Progress,
) -> Result<Recommendation, FlowError> {
    let archs = archs::resolve(loc, &request.archs, progress)?;
    // Read-only: recommending never creates, repairs or migrates the tuning database, and a
    // database it cannot read costs only the measured winners.
    let tuned = match loc.cache_dir_if_any() {
        Some(dir) => carver_tunedb::TuneDb::open_read_only(&dir).unwrap_or_else(|e| {
            progress.warning(&format!(
                "measured winners from the tuning database are not shown: {e}"
            ));
            None
        }),
        None => None,
    };
    let mut results = Vec::new();
    let mut skipped_rows = Vec::new();
    let mut failures = Vec::new();
    for row in &request.shapes {
        let shape = match &row.parsed {
            Ok(s) => s,
            Err(reason) => {
                skipped_rows.push(SkippedRow {
                    line: row.line,
                    reason: reason.clone(),
                });
                continue;
            }
        };
        let template = request.template(shape);
        for arch in &archs {
            let start = Instant::now();
            let outcome = recommend_hints(&template, arch, request.topk);
            let elapsed_us = start.elapsed().as_secs_f64() * 1e6;
            let measured = match (&tuned, &outcome) {
                (Some(db), Ok(_)) => match crate::measured::lookup(db, &template, arch) {
                    Ok((winner, warnings)) => {
                        for warning in warnings {
                            progress.warning(&warning);
                        }
                        winner
                    }
                    Err(e) => {
                        progress.warning(&format!("no measured winner for this shape: {e}"));
                        None
                    }
                },
                _ => None,
            };
            let (hints, error) = match outcome {
                Ok(h) => (h.iter().map(Into::into).collect(), None),
                Err(e) => {
                    failures.push(FailedShape {
                        line: row.line,
                        shape: shape.label(),
                        arch: arch.key().to_string(),
                        error: e.to_string(),
                    });
                    (Vec::new(), Some(e.to_string()))
                }
            };
            results.push(RecommendResult {
                shape: shape_spec(shape),
                arch: arch.key().to_string(),
                target: request.family.to_string(),
                problem: problem_spec(&template),
                hints,
                error,
                measured,
                elapsed_us,
            });
        }
    }
    Ok(Recommendation {
        output: RecommendOutput {
            schema_version: SCHEMA_VERSION,
            carver_version: env!("CARGO_PKG_VERSION").to_string(),
            results,
        },
        skipped_rows,
        failures,
    })
}

pub(crate) fn shape_spec(shape: &ParsedShape) -> ShapeSpec {
    ShapeSpec {
        name: shape.name.clone(),
        m: shape.m,
        n: shape.n,
        k: shape.k,
        batch: shape.batch,
    }
}

fn problem_spec(t: &MatmulTemplate) -> ProblemSpec {
    ProblemSpec {
        dtype_a: t.dtype_a.to_string(),
        dtype_b: t.dtype_b.to_string(),
        dtype_c: t.dtype_c.to_string(),
        dtype_acc: t.dtype_acc.to_string(),
        layout_a: t.layout_a.to_string(),
        layout_b: t.layout_b.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Silent;

    fn loc() -> (tempfile::TempDir, Locations) {
        let dir = tempfile::tempdir().unwrap();
        let loc = Locations {
            hardware_db: None,
            cache_dir: Some(dir.path().to_path_buf()),
        };
        (dir, loc)
    }

    #[test]
    fn answers_each_shape_on_each_gpu_and_reports_bad_ones_in_place() {
        let (_dir, loc) = loc();
        let mut request = RecommendRequest::new("h100", Family::Triton, 4096, 4096, 4096);
        request.archs.push(ArchChoice::parse("a100"));
        request.shapes.push(ShapeRow::one(0, 1, 1, 1));
        request.shapes.push(ShapeRow {
            line: 3,
            parsed: Err("missing `K`".into()),
        });
        let answer = recommend(&loc, &request, &Silent).unwrap();
        let results = &answer.output.results;
        assert_eq!(results.len(), 4);
        assert_eq!(results[0].hints.len(), 8);
        assert!(results[1].arch.starts_with("a100"), "{}", results[1].arch);
        assert!(results[2].error.as_deref().unwrap().contains("at least 1"));
        assert_eq!(answer.failures.len(), 2);
        assert_eq!(answer.failures[0].shape, "0x1x1");
        assert_eq!(
            answer.skipped_rows,
            vec![SkippedRow {
                line: 3,
                reason: "missing `K`".into()
            }]
        );
        assert!(!answer.is_complete());
    }

    #[test]
    fn layouts_are_two_letters_and_errors_say_what_is_accepted() {
        assert_eq!(parse_layouts("rc"), Ok((Layout::Row, Layout::Col)));
        assert_eq!(parse_layouts("CR"), Ok((Layout::Col, Layout::Row)));
        for bad in ["r", "rrr", "rx", ""] {
            let e = parse_layouts(bad).unwrap_err();
            assert!(e.contains(&format!("`{bad}`")) && e.contains("`rr`"), "{e}");
        }
    }

    #[test]
    fn an_unknown_gpu_ends_the_flow() {
        let (_dir, loc) = loc();
        let request = RecommendRequest::new("h1000", Family::Generic, 64, 64, 64);
        assert!(matches!(
            recommend(&loc, &request, &Silent),
            Err(FlowError::Arch(_))
        ));
    }
}
