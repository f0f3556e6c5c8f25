//! Tables and reports of `carver cache ...`. Every text that comes from the database or an
//! imported file goes through [`escape`] before it reaches the terminal.

use std::path::Path;

use carver_schema::{
    CacheClear, CacheList, CacheRecover, ConflictResolution, ImportReport, SkippedRow,
    StoredTuneRecord, TuneKey,
};
use carver_tunedb::Filter;

use crate::output::{escape, table};
use carver_flows::cache::describe_filter;

/// Damaged rows a command left out, one warning each on standard error.
pub fn warn_skipped(skipped: &[SkippedRow]) {
    for s in skipped {
        eprintln!(
            "warning: stored result {} cannot be read and was skipped: {} (`carver cache remove \
             {}` deletes it)",
            s.id,
            escape(&s.reason),
            s.id
        );
    }
}

/// `carver cache list` as a table.
pub fn describe_list(list: &CacheList, filter: &Filter) -> String {
    if list.results.is_empty() {
        return format!(
            "no stored tuning results{}\ndatabase: {}\n",
            escape(&describe_filter(filter)),
            escape(&list.database)
        );
    }
    let rows: Vec<Vec<String>> = list
        .results
        .iter()
        .map(|e| {
            let p = &e.key.problem;
            vec![
                e.id.to_string(),
                escape(&e.key.device.name).into_owned(),
                escape(&e.key.target).into_owned(),
                format!("{}x{}x{}", p.m, p.n, p.k),
                p.batch.to_string(),
                dtypes(&e.key),
                escape(&format!("{},{}", p.layout_a, p.layout_b)).into_owned(),
                seconds(e.winner_time_s),
                e.cublas_time_s.map_or("-".into(), seconds),
                match e.failed_candidates {
                    0 => e.candidates.to_string(),
                    failed => format!("{} ({failed} failed)", e.candidates),
                },
                utc_date(e.measured_at_unix_s),
            ]
        })
        .collect();
    let mut text = table(
        &[
            "ID",
            "DEVICE",
            "TARGET",
            "MxNxK",
            "BATCH",
            "DTYPES",
            "LAYOUT",
            "WINNER",
            "CUBLAS",
            "TRIED",
            "MEASURED (UTC)",
        ],
        &rows,
    );
    text.push_str(&format!(
        "{} results in {}\n",
        list.results.len(),
        escape(&list.database)
    ));
    text
}

/// One result in full, for `carver cache show`.
pub fn describe(stored: &StoredTuneRecord) -> String {
    let r = &stored.record;
    let k = &r.key;
    let p = &k.problem;
    let winner_time = r.winner_time_s().unwrap_or(f64::NAN);
    let cublas = r.cublas_time_s.map_or("not measured".into(), |t| {
        format!(
            "{} (winner at {:.2}x cuBLAS speed)",
            seconds(t),
            t / winner_time
        )
    });
    let mut text = format!(
        "result {id}\n\
         \x20 device    {name} ({uuid}, driver {driver})\n\
         \x20 target    {target}, kernel source {hash}, carver {version}\n\
         \x20 problem   {m}x{n}x{kk}, batch {batch}, {dtypes}, layouts {la},{lb}\n\
         \x20 winner    {winner_time}  {winner}\n\
         \x20 cuBLAS    {cublas}\n\
         \x20 measured  {date} UTC  {method}\n\
         \x20 candidates (* = winner):\n",
        id = stored.id,
        name = escape(&k.device.name),
        uuid = escape(&k.device.uuid),
        driver = escape(&k.device.driver_version),
        target = escape(&k.target),
        hash = escape(&k.kernel_hash),
        version = escape(&k.carver_version),
        m = p.m,
        n = p.n,
        kk = p.k,
        batch = p.batch,
        dtypes = dtypes(k),
        la = escape(&p.layout_a),
        lb = escape(&p.layout_b),
        winner_time = seconds(winner_time),
        winner = escape(&r.winner.to_string()),
        date = utc_date(r.measured_at_unix_s),
        method = escape(&r.method.to_string()),
    );
    let mut candidates: Vec<_> = r.candidates.iter().collect();
    candidates.sort_by_key(|c| c.model_rank);
    let rows: Vec<Vec<String>> = candidates
        .iter()
        .map(|c| {
            let mark = if c.config == r.winner && c.failure.is_none() {
                "*"
            } else {
                ""
            };
            let config = escape(&c.config.to_string()).into_owned();
            vec![
                format!("{mark}{}", c.model_rank),
                seconds(c.predicted_time_s),
                c.measured_time_s.map_or("-".into(), seconds),
                c.measured_time_s
                    .map_or("-".into(), |t| format!("{:.2}x", t / winner_time)),
                match &c.failure {
                    Some(failure) => format!("{config}  FAILED: {}", escape(failure)),
                    None => config,
                },
            ]
        })
        .collect();
    let candidate_table = table(
        &["RANK", "PREDICTED", "MEASURED", "VS WINNER", "CONFIG"],
        &rows,
    );
    for line in candidate_table.lines() {
        text.push_str("    ");
        text.push_str(line);
        text.push('\n');
    }
    text
}

pub fn describe_import(file: &Path, report: &ImportReport) -> String {
    let mut text = format!(
        "imported {}: {} new, {} replaced a slower result, {} kept the stored result (as fast or faster)\n",
        escape(&file.display().to_string()),
        report.inserted,
        report.replaced,
        report.kept_existing,
    );
    for c in &report.conflicts {
        let (kept, because) = match c.kept {
            ConflictResolution::Existing => ("kept the stored winner", "as fast or faster"),
            ConflictResolution::Incoming => ("took the incoming winner", "faster"),
        };
        text.push_str(&format!(
            "conflict, line {}: {} — stored {} {}, incoming {} {}: {kept} ({because})\n",
            c.line,
            short_key(&c.key),
            seconds(c.existing_time_s),
            escape(&c.existing_winner.to_string()),
            seconds(c.incoming_time_s),
            escape(&c.incoming_winner.to_string()),
        ));
    }
    if report.conflicts_not_listed > 0 {
        text.push_str(&format!(
            "... and {} more conflicts\n",
            report.conflicts_not_listed
        ));
    }
    for bad in &report.bad_rows {
        text.push_str(&format!(
            "bad row, line {}: {}\n",
            bad.line,
            escape(&bad.reason)
        ));
    }
    if report.bad_rows_not_listed > 0 {
        text.push_str(&format!(
            "... and {} more bad rows\n",
            report.bad_rows_not_listed
        ));
    }
    for w in &report.warnings {
        text.push_str(&format!(
            "warning, line {}: {}\n",
            w.line,
            escape(&w.message)
        ));
    }
    if report.warnings_not_listed > 0 {
        text.push_str(&format!(
            "... and {} more warnings\n",
            report.warnings_not_listed
        ));
    }
    if report.records_in_file != report.expected_records {
        text.push_str(&format!(
            "the header announces {} records but the file holds {} (cut short or edited?)\n",
            report.expected_records, report.records_in_file
        ));
    }
    text
}

/// `carver cache recover` as a report.
pub fn describe_recover(recovered: &CacheRecover) -> String {
    let r = &recovered.report;
    let mut text = format!(
        "recovered {} of the {} results found in {} into {}: {} new, {} replaced a slower \
         result, {} kept the stored result (as fast or faster)\n",
        r.kept(),
        r.rows_found,
        escape(&recovered.file),
        escape(&recovered.database),
        r.inserted,
        r.replaced,
        r.kept_existing,
    );
    for bad in &r.bad_rows {
        text.push_str(&format!(
            "bad row, id {}: {}\n",
            bad.id,
            escape(&bad.reason)
        ));
    }
    if r.bad_rows_not_listed > 0 {
        text.push_str(&format!(
            "... and {} more bad rows\n",
            r.bad_rows_not_listed
        ));
    }
    if r.unreadable_pages > 0 {
        text.push_str(&format!(
            "{} pages of the file could not be read; the rows they held are lost\n",
            r.unreadable_pages
        ));
    }
    for note in &r.notes {
        text.push_str(&format!("note: {}\n", escape(note)));
    }
    text
}

/// `carver cache clear` (confirmed or dry run) as a line.
pub fn describe_clear(cleared: &CacheClear, filters: &str) -> String {
    let filters = escape(filters);
    if !cleared.dry_run {
        return format!("deleted {} tuning results{filters}\n", cleared.deleted);
    }
    let ids: Vec<String> = cleared.would_delete.iter().map(i64::to_string).collect();
    let listed = if ids.is_empty() {
        String::new()
    } else {
        format!(": ids {}", ids.join(", "))
    };
    format!(
        "would delete {} tuning results{filters}{listed}\nnothing was deleted (dry run; add \
         --yes instead of --dry-run to delete them)\n",
        cleared.would_delete.len()
    )
}

fn dtypes(key: &TuneKey) -> String {
    let p = &key.problem;
    escape(&format!(
        "{}*{}->{} (acc {})",
        p.dtype_a, p.dtype_b, p.dtype_c, p.dtype_acc
    ))
    .into_owned()
}

fn short_key(key: &TuneKey) -> String {
    let p = &key.problem;
    format!(
        "{} {} {}x{}x{} batch {} {}",
        escape(&key.device.name),
        escape(&key.target),
        p.m,
        p.n,
        p.k,
        p.batch,
        dtypes(key)
    )
}

/// A duration for people: microseconds below 10 ms, milliseconds below 10 s, else seconds.
fn seconds(s: f64) -> String {
    if s < 1e-2 {
        format!("{:.1} us", s * 1e6)
    } else if s < 10.0 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.1} s")
    }
}

/// `YYYY-MM-DD HH:MM` in UTC, from seconds since the Unix epoch.
fn utc_date(unix_s: i64) -> String {
    // The database only keeps times after 1970; anything else is shown as it is stored.
    let Ok(secs) = u64::try_from(unix_s) else {
        return format!("{unix_s} s since 1970");
    };
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    // `2026-01-01T01:01:00Z` -> `2026-01-01 01:01`
    let text = humantime::format_rfc3339_seconds(time).to_string();
    text.get(..16).unwrap_or(&text).replacen('T', " ", 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(utc_date(0), "1970-01-01 00:00");
        assert_eq!(utc_date(951_782_400), "2000-02-29 00:00");
        assert_eq!(utc_date(1_767_225_600 + 3_661), "2026-01-01 01:01");
        assert_eq!(utc_date(4_107_542_399), "2100-02-28 23:59");
        assert_eq!(utc_date(-1), "-1 s since 1970");
    }

    #[test]
    fn durations_pick_a_readable_unit() {
        assert_eq!(seconds(171e-6), "171.0 us");
        assert_eq!(seconds(0.0123), "12.30 ms");
        assert_eq!(seconds(12.0), "12.0 s");
    }
}
