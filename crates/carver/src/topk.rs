//! How many configurations a ranking returns: one checked type, so no flow checks it again.

use std::fmt;
use std::num::NonZeroUsize;
use std::str::FromStr;

use crate::error::CarverError;

/// A top-k between 1 and [`TopK::MAX`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopK(NonZeroUsize);

impl TopK {
    /// The most a ranking returns. A top-k is for tuning a few candidates; every legal
    /// configuration of a family has its own flow (`carver tune --exhaustive`).
    pub const MAX: usize = 1024;

    /// The usual number of candidates to benchmark.
    pub const DEFAULT: TopK = TopK(NonZeroUsize::new(8).unwrap());

    pub fn new(k: usize) -> Result<Self, CarverError> {
        NonZeroUsize::new(k)
            .filter(|k| k.get() <= Self::MAX)
            .map(TopK)
            .ok_or(CarverError::TopKOutOfRange(k))
    }

    pub fn get(self) -> usize {
        self.0.get()
    }
}

impl Default for TopK {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl TryFrom<usize> for TopK {
    type Error = CarverError;
    fn try_from(k: usize) -> Result<Self, CarverError> {
        Self::new(k)
    }
}

impl FromStr for TopK {
    type Err = CarverError;
    fn from_str(s: &str) -> Result<Self, CarverError> {
        let k = s
            .trim()
            .parse::<usize>()
            .map_err(|_| CarverError::TopKNotANumber(s.to_string()))?;
        Self::new(k)
    }
}

impl fmt::Display for TopK {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_one_to_max_and_says_what_is_accepted_otherwise() {
        assert_eq!(TopK::new(1).unwrap().get(), 1);
        assert_eq!(TopK::new(TopK::MAX).unwrap().get(), TopK::MAX);
        for bad in [0, TopK::MAX + 1, usize::MAX] {
            let e = TopK::new(bad).unwrap_err().to_string();
            assert!(e.contains("accepted 1 to 1024"), "{e}");
        }
        assert_eq!("8".parse::<TopK>().unwrap(), TopK::DEFAULT);
        let e = "eight".parse::<TopK>().unwrap_err().to_string();
        assert!(e.contains("eight") && e.contains("1 to 1024"), "{e}");
        assert!("-1".parse::<TopK>().is_err());
    }
}
