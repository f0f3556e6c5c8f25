//! Shape bucketing, declared on the key as CubeCL's tune keys declare theirs: each size field of
//! a [`TuneKey`](crate::TuneKey)'s problem (M, N, K) says how a lookup matches it; every other
//! field (device, carver version, family, kernel hash, batch, dtypes, layouts) always matches
//! exactly, because a result measured for another of them says nothing about this one.

use std::fmt;
use std::str::FromStr;

/// How one size of a key matches stored sizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Bucket {
    /// Only the same size.
    #[default]
    Exact,
    /// Any size that rounds up to the same power of two: `(2^(j-1), 2^j]` (M = 1000 finds a
    /// result for M = 600 or 1024, not for 1025).
    Pow2,
}

impl Bucket {
    pub const ALL: [Bucket; 2] = [Self::Exact, Self::Pow2];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exact => "exact",
            Self::Pow2 => "pow2",
        }
    }

    /// The stored sizes that match `size`: `(low, high]`.
    pub fn range(self, size: u64) -> (u64, u64) {
        match self {
            Self::Exact => (size.saturating_sub(1), size),
            Self::Pow2 => {
                let high = size.checked_next_power_of_two().unwrap_or(u64::MAX);
                (high / 2, high)
            }
        }
    }
}

impl fmt::Display for Bucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Bucket {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|b| b.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("bucket `{s}`: accepted `exact` or `pow2`"))
    }
}

/// The bucketing a lookup applies to each size of the key's problem.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct KeyBuckets {
    pub m: Bucket,
    pub n: Bucket,
    pub k: Bucket,
}

impl KeyBuckets {
    /// Every size matched exactly (the default).
    pub const EXACT: Self = Self::all(Bucket::Exact);

    /// The same bucketing for M, N and K.
    pub const fn all(bucket: Bucket) -> Self {
        Self {
            m: bucket,
            n: bucket,
            k: bucket,
        }
    }

    pub fn is_exact(self) -> bool {
        self == Self::EXACT
    }

    /// The `(low, high]` ranges of stored M, N and K that match `[m, n, k]`.
    pub fn ranges(self, [m, n, k]: [u64; 3]) -> [(u64, u64); 3] {
        [self.m.range(m), self.n.range(n), self.k.range(k)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_hold_exactly_the_sizes_that_match() {
        assert_eq!(Bucket::Exact.range(1000), (999, 1000));
        assert_eq!(Bucket::Exact.range(1), (0, 1));
        assert_eq!(Bucket::Pow2.range(1000), (512, 1024));
        assert_eq!(Bucket::Pow2.range(1024), (512, 1024));
        assert_eq!(Bucket::Pow2.range(1025), (1024, 2048));
        assert_eq!(Bucket::Pow2.range(1), (0, 1));
        assert_eq!(Bucket::Pow2.range(u64::MAX).1, u64::MAX);
    }

    #[test]
    fn names_parse_and_others_say_what_is_accepted() {
        assert_eq!("pow2".parse::<Bucket>(), Ok(Bucket::Pow2));
        assert_eq!(" Exact ".parse::<Bucket>(), Ok(Bucket::Exact));
        assert!(
            "log"
                .parse::<Bucket>()
                .unwrap_err()
                .contains("`exact` or `pow2`")
        );
    }
}
