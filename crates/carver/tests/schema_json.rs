//! Real recommendations and the shipped H100, converted to their JSON form (carver-schema) and
//! pinned: a change to the model's types that would move the JSON fails here.

use carver::{DType, Family, MatmulTemplate, recommend_hints};
use carver_arch::HardwareDb;
use carver_schema::{
    ArchDescription, ArchReport, Hint, ProblemSpec, RecommendOutput, RecommendResult,
    SCHEMA_VERSION, ShapeSpec,
};

/// The document `carver recommend --format json` prints for one shape on one GPU.
fn recommend_document(arch_key: &str, template: MatmulTemplate, topk: usize) -> RecommendOutput {
    let db = HardwareDb::embedded().unwrap();
    let arch = db.get(arch_key).unwrap();
    let hints = recommend_hints(&template, arch, carver::TopK::new(topk).unwrap()).unwrap();
    RecommendOutput {
        schema_version: SCHEMA_VERSION,
        carver_version: "[version]".into(),
        results: vec![RecommendResult {
            shape: ShapeSpec {
                name: None,
                m: template.m,
                n: template.n,
                k: template.k,
                batch: template.batch,
            },
            arch: arch.key().into(),
            target: template.family.to_string(),
            problem: ProblemSpec {
                dtype_a: template.dtype_a.to_string(),
                dtype_b: template.dtype_b.to_string(),
                dtype_c: template.dtype_c.to_string(),
                dtype_acc: template.dtype_acc.to_string(),
                layout_a: template.layout_a.to_string(),
                layout_b: template.layout_b.to_string(),
            },
            hints: hints.iter().map(Hint::from).collect(),
            error: None,
            measured: None,
            // Not timed: wall time differs from run to run (the CLI measures it).
            elapsed_us: 0.0,
        }],
    }
}

#[test]
fn h100_triton_square_4096_as_json() {
    let t = MatmulTemplate::new(4096, 4096, 4096).with_family(Family::Triton);
    insta::assert_json_snapshot!(recommend_document("h100", t, 2));
}

#[test]
fn h100_sm90_unaligned_as_json() {
    // Both operands repacked: `repack_us` appears in the breakdown.
    let t = MatmulTemplate::new(333, 777, 999)
        .with_dtype(DType::Bf16)
        .with_family(Family::CudaSm90);
    insta::assert_json_snapshot!(recommend_document("h100", t, 1));
}

#[test]
fn a100_generic_as_json() {
    // mma.sync, split-K and the generic family's native dictionary.
    let t = MatmulTemplate::new(1537, 2049, 3001).with_family(Family::Generic);
    insta::assert_json_snapshot!(recommend_document("a100", t, 1));
}

#[test]
fn embedded_h100_as_json() {
    let db = HardwareDb::embedded().unwrap();
    let h100 = db.get("h100").unwrap();
    insta::assert_json_snapshot!(ArchReport {
        schema_version: SCHEMA_VERSION,
        arch: ArchDescription::from(h100),
    });
}
