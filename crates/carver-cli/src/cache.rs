//! `carver cache ...`: inspect, share, recover and clear the tuning database (the
//! carver-tunedb crate). Arguments and exit statuses here; tables and reports in [`render`].

mod render;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use carver_flows::cache::{self as flows, ClearMode, ExportTo, describe_filter};
use carver_flows::shapes::parse_mnk;
use carver_tunedb::Filter;
use clap::{Args, Subcommand};
use render::{
    describe, describe_clear, describe_import, describe_list, describe_recover, warn_skipped,
};

use crate::Globals;
use crate::output::{Format, escape, print_json};
use crate::progress::Terminal;

#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// List stored tuning results, one line each. Damaged rows are left out and named on
    /// standard error.
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
    /// database. Damaged rows are left out and make the exit status non-zero.
    Export {
        /// Write to this file instead of standard output (replaced whole, never half-written;
        /// a new file gets the usual permissions, a replaced one keeps its own).
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Write even when FILE is a symbolic link (to the file it points to), a device or a
        /// FIFO; without it those are refused.
        #[arg(long, requires = "output")]
        force: bool,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Merge an export into the database: every row is checked (sizes, dtypes, times between
    /// 1 ns and 1 hour and not under the GPU's roofline, a winner of its kernel family); the
    /// faster result wins each key; conflicts, bad rows and warnings are reported, and any bad
    /// row makes the exit status non-zero.
    Import {
        /// A file written by `carver cache export`, or `-` for standard input.
        file: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Salvage a damaged database file (such as a `tuning.sqlite3.moved-aside-*` left by a
    /// repair, or any carver database): every row still readable is checked as an import
    /// checks it and merged into the database. The file is not changed. Rows that cannot be
    /// recovered make the exit status non-zero.
    Recover {
        /// The database file to read.
        file: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Delete stored results: all of them, or those the filters select. Needs --yes, or
    /// --dry-run to see what would go.
    Clear {
        /// Really delete (tuning results cost GPU time to measure again).
        #[arg(long, conflicts_with = "dry_run")]
        yes: bool,
        /// Show which results would be deleted, and delete nothing.
        #[arg(long)]
        dry_run: bool,
        /// Only the result with this id (the ID column of `carver cache list`).
        #[arg(long, value_name = "ID")]
        id: Option<i64>,
        #[command(flatten)]
        filter: FilterArgs,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Delete the results with these ids (a damaged row too). Every id must be stored, or
    /// nothing is deleted.
    Remove {
        /// Result ids (the ID column of `carver cache list`, or the ids a warning names).
        #[arg(required = true, value_name = "ID")]
        ids: Vec<i64>,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
}

/// Narrows which results a command applies to; every filter given must match. An empty or
/// blank filter is refused: it would select everything.
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
            warn_skipped(&list.skipped);
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
            warn_skipped(&shown.skipped);
        }
        CacheCommand::Export {
            output,
            force,
            filter,
        } => {
            let filter = filter.to_filter();
            let exported = match &output {
                None => flows::export(
                    loc,
                    &filter,
                    ExportTo::Writer(&mut std::io::stdout().lock()),
                )?,
                Some(path) => flows::export(loc, &filter, ExportTo::File { path, force })?,
            };
            let destination = output.map_or("standard output".into(), |p| p.display().to_string());
            eprintln!(
                "exported {} tuning results to {}",
                exported.written,
                escape(&destination)
            );
            if !exported.skipped.is_empty() {
                warn_skipped(&exported.skipped);
                eprintln!(
                    "error: {} stored results could not be read and are not in the export (the \
                     other {} are); `carver cache remove ID` deletes a damaged row",
                    exported.skipped.len(),
                    exported.written
                );
                return Ok(ExitCode::FAILURE);
            }
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
                    "error: {} of {} rows of {} were not imported (the good rows were)",
                    report.bad_row_count()
                        + report
                            .expected_records
                            .saturating_sub(report.records_in_file),
                    report.expected_records.max(report.records_in_file),
                    escape(&name)
                );
                return Ok(ExitCode::FAILURE);
            }
        }
        CacheCommand::Recover { file, format } => {
            let recovered = flows::recover(loc, &file, &progress)?;
            match format {
                Format::Json => print_json(&recovered)?,
                Format::Table => print!("{}", describe_recover(&recovered)),
            }
            let report = &recovered.report;
            let bad = report.bad_row_count();
            if report.rows_found == 0 {
                eprintln!(
                    "error: no tuning results were found in {} (not a carver database, or \
                     damaged beyond reading)",
                    escape(&recovered.file)
                );
                return Ok(ExitCode::FAILURE);
            }
            if bad > 0 {
                eprintln!(
                    "error: {bad} of the {} rows found in {} could not be recovered (the good \
                     ones were)",
                    report.rows_found,
                    escape(&recovered.file)
                );
                return Ok(ExitCode::FAILURE);
            }
        }
        CacheCommand::Clear {
            yes,
            dry_run,
            id,
            filter,
            format,
        } => {
            let filter = Filter {
                id,
                ..filter.to_filter()
            };
            let mode = match (yes, dry_run) {
                (_, true) => ClearMode::DryRun,
                (true, false) => ClearMode::Confirmed,
                (false, false) => ClearMode::Unconfirmed,
            };
            let cleared = flows::clear(loc, &filter, mode, &progress)?;
            match format {
                Format::Json => print_json(&cleared)?,
                Format::Table => print!("{}", describe_clear(&cleared, &describe_filter(&filter))),
            }
        }
        CacheCommand::Remove { ids, format } => {
            let removed = flows::remove(loc, &ids, &progress)?;
            match format {
                Format::Json => print_json(&removed)?,
                Format::Table => {
                    let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
                    println!(
                        "deleted {} tuning results (ids {})",
                        removed.deleted,
                        ids.join(", ")
                    );
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
