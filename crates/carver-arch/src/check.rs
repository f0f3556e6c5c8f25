//! One checker for every number carver reads from outside: hardware files, what a driver and
//! NVML report, calibration files. A refusal names the source (a file, a live device), the field,
//! the value and what is accepted, so a user can fix the input without reading carver's code.
//!
//! Every comparison is written so that NaN fails it: `lo <= v && v <= hi` is false for NaN,
//! where `v < lo || v > hi` would let it through.

use std::fmt::Display;
use std::ops::RangeInclusive;

use crate::error::ArchError;

/// Relative tolerance for derived-vs-stated figures (vendor figures are rounded).
pub const DERIVED_TOLERANCE: f64 = 0.05;

/// Checks the numbers of one source, named in every error (a path, or `live device 0 (...)`).
#[derive(Clone, Copy, Debug)]
pub struct Check<'a> {
    source: &'a str,
}

impl<'a> Check<'a> {
    pub fn new(source: &'a str) -> Self {
        Self { source }
    }

    /// What the checked numbers came from.
    pub fn source(&self) -> &'a str {
        self.source
    }

    /// A refusal of `field` for a reason other than its range (a missing entry, a bad name).
    pub fn invalid(&self, field: &str, reason: impl Into<String>) -> ArchError {
        ArchError::Invalid {
            path: self.source.to_string(),
            field: field.to_string(),
            reason: reason.into(),
        }
    }

    fn out_of_range(&self, field: &str, value: String, accepted: String) -> ArchError {
        ArchError::OutOfRange {
            path: self.source.to_string(),
            field: field.to_string(),
            value,
            accepted,
        }
    }

    /// A real number that must be finite and lie in `range` (inclusive), in `unit`.
    pub fn real(
        &self,
        field: &str,
        value: f64,
        range: RangeInclusive<f64>,
        unit: &str,
    ) -> Result<f64, ArchError> {
        let (lo, hi) = (*range.start(), *range.end());
        if value.is_finite() && lo <= value && value <= hi {
            return Ok(value);
        }
        Err(self.out_of_range(
            field,
            with_unit(&show_number(value), unit),
            format!(
                "a finite number from {} to {}",
                with_unit(&show_number(lo), unit),
                with_unit(&show_number(hi), unit)
            ),
        ))
    }

    /// A count or size that must lie in `range` (inclusive), in `unit`.
    pub fn whole<T: PartialOrd + Display + Copy>(
        &self,
        field: &str,
        value: T,
        range: RangeInclusive<T>,
        unit: &str,
    ) -> Result<T, ArchError> {
        if range.contains(&value) {
            return Ok(value);
        }
        Err(self.out_of_range(
            field,
            with_unit(&value.to_string(), unit),
            format!(
                "{} to {}",
                with_unit(&range.start().to_string(), unit),
                with_unit(&range.end().to_string(), unit)
            ),
        ))
    }

    /// A figure every NVIDIA GPU has the same value of (`why` says so).
    pub fn fixed<T: PartialEq + Display>(
        &self,
        field: &str,
        value: T,
        accepted: &[T],
        why: &str,
    ) -> Result<(), ArchError> {
        if accepted.contains(&value) {
            return Ok(());
        }
        let list: Vec<String> = accepted.iter().map(ToString::to_string).collect();
        Err(self.out_of_range(
            field,
            value.to_string(),
            format!("{} ({why})", list.join(" or ")),
        ))
    }

    /// A measured figure that must be finite and lie within `factors` times `reference`, the
    /// figure `reference_name` the description gives for the same thing.
    pub fn near(
        &self,
        field: &str,
        value: f64,
        reference: f64,
        factors: RangeInclusive<f64>,
        reference_name: &str,
        unit: &str,
    ) -> Result<f64, ArchError> {
        let (lo, hi) = (factors.start() * reference, factors.end() * reference);
        if value.is_finite() && lo <= value && value <= hi {
            return Ok(value);
        }
        Err(self.out_of_range(
            field,
            with_unit(&show_number(value), unit),
            format!(
                "a finite number from {} to {} ({}x to {}x {reference_name}, {})",
                with_unit(&show_number(lo), unit),
                with_unit(&show_number(hi), unit),
                show_number(*factors.start()),
                show_number(*factors.end()),
                with_unit(&show_number(reference), unit)
            ),
        ))
    }

    /// A stated figure that must agree with the one `how` derives from other fields, within
    /// [`DERIVED_TOLERANCE`].
    pub fn agrees(
        &self,
        field: &str,
        stated: f64,
        derived: f64,
        how: &str,
    ) -> Result<(), ArchError> {
        // A derivation from checked fields is finite and positive; refuse rather than divide
        // by zero should a caller skip those checks.
        if !(derived.is_finite() && derived > 0.0) {
            return Err(self.invalid(
                field,
                format!(
                    "cannot be checked: {how} gives {}, not a positive number",
                    show_number(derived)
                ),
            ));
        }
        let rel = (stated - derived).abs() / derived;
        if rel <= DERIVED_TOLERANCE {
            return Ok(());
        }
        Err(self.invalid(
            field,
            format!(
                "is {stated:.4e} but {how} gives {derived:.4e} ({:.1}% apart; at most {:.0}% allowed)",
                rel * 100.0,
                DERIVED_TOLERANCE * 100.0
            ),
        ))
    }
}

fn with_unit(number: &str, unit: &str) -> String {
    // `NaN MHz` would read as if NaN were a frequency.
    if unit.is_empty() || ["NaN", "inf", "-inf"].contains(&number) {
        number.to_string()
    } else {
        format!("{number} {unit}")
    }
}

/// A number as a person reads it: plain when moderate (`1830`, `0.5`), in exponent form when
/// huge or tiny (`3.35e12`, `1e-9`), and `NaN`, `inf`, `-inf` by name.
pub fn show_number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else if v == 0.0 || (1e-3..1e7).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_values_fail_every_real_check() {
        let c = Check::new("f.toml");
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let err = c.real("x.y", v, 0.0..=1e300, "B").unwrap_err().to_string();
            assert!(err.starts_with("f.toml: field `x.y` is "), "{err}");
            assert!(
                err.contains("accepted: a finite number from 0 B to 1e300 B"),
                "{err}"
            );
            assert!(c.near("x.y", v, 1.0, 0.05..=2.0, "ref", "").is_err());
        }
        assert!(c.real("x.y", 1.0, 1.0..=1.0, "").is_ok());
        assert!(c.agrees("x.y", 1.0, f64::NAN, "d").is_err());
        assert!(c.agrees("x.y", f64::NAN, 1.0, "d").is_err());
        assert!(c.agrees("x.y", 1.0, 0.0, "d").is_err());
    }

    #[test]
    fn numbers_read_the_way_people_write_them() {
        assert_eq!(show_number(1830.0), "1830");
        assert_eq!(show_number(3.35e12), "3.35e12");
        assert_eq!(show_number(1e-9), "1e-9");
        assert_eq!(show_number(-1.0), "-1");
        assert_eq!(show_number(f64::NAN), "NaN");
        assert_eq!(show_number(f64::NEG_INFINITY), "-inf");
    }

    #[test]
    fn refusals_name_value_and_accepted_range() {
        let c = Check::new("live device 0 (X)");
        let err = c.whole("sm.count", 0u32, 1..=1024, "").unwrap_err();
        assert_eq!(
            err.to_string(),
            "live device 0 (X): field `sm.count` is 0; accepted: 1 to 1024"
        );
        let err = c
            .near("dram", -1.0, 2e12, 0.05..=2.0, "memory.bw", "B/s")
            .unwrap_err()
            .to_string();
        assert!(err.contains("is -1 B/s"), "{err}");
        assert!(
            err.contains("1e11 B/s to 4e12 B/s (0.05x to 2x memory.bw, 2e12 B/s)"),
            "{err}"
        );
    }
}
