//! `carver cache ...`: inspect, share and clear the tuning database (the carver-tunedb crate).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use carver_flows::cache::{self as flows, ExportTo, describe_filter};
use carver_flows::shapes::parse_mnk;
use carver_schema::{CacheList, ConflictResolution, ImportReport, StoredTuneRecord, TuneKey};
use carver_tunedb::Filter;
use clap::{Args, Subcommand};

use crate::Globals;
use crate::output::{Format, print_json, table};
use crate::progress::Terminal;

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
    #[arg(long, value_name = "MxNxK", value_parser = parse_mnk)]
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
    let loc = &globals.locations;
    let progress = Terminal::default();
    match cmd {
        CacheCommand::List { filter, format } => {
            let filter = filter.to_filter();
            let list = flows::list(loc, &filter, &progress)?;
            match format {
                Format::Json => print_json(&list)?,
                Format::Table => print!("{}", describe_list(&list, &filter)),
            }
        }
        CacheCommand::Show {
            selector,
            filter,
            format,
        } => {
            let shown = flows::show(loc, &selector, filter.to_filter(), &progress)?;
            match format {
                Format::Json => print_json(&shown)?,
                Format::Table => {
                    let texts: Vec<String> = shown.results.iter().map(describe).collect();
                    print!("{}", texts.join("\n"));
                }
            }
        }
        CacheCommand::Export { output, filter } => {
            let filter = filter.to_filter();
            let count = match &output {
                None => flows::export(
                    loc,
                    &filter,
                    ExportTo::Writer(&mut std::io::stdout().lock()),
                )?,
                Some(path) => flows::export(loc, &filter, ExportTo::File(path))?,
            };
            let destination = output.map_or("standard output".into(), |p| p.display().to_string());
            eprintln!("exported {count} tuning results to {destination}");
        }
        CacheCommand::Import { file, format } => {
            let mut input: Box<dyn BufRead> = if file == Path::new("-") {
                Box::new(std::io::stdin().lock())
            } else {
                let opened = std::fs::File::open(&file)
                    .with_context(|| format!("cannot open {}", file.display()))?;
                Box::new(BufReader::new(opened))
            };
            let name = file.display().to_string();
            let imported = flows::import(loc, &mut input, &name, &progress)
                .with_context(|| format!("cannot import {name}"))?;
            match format {
                Format::Json => print_json(&imported)?,
                Format::Table => print!("{}", describe_import(&file, &imported.report)),
            }
            let report = &imported.report;
            if !report.is_clean() {
                eprintln!(
                    "error: {} of {} rows of {name} were not imported (the good rows were)",
                    report.bad_rows.len() as u64
                        + report
                            .expected_records
                            .saturating_sub(report.records_in_file),
                    report.expected_records.max(report.records_in_file),
                );
                return Ok(ExitCode::FAILURE);
            }
        }
        CacheCommand::Clear {
            yes,
            filter,
            format,
        } => {
            let filter = filter.to_filter();
            let cleared = flows::clear(loc, &filter, yes, &progress)?;
            match format {
                Format::Json => print_json(&cleared)?,
                Format::Table => println!(
                    "deleted {} tuning results{}",
                    cleared.deleted,
                    describe_filter(&filter)
                ),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `carver cache list` as a table.
fn describe_list(list: &CacheList, filter: &Filter) -> String {
    if list.results.is_empty() {
        return format!(
            "no stored tuning results{}\ndatabase: {}\n",
            describe_filter(filter),
            list.database
        );
    }
    let rows: Vec<Vec<String>> = list
        .results
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
        list.database
    ));
    text
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
