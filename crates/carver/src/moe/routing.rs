//! How tokens reach experts, and what that does to the fused-MoE kernel's grid: tokens are
//! sorted by expert and each expert's rows are padded to `BLOCK_SIZE_M`
//! (vLLM `moe_align_block_size`), so the kernel runs `sum_e ceil(count_e / BM)` row blocks, and
//! only experts with at least one token stream their weights.
//!
//! Each token picks `topk` distinct experts. Under uniform routing expert `e` is picked with
//! probability `q = topk / E`, so `count_e ~ Binomial(M, q)`; a histogram of tokens per expert
//! gives each expert its own share `p_e`, and `q_e = min(1, topk * p_e)`. Expectations are exact
//! sums over the binomial pmf (within 12 standard deviations of the mean, where the rest of the
//! mass is below 1e-30).

/// Per-expert selection probabilities, equal ones merged (uniform routing is one entry).
#[derive(Clone, Debug, PartialEq)]
pub struct RoutingModel {
    /// (probability a token picks the expert, how many experts have it).
    groups: Vec<(f64, u32)>,
}

/// What a batch of `M` tokens does to the kernel, for one `BLOCK_SIZE_M`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Occupancy {
    /// Experts with at least one token, expected.
    pub active_experts: f64,
    /// Row blocks the kernel computes, `sum_e E[ceil(count_e / BM)]`.
    pub row_blocks: f64,
}

impl RoutingModel {
    /// Every expert equally likely: `q = topk / experts`.
    pub fn uniform(experts: u32, topk: u32) -> Self {
        let q = f64::from(topk) / f64::from(experts.max(1));
        Self {
            groups: vec![(q.min(1.0), experts)],
        }
    }

    /// Experts in proportion to `weights` (finite, non-negative, not all zero: checked by the
    /// template).
    pub fn histogram(weights: &[f64], topk: u32) -> Self {
        let total: f64 = weights.iter().sum();
        let mut groups: Vec<(f64, u32)> = Vec::new();
        for w in weights {
            let q = (f64::from(topk) * w / total).min(1.0);
            match groups.iter_mut().find(|(p, _)| *p == q) {
                Some((_, n)) => *n += 1,
                None => groups.push((q, 1)),
            }
        }
        Self { groups }
    }

    /// Expected active experts and row blocks of `m` tokens for each of `block_ms`.
    pub fn occupancy(&self, m: u64, block_ms: &[u32]) -> Vec<Occupancy> {
        let mut out = vec![
            Occupancy {
                active_experts: 0.0,
                row_blocks: 0.0,
            };
            block_ms.len()
        ];
        for &(q, count) in &self.groups {
            let n = f64::from(count);
            let active = active_probability(m, q);
            let blocks = expected_blocks(m, q, block_ms);
            for (o, b) in out.iter_mut().zip(blocks) {
                o.active_experts += n * active;
                o.row_blocks += n * b;
            }
        }
        out
    }
}

/// `1 - (1 - q)^m`, the chance an expert of selection probability `q` gets a token.
pub fn active_probability(m: u64, q: f64) -> f64 {
    if q >= 1.0 {
        return if m > 0 { 1.0 } else { 0.0 };
    }
    -(m as f64 * (-q).ln_1p()).exp_m1()
}

/// `E[ceil(X / bm)]` for `X ~ Binomial(m, q)`, for each `bm`.
pub fn expected_blocks(m: u64, q: f64, block_ms: &[u32]) -> Vec<f64> {
    let blocks = |x: u64, bm: u32| x.div_ceil(u64::from(bm)) as f64;
    if q <= 0.0 || m == 0 {
        return vec![0.0; block_ms.len()];
    }
    if q >= 1.0 {
        return block_ms.iter().map(|&bm| blocks(m, bm)).collect();
    }
    let mf = m as f64;
    let mean = mf * q;
    let sd = (mf * q * (1.0 - q)).sqrt();
    let lo = (mean - 12.0 * sd - 2.0).floor().max(0.0) as u64;
    let hi = ((mean + 12.0 * sd + 2.0).ceil() as u64).min(m);
    // pmf(lo) in log space (it underflows for large m), then the ratio recurrence.
    let log_q = q.ln();
    let log_not = (-q).ln_1p();
    let mut pmf = (ln_choose(m, lo) + lo as f64 * log_q + (m - lo) as f64 * log_not).exp();
    let ratio = q / (1.0 - q);
    let mut sums = vec![0.0; block_ms.len()];
    for x in lo..=hi {
        for (s, &bm) in sums.iter_mut().zip(block_ms) {
            *s += pmf * blocks(x, bm);
        }
        pmf *= (m - x) as f64 / (x + 1) as f64 * ratio;
    }
    sums
}

/// `ln(n choose k)`.
fn ln_choose(n: u64, k: u64) -> f64 {
    ln_gamma(n as f64 + 1.0) - ln_gamma(k as f64 + 1.0) - ln_gamma((n - k) as f64 + 1.0)
}

/// `ln Γ(x)` for `x >= 1`: the Lanczos approximation (g = 7, 9 terms; Numerical Recipes 3rd ed.
/// §6.1 gives the form), relative error about 1e-15.
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every way `m` tokens can each pick `topk` distinct experts of `e`, equally likely.
    fn brute_force(e: u32, topk: u32, m: u32, bm: u32) -> (f64, f64) {
        let subsets: Vec<Vec<u32>> = (0u32..1 << e)
            .filter(|s| s.count_ones() == topk)
            .map(|s| (0..e).filter(|i| s >> i & 1 == 1).collect())
            .collect();
        let (mut active, mut blocks, mut cases) = (0.0, 0.0, 0.0);
        let total = subsets.len().pow(m);
        for case in 0..total {
            let mut counts = vec![0u64; e as usize];
            let mut c = case;
            for _ in 0..m {
                for &x in &subsets[c % subsets.len()] {
                    counts[x as usize] += 1;
                }
                c /= subsets.len();
            }
            active += counts.iter().filter(|&&c| c > 0).count() as f64;
            blocks += counts
                .iter()
                .map(|&c| c.div_ceil(u64::from(bm)) as f64)
                .sum::<f64>();
            cases += 1.0;
        }
        (active / cases, blocks / cases)
    }

    #[test]
    fn padding_expectation_matches_brute_force() {
        for (e, topk, m, bm) in [(4, 2, 3, 2), (5, 2, 4, 3), (4, 1, 5, 2), (6, 3, 3, 16)] {
            let (active, blocks) = brute_force(e, topk, m, bm);
            let got = RoutingModel::uniform(e, topk).occupancy(u64::from(m), &[bm])[0];
            assert!(
                (got.active_experts - active).abs() < 1e-9,
                "{got:?} {active}"
            );
            assert!((got.row_blocks - blocks).abs() < 1e-9, "{got:?} {blocks}");
        }
    }

    #[test]
    fn active_experts_follow_the_closed_form() {
        for (e, topk, m) in [(8u32, 2u32, 1u64), (8, 2, 7), (256, 8, 64), (128, 8, 4096)] {
            let got = RoutingModel::uniform(e, topk).occupancy(m, &[16])[0].active_experts;
            let q = f64::from(topk) / f64::from(e);
            let want = f64::from(e) * (1.0 - (1.0 - q).powf(m as f64));
            assert!((got - want).abs() < 1e-9 * want.max(1.0), "{got} {want}");
        }
        // One token activates exactly top-k experts.
        let one = RoutingModel::uniform(8, 2).occupancy(1, &[16])[0];
        assert!((one.active_experts - 2.0).abs() < 1e-12);
        assert!((one.row_blocks - 2.0).abs() < 1e-12);
    }

    #[test]
    fn large_batches_keep_their_mass() {
        // Mixtral at 4096 tokens: pmf(0) underflows, the log-space start does not.
        let bms = [16, 256];
        let got = expected_blocks(4096, 0.25, &bms);
        // 1024 rows on average: blocks near 1024/16 and 1024/256 (+ up to one partial block).
        assert!(got[0] > 64.0 && got[0] < 65.5, "{got:?}");
        assert!(got[1] > 4.0 && got[1] < 5.5, "{got:?}");
        // The pmf window sums to one.
        assert!((expected_blocks(4096, 0.25, &[1 << 20])[0] - 1.0).abs() < 1e-9);
    }

    #[test]
    fn ln_gamma_matches_factorials() {
        let mut f = 1.0f64;
        for n in 1..30u32 {
            f *= f64::from(n);
            assert!((ln_gamma(f64::from(n) + 1.0) - f.ln()).abs() < 1e-10, "{n}");
        }
    }
}
