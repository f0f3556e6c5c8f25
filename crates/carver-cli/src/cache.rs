//! `carver cache ...`: inspect, share and clear the tuning database (the carver-tunedb crate).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use carver_schema::{
    CacheClear, CacheEntry, CacheImport, CacheList, CacheShow, ConflictResolution, ImportReport,
    SCHEMA_VERSION, StoredTuneRecord, TuneKey,
};
use carver_tunedb::{Filter, TuneDb};
use clap::{Args, Subcommand};

use crate::Globals;
use crate::output::{Format, print_json, table};

#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// List stored tuning results, one line each.
    List {
        #[command(flatten)]
        filter: FilterArgs,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Show stored results in full, every candidate included.
    Show {
        /// A result id (the ID column of `carver cache list`) or a shape MxNxK such as
        /// 4096x4096x4096.
        selector: String,
        #[command(flatten)]
        filter: FilterArgs,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Write results as versioned JSON Lines, to ship them to other machines. Only reads the
    /// database.
    Export {
        /// Write to this file instead of standard output (replaced whole, never half-written).
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Merge an export into the database: the faster result wins each key; conflicts and bad
    /// rows are reported, and any bad row makes the exit status non-zero.
    Import {
        /// A file written by `carver cache export`, or `-` for standard input.
        file: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Delete stored results: all of them, or those the filters select. Needs --yes.
    Clear {
        /// Really delete (tuning results cost GPU time to measure again).
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        filter: FilterArgs,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
}

/// Narrows which results a command applies to; every filter given must match.
#[derive(Debug, Args)]
pub struct FilterArgs {
    /// Only results from this device: its UUID, or part of its name (case-insensitive).
    #[arg(long, value_name = "UUID_OR_NAME")]
    device: Option<String>,
    /// Only results for this target family (triton, cuda-sm90, ...).
    #[arg(long)]
    target: Option<String>,
    /// Only results for this problem size, MxNxK (any batch).
    #[arg(long, value_name = "MxNxK", value_parser = parse_shape)]
    shape: Option<[u64; 3]>,
}

impl FilterArgs {
    fn to_filter(&self) -> Filter {
        Filter {
            id: None,
            device: self.device.clone(),
            target: self.target.clone(),
            shape: self.shape,
        }
    }
}

pub fn run(cmd: CacheCommand, globals: &Globals) -> anyhow::Result<ExitCode> {
    let cache_dir = globals.cache_dir()?;
    match cmd {
        CacheCommand::List { filter, format } => list(&cache_dir, &filter.to_filter(), format),
        CacheCommand::Show {
            selector,
            filter,
            format,
        } => show(&cache_dir, &selector, filter.to_filter(), format),
        CacheCommand::Export { output, filter } => {
            export(&cache_dir, output.as_deref(), &filter.to_filter())
        }
        CacheCommand::Import { file, format } => import(&cache_dir, &file, format),
        CacheCommand::Clear {
            yes,
            filter,
            format,
        } => clear(&cache_dir, yes, &filter.to_filter(), format),
    }
}

/// Opens the database for writing (creating, repairing or upgrading it) and prints the open's
/// warnings on standard error.
fn open(cache_dir: &Path) -> anyhow::Result<TuneDb> {
    let (db, warnings) = TuneDb::open(cache_dir)?;
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
    Ok(db)
}

fn parse_shape(text: &str) -> Result<[u64; 3], String> {
    let sizes: Vec<u64> = text
        .split(['x', 'X'])
        .map(|part| part.trim().parse::<u64>().ok().filter(|&n| n > 0))
        .collect::<Option<_>>()
        .ok_or_else(|| shape_error(text))?;
    sizes.try_into().map_err(|_| shape_error(text))
}

fn shape_error(text: &str) -> String {
    format!("`{text}` is not a shape: expected MxNxK with positive integers, e.g. 4096x4096x4096")
}

fn list(cache_dir: &Path, filter: &Filter, format: Format) -> anyhow::Result<ExitCode> {
    let db = open(cache_dir)?;
    let results: Vec<CacheEntry> = db.query(filter)?.into_iter().map(entry).collect();
    match format {
        Format::Json => print_json(&CacheList {
            schema_version: SCHEMA_VERSION,
            database: db.path().display().to_string(),
            results,
        })?,
        Format::Table if results.is_empty() => {
            println!("no stored tuning results{}", filtered_note(filter));
            println!("database: {}", db.path().display());
        }
        Format::Table => {
            let rows: Vec<Vec<String>> = results
                .iter()
                .map(|e| {
                    let p = &e.key.problem;
                    vec![
                        e.id.to_string(),
                        e.key.device.name.clone(),
                        e.key.target.clone(),
                        format!("{}x{}x{}", p.m, p.n, p.k),
                        p.batch.to_string(),
                        dtypes(&e.key),
                        format!("{},{}", p.layout_a, p.layout_b),
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
            print!(
                "{}",
                table(
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
                    &rows
                )
            );
            println!("{} results in {}", results.len(), db.path().display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn entry(stored: StoredTuneRecord) -> CacheEntry {
    let r = stored.record;
    CacheEntry {
        id: stored.id,
        // Stored records always have a winner time: the database validates it on the way in.
        winner_time_s: r.winner_time_s().unwrap_or(f64::NAN),
        cublas_time_s: r.cublas_time_s,
        candidates: r.candidates.len(),
        failed_candidates: r.candidates.iter().filter(|c| c.failure.is_some()).count(),
        measured_at_unix_s: r.measured_at_unix_s,
        key: r.key,
        winner: r.winner,
    }
}

fn show(
    cache_dir: &Path,
    selector: &str,
    mut filter: Filter,
    format: Format,
) -> anyhow::Result<ExitCode> {
    if let Ok(id) = selector.parse::<i64>() {
        filter.id = Some(id);
    } else if let Ok(shape) = parse_shape(selector) {
        filter.shape = Some(shape);
    } else {
        anyhow::bail!(
            "`{selector}` is neither a result id (the ID column of `carver cache list`) nor a \
             shape MxNxK such as 4096x4096x4096"
        );
    }
    let db = open(cache_dir)?;
    let results = db.query(&filter)?;
    if results.is_empty() {
        anyhow::bail!(
            "no stored tuning result matches `{selector}`{}; `carver cache list` shows what is stored",
            filtered_note(&filter)
        );
    }
    match format {
        Format::Json => print_json(&CacheShow {
            schema_version: SCHEMA_VERSION,
            results,
        })?,
        Format::Table => {
            let texts: Vec<String> = results.iter().map(describe).collect();
            print!("{}", texts.join("\n"));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One result in full, for `carver cache show`.
fn describe(stored: &StoredTuneRecord) -> String {
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
        name = k.device.name,
        uuid = k.device.uuid,
        driver = k.device.driver_version,
        target = k.target,
        hash = k.kernel_hash,
        version = k.carver_version,
        m = p.m,
        n = p.n,
        kk = p.k,
        batch = p.batch,
        dtypes = dtypes(k),
        la = p.layout_a,
        lb = p.layout_b,
        winner_time = seconds(winner_time),
        winner = r.winner,
        date = utc_date(r.measured_at_unix_s),
        method = r.method,
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
            vec![
                format!("{mark}{}", c.model_rank),
                seconds(c.predicted_time_s),
                c.measured_time_s.map_or("-".into(), seconds),
                c.measured_time_s
                    .map_or("-".into(), |t| format!("{:.2}x", t / winner_time)),
                match &c.failure {
                    Some(failure) => format!("{}  FAILED: {failure}", c.config),
                    None => c.config.to_string(),
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

fn export(cache_dir: &Path, output: Option<&Path>, filter: &Filter) -> anyhow::Result<ExitCode> {
    // Read-only: an export never creates, repairs or upgrades the database it reads.
    let db = TuneDb::open_read_only(cache_dir)?;
    let write = |out: &mut dyn Write| -> anyhow::Result<u64> {
        Ok(match &db {
            Some(db) => db.export(filter, out)?,
            None => carver_tunedb::write_export(&[], out)?,
        })
    };
    let count = match output {
        None => write(&mut std::io::stdout().lock())?,
        Some(path) => {
            // Written beside the target and renamed over it, so that a failed export leaves the
            // previous file (if any) whole.
            let dir = match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent,
                _ => Path::new("."),
            };
            let mut file = tempfile::NamedTempFile::new_in(dir)
                .with_context(|| format!("cannot create a file in {}", dir.display()))?;
            let count = write(&mut std::io::BufWriter::new(file.as_file_mut()))?;
            file.persist(path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            count
        }
    };
    let destination = output.map_or("standard output".into(), |p| p.display().to_string());
    eprintln!("exported {count} tuning results to {destination}");
    Ok(ExitCode::SUCCESS)
}

fn import(cache_dir: &Path, file: &Path, format: Format) -> anyhow::Result<ExitCode> {
    let mut input: Box<dyn BufRead> = if file == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        let opened =
            std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
        Box::new(BufReader::new(opened))
    };
    let db = open(cache_dir)?;
    let report = db
        .import(&mut input)
        .with_context(|| format!("cannot import {}", file.display()))?;
    let clean = report.is_clean();
    match format {
        Format::Json => print_json(&CacheImport {
            schema_version: SCHEMA_VERSION,
            file: file.display().to_string(),
            report: report.clone(),
        })?,
        Format::Table => print!("{}", describe_import(file, &report)),
    }
    if clean {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "error: {} of {} rows of {} were not imported (the good rows were)",
        report.bad_rows.len() as u64
            + report
                .expected_records
                .saturating_sub(report.records_in_file),
        report.expected_records.max(report.records_in_file),
        file.display()
    );
    Ok(ExitCode::FAILURE)
}

fn describe_import(file: &Path, report: &ImportReport) -> String {
    let mut text = format!(
        "imported {}: {} new, {} replaced a slower result, {} kept the stored result (as fast or faster)\n",
        file.display(),
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
            c.existing_winner,
            seconds(c.incoming_time_s),
            c.incoming_winner,
        ));
    }
    for bad in &report.bad_rows {
        text.push_str(&format!("bad row, line {}: {}\n", bad.line, bad.reason));
    }
    if report.records_in_file != report.expected_records {
        text.push_str(&format!(
            "the header announces {} records but the file holds {} (cut short or edited?)\n",
            report.expected_records, report.records_in_file
        ));
    }
    text
}

fn clear(cache_dir: &Path, yes: bool, filter: &Filter, format: Format) -> anyhow::Result<ExitCode> {
    let db = open(cache_dir)?;
    if !yes {
        let count = db.count(filter)?;
        anyhow::bail!(
            "refusing to delete {count} stored tuning results{} without --yes (they cost GPU \
             time to measure again); add --yes, or narrow the selection with --device, --target \
             or --shape",
            filtered_note(filter)
        );
    }
    let deleted = db.clear(filter)?;
    match format {
        Format::Json => print_json(&CacheClear {
            schema_version: SCHEMA_VERSION,
            deleted,
        })?,
        Format::Table => println!("deleted {deleted} tuning results{}", filtered_note(filter)),
    }
    Ok(ExitCode::SUCCESS)
}

/// ` (device ~ "h100", target triton)` when filters are set, for messages.
fn filtered_note(filter: &Filter) -> String {
    let mut parts = Vec::new();
    if let Some(device) = &filter.device {
        parts.push(format!("device {device:?}"));
    }
    if let Some(target) = &filter.target {
        parts.push(format!("target {target}"));
    }
    if let Some([m, n, k]) = filter.shape {
        parts.push(format!("shape {m}x{n}x{k}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" matching {}", parts.join(", "))
    }
}

fn dtypes(key: &TuneKey) -> String {
    let p = &key.problem;
    format!(
        "{}*{}->{} (acc {})",
        p.dtype_a, p.dtype_b, p.dtype_c, p.dtype_acc
    )
}

fn short_key(key: &TuneKey) -> String {
    let p = &key.problem;
    format!(
        "{} {} {}x{}x{} batch {} {}",
        key.device.name,
        key.target,
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
    let (days, second_of_day) = (unix_s.div_euclid(86_400), unix_s.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        second_of_day / 3600,
        second_of_day % 3600 / 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_bad_ones_say_what_is_expected() {
        assert_eq!(parse_shape("4096x4096x4096"), Ok([4096, 4096, 4096]));
        assert_eq!(parse_shape("1X2x3"), Ok([1, 2, 3]));
        for bad in ["", "4096", "1x2", "1x2x3x4", "0x1x1", "ax1x1", "-1x1x1"] {
            assert!(
                parse_shape(bad).unwrap_err().contains("expected MxNxK"),
                "{bad}"
            );
        }
    }

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(utc_date(0), "1970-01-01 00:00");
        assert_eq!(utc_date(951_782_400), "2000-02-29 00:00");
        assert_eq!(utc_date(1_767_225_600 + 3_661), "2026-01-01 01:01");
        assert_eq!(utc_date(4_107_542_399), "2100-02-28 23:59");
        assert_eq!(utc_date(-1), "1969-12-31 23:59");
    }

    #[test]
    fn durations_pick_a_readable_unit() {
        assert_eq!(seconds(171e-6), "171.0 us");
        assert_eq!(seconds(0.0123), "12.30 ms");
        assert_eq!(seconds(12.0), "12.0 s");
    }
}
