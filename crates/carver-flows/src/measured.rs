//! Measured winners from the tuning database, reported next to the model's ranking.
//!
//! `carver recommend` never creates or repairs the database: it opens it read-only when it
//! exists and reports nothing when it does not.

use carver::MatmulTemplate;
use carver_arch::{Arch, Origin};
use carver_schema::MeasuredWinner;
use carver_tunedb::{Filter, TuneDb};

use crate::FlowError;

/// The fastest stored winner for `template` on a GPU like `arch`: the same physical GPU when
/// `arch` was detected live (by UUID), else any GPU with the same driver-reported name. Stored
/// results that cannot be read, or that are not believable on `arch` (a time under its roofline,
/// a winner that is not a configuration of the family: a database filled before these were
/// checked, or edited), are passed over; the returned warnings say which.
pub(crate) fn lookup(
    db: &TuneDb,
    template: &MatmulTemplate,
    arch: &Arch,
) -> Result<(Option<MeasuredWinner>, Vec<String>), FlowError> {
    let device = match &arch.origin {
        Origin::Live { uuid, .. } => uuid.clone(),
        _ => arch.gpu.name.clone(),
    };
    let filter = Filter {
        device: Some(device),
        target: Some(template.family.to_string()),
        shape: Some([template.m, template.n, template.k]),
        ..Filter::default()
    };
    let same_problem = |p: &carver_schema::TuneProblem| {
        p.batch == template.batch
            && p.dtype_a == template.dtype_a.as_str()
            && p.dtype_b == template.dtype_b.as_str()
            && p.dtype_c == template.dtype_c.as_str()
            && p.dtype_acc == template.dtype_acc.as_str()
            && p.layout_a == template.layout_a.as_str()
            && p.layout_b == template.layout_b.as_str()
    };
    let selection = db.query(&filter)?;
    let mut warnings: Vec<String> = selection
        .skipped
        .iter()
        .map(|s| format!("stored result {} cannot be read: {}", s.id, s.reason))
        .collect();
    let best = selection
        .records
        .into_iter()
        .filter(|s| {
            same_problem(&s.record.key.problem) && s.record.key.device.name == arch.gpu.name
        })
        .filter(
            |s| match crate::plausible::check_record_on(&s.record, arch) {
                Ok(()) => true,
                Err(reason) => {
                    warnings.push(format!("stored result {} is not shown: {reason}", s.id));
                    false
                }
            },
        )
        .map(|stored| stored.record)
        .filter_map(|r| r.winner_time_s().map(|t| (t, r)))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    let winner = best.map(|(time_s, r)| MeasuredWinner {
        config: r.winner.clone(),
        measured_time_us: time_s * 1e6,
        cublas_time_us: r.cublas_time_s.map(|t| t * 1e6),
        device_name: r.key.device.name.clone(),
        device_uuid: r.key.device.uuid.clone(),
        measured_at_unix_s: r.measured_at_unix_s,
        carver_version: r.key.carver_version.clone(),
    });
    Ok((winner, warnings))
}
