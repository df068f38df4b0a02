//! Zipfian key generators over `[0, n)`.
//!
//! Both use the inversion of Gray et al., "Quickly Generating Billion-Record Synthetic
//! Databases" (SIGMOD 1994, §5): ranks 1 and 2 are exact, ranks ≥ 3 come from a closed-form
//! approximation of the inverse CDF (it overweights rank 3 by up to ~17% at n = 1000, θ = 0.99,
//! and converges for large ranks). What differs is the mapping from rank to key:
//!
//! - `GrayZipf` is the generator of DBx1000 (`ycsb_txn_man::zipf`) and CCBench: Zipf over the
//!   `n` rows, key = rank − 1, so the hot keys are the low keys (unscrambled). θ = 0 is uniform.
//! - `ScrambledZipf` is YCSB's `ScrambledZipfianGenerator`: Zipf over a fixed large item count
//!   (10^10, the count YCSB's precomputed ζ = 26.469… belongs to), then key =
//!   |FNV-1a-64(rank)| mod n, which scatters the hot keys over the key space.
//!
//! - `ExactZipf` (the long-lived-transaction workload, `llt.rs`) is exact for any exponent
//!   s ≥ 0, including s ≥ 1 where Gray's formula does not apply: a precomputed CDF over the n
//!   ranks and a binary search per draw (n ≤ `EXACT_ZIPF_MAX_N`), key = rank − 1.
//!
//! ζ(n, θ) = Σ_{i=1..n} i^−θ is summed term by term up to `EXACT_ZETA_MAX_N` terms (what
//! DBx1000 does; ~0.1 s for 10M rows in release) and by Euler–Maclaurin beyond, which agrees with
//! YCSB's 10^10-term constant to 1e-12. Values are cached per (n, θ) for the process.

use super::rng::Rng;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// Largest n for which ζ(n, θ) is summed term by term.
const EXACT_ZETA_MAX_N: u64 = 1 << 25;

/// Item count of YCSB's scrambled Zipfian (`ScrambledZipfianGenerator.ITEM_COUNT` in YCSB
/// 0.1–0.17; later releases raised the constant to 10^16 but kept ζ for 10^10).
pub const YCSB_ITEM_COUNT: u64 = 10_000_000_000;

/// ζ(n, θ) = Σ_{i=1..n} i^−θ, cached per (n, θ).
pub fn zeta(n: u64, theta: f64) -> f64 {
    static CACHE: OnceLock<Mutex<HashMap<(u64, u64), f64>>> = OnceLock::new();
    let key = (n, theta.to_bits());
    let cache = CACHE.get_or_init(Default::default);
    if let Some(&z) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return z;
    }
    // Computed outside the lock: two threads may both compute it once, harmlessly.
    let z = if n <= EXACT_ZETA_MAX_N {
        zeta_sum(n, theta)
    } else {
        zeta_euler_maclaurin(n, theta)
    };
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, z);
    z
}

/// Σ_{i=1..n} i^−θ term by term (smallest terms first, for accuracy).
fn zeta_sum(n: u64, theta: f64) -> f64 {
    if theta == 0.0 {
        return n as f64;
    }
    (1..=n).rev().map(|i| (i as f64).powf(-theta)).sum()
}

/// ζ(n, θ) by Euler–Maclaurin: the first `m − 1` terms exactly, the rest as the integral plus
/// the boundary, B2 and B4 corrections. The next term is O(m^(−θ−5)), far below f64 precision.
fn zeta_euler_maclaurin(n: u64, theta: f64) -> f64 {
    const M: u64 = 1000;
    if n <= M {
        return zeta_sum(n, theta);
    }
    let (m, nf, t) = (M as f64, n as f64, theta);
    let f = |x: f64| x.powf(-t);
    let f1 = |x: f64| -t * x.powf(-t - 1.0);
    let f3 = |x: f64| -t * (t + 1.0) * (t + 2.0) * x.powf(-t - 3.0);
    let head = zeta_sum(M - 1, theta);
    let integral = (nf.powf(1.0 - t) - m.powf(1.0 - t)) / (1.0 - t);
    head + integral + (f(m) + f(nf)) / 2.0 + (f1(nf) - f1(m)) / 12.0 - (f3(nf) - f3(m)) / 720.0
}

/// The precomputed constants of Gray et al.'s inversion for `items` items.
#[derive(Clone, Debug)]
struct GrayParams {
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    /// 1 + 0.5^θ = ζ(2, θ): below this times ζ(n) the rank is 2.
    zeta2: f64,
}

impl GrayParams {
    fn new(items: u64, theta: f64) -> GrayParams {
        assert!(items >= 1, "a Zipfian needs at least one item");
        assert!(
            (0.0..1.0).contains(&theta),
            "Zipf θ must be in [0, 1), got {theta}"
        );
        let zetan = zeta(items, theta);
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        GrayParams {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta,
            zeta2,
        }
    }

    /// A 0-based rank in [0, items): rank 0 is the most popular.
    #[inline]
    fn rank(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.zeta2 || self.items <= 2 {
            return 1.min(self.items - 1);
        }
        let r = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        // u → 1 gives exactly `items`; clamp (DBx1000 and YCSB leave it out of range).
        r.min(self.items - 1)
    }
}

/// DBx1000/CCBench's Zipfian over `[0, n)`: key = rank, hot keys are the low keys.
#[derive(Clone, Debug)]
pub struct GrayZipf {
    params: GrayParams,
}

impl GrayZipf {
    pub fn new(n: u64, theta: f64) -> GrayZipf {
        GrayZipf {
            params: GrayParams::new(n, theta),
        }
    }

    /// A key in [0, n).
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        if self.params.theta == 0.0 {
            return rng.below(self.params.items);
        }
        self.params.rank(rng.next_f64())
    }

    /// Analytic probability of 0-based rank `r`: (r+1)^−θ / ζ(n, θ).
    #[cfg(test)]
    pub fn probability(&self, r: u64) -> f64 {
        ((r + 1) as f64).powf(-self.params.theta) / self.params.zetan
    }
}

/// Largest item count of `ExactZipf` (its CDF takes 8 bytes per item).
pub const EXACT_ZIPF_MAX_N: u64 = 1 << 24;

/// Zipf with exponent `s ≥ 0` over `[0, n)`, exactly: P(rank r) = (r+1)^−s / Σ i^−s, by
/// inversion of the precomputed CDF. Key = rank, hot keys are the low keys; s = 0 is uniform.
#[derive(Clone, Debug)]
pub struct ExactZipf {
    /// `cdf[r]` = P(rank ≤ r); the last entry is 1.
    cdf: Vec<f64>,
}

impl ExactZipf {
    /// `Err` names the problem: no items, too many, or an exponent that is negative or not
    /// finite.
    pub fn new(n: u64, s: f64) -> Result<ExactZipf, String> {
        if n == 0 || n > EXACT_ZIPF_MAX_N {
            return Err(format!(
                "a Zipf distribution over {n} items: the exact generator takes 1..={EXACT_ZIPF_MAX_N}"
            ));
        }
        if !(s.is_finite() && s >= 0.0) {
            return Err(format!(
                "Zipf exponent must be a finite number ≥ 0, got {s}"
            ));
        }
        let mut cdf = Vec::with_capacity(n as usize);
        let mut sum = 0.0;
        for i in 1..=n {
            sum += (i as f64).powf(-s);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }
        Ok(ExactZipf { cdf })
    }

    /// A key in [0, n): the first rank whose CDF exceeds a uniform draw in [0, 1).
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        let u = rng.next_f64();
        let r = self.cdf.partition_point(|&c| c <= u);
        r.min(self.cdf.len() - 1) as u64
    }

    /// Probability of 0-based rank `r`.
    #[cfg(test)]
    pub fn probability(&self, r: u64) -> f64 {
        let r = r as usize;
        self.cdf[r] - if r == 0 { 0.0 } else { self.cdf[r - 1] }
    }
}

/// YCSB's `ScrambledZipfianGenerator` over `[0, n)`.
#[derive(Clone, Debug)]
pub struct ScrambledZipf {
    n: u64,
    params: GrayParams,
}

impl ScrambledZipf {
    pub fn new(n: u64, theta: f64) -> ScrambledZipf {
        assert!(n >= 1, "a key range needs at least one key");
        ScrambledZipf {
            n,
            params: GrayParams::new(YCSB_ITEM_COUNT, theta),
        }
    }

    /// A key in [0, n).
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        fnv1a64_abs(self.params.rank(rng.next_f64())) % self.n
    }
}

/// YCSB's `Utils.fnvhash64`: FNV-1a 64 over the eight little-endian bytes of `v`, then Java's
/// `Math.abs` of the signed result (as an unsigned magnitude, so i64::MIN stays positive).
#[inline]
pub fn fnv1a64_abs(mut v: u64) -> u64 {
    const OFFSET_BASIS: u64 = 0xCBF2_9CE4_8422_2325;
    const PRIME: u64 = 1_099_511_628_211;
    let mut h = OFFSET_BASIS;
    for _ in 0..8 {
        h ^= v & 0xFF;
        v >>= 8;
        h = h.wrapping_mul(PRIME);
    }
    (h as i64).unsigned_abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn euler_maclaurin_matches_the_sum_and_ycsbs_constant() {
        for theta in [0.0, 0.3, 0.5, 0.9, 0.99] {
            let exact = zeta_sum(1_000_000, theta);
            let em = zeta_euler_maclaurin(1_000_000, theta);
            assert!(
                ((em - exact) / exact).abs() < 1e-12,
                "θ={theta}: {em} vs {exact}"
            );
        }
        // YCSB's ScrambledZipfianGenerator.ZETAN, computed there by a 10^10-term sum.
        let z = zeta(YCSB_ITEM_COUNT, 0.99);
        assert!(((z - 26.46902820178302) / z).abs() < 1e-10, "{z}");
    }

    #[test]
    fn zeta_is_cached_and_small_cases_are_exact() {
        assert_eq!(zeta(1, 0.9), 1.0);
        assert!((zeta(2, 0.5) - (1.0 + 2f64.powf(-0.5))).abs() < 1e-15);
        assert_eq!(zeta(1000, 0.0), 1000.0);
        assert_eq!(zeta(12_345, 0.7).to_bits(), zeta(12_345, 0.7).to_bits());
    }

    /// Empirical frequencies of the top ranks against (r+1)^−θ / ζ(n, θ).
    #[test]
    fn gray_frequencies_match_zipf() {
        const N: u64 = 1000;
        const SAMPLES: usize = 1_000_000;
        for theta in [0.0, 0.5, 0.9, 0.99] {
            let z = GrayZipf::new(N, theta);
            let mut rng = Rng::new(42, theta.to_bits());
            let mut counts = vec![0u64; N as usize];
            for _ in 0..SAMPLES {
                let k = z.next(&mut rng);
                assert!(k < N);
                counts[k as usize] += 1;
            }
            for r in 0..10u64 {
                let p = z.probability(r);
                let emp = counts[r as usize] as f64 / SAMPLES as f64;
                let sigma = (p * (1.0 - p) / SAMPLES as f64).sqrt();
                // Ranks 0 and 1 (and every rank at θ = 0) are exact in Gray's method; later
                // ranks carry its approximation error (≤ 17% at rank 2 for n = 1000).
                let approx = if r < 2 || theta == 0.0 { 0.0 } else { 0.2 * p };
                assert!(
                    (emp - p).abs() <= 5.0 * sigma + approx,
                    "θ={theta} rank {r}: empirical {emp:.5} vs analytic {p:.5}"
                );
            }
            // The mass of the hottest 10% of keys.
            let emp_top: f64 = counts[..100].iter().sum::<u64>() as f64 / SAMPLES as f64;
            let top: f64 = (0..100).map(|r| z.probability(r)).sum();
            assert!(
                (emp_top - top).abs() < 0.02,
                "θ={theta}: top-10% mass {emp_top:.4} vs {top:.4}"
            );
        }
    }

    #[test]
    fn gray_handles_tiny_ranges() {
        let mut rng = Rng::new(1, 1);
        for n in [1u64, 2, 3] {
            for theta in [0.0, 0.5, 0.99] {
                let z = GrayZipf::new(n, theta);
                let mut seen = vec![false; n as usize];
                for _ in 0..10_000 {
                    seen[z.next(&mut rng) as usize] = true;
                }
                assert!(seen.iter().all(|&s| s), "n={n} θ={theta}: {seen:?}");
            }
        }
    }

    #[test]
    fn fnv_matches_ycsb() {
        // Java: Utils.fnvhash64(0), (1), (12345).
        assert_eq!(fnv1a64_abs(0), 6284781860667377211);
        assert_eq!(fnv1a64_abs(1), 8517097267634966620);
        assert_eq!(fnv1a64_abs(12345), 1792800413050876852);
    }

    #[test]
    fn scrambled_covers_the_range_and_is_deterministic() {
        for theta in [0.0, 0.5, 0.99] {
            let z = ScrambledZipf::new(1000, theta);
            let draw = |seed| {
                let mut rng = Rng::new(seed, 3);
                (0..200_000).map(|_| z.next(&mut rng)).collect::<Vec<u64>>()
            };
            let a = draw(7);
            assert_eq!(a, draw(7));
            assert_ne!(a, draw(8));
            let mut seen = vec![false; 1000];
            for &k in &a {
                assert!(k < 1000);
                seen[k as usize] = true;
            }
            assert!(seen.iter().all(|&s| s), "θ={theta}: not every key drawn");
            if theta > 0.9 {
                // Scrambling moves the hottest key away from key 0: YCSB's rank 0 maps to
                // |fnv(0)| mod 1000, and it carries 1/ζ(10^10, θ) of the draws.
                let hot = (fnv1a64_abs(0) % 1000) as usize;
                let share =
                    a.iter().filter(|&&k| k as usize == hot).count() as f64 / a.len() as f64;
                assert!(
                    share > 0.9 / zeta(YCSB_ITEM_COUNT, theta),
                    "hot key share {share}"
                );
            }
        }
        let one = ScrambledZipf::new(1, 0.99);
        let mut rng = Rng::new(0, 0);
        assert!((0..100).all(|_| one.next(&mut rng) == 0));
    }

    /// The exact generator draws each rank with its Zipf probability for exponents ≥ 1
    /// (where Gray's closed form does not apply), and refuses what it cannot draw.
    #[test]
    fn exact_zipf_frequencies_match_for_exponents_of_one_and_above() {
        for s in [0.0, 1.0, 1.2, 2.0] {
            let z = ExactZipf::new(100, s).unwrap();
            let want0 = if s == 0.0 {
                0.01
            } else {
                1.0 / (1..=100).map(|i| (i as f64).powf(-s)).sum::<f64>()
            };
            assert!((z.probability(0) - want0).abs() < 1e-12, "s={s}");
            let mut rng = Rng::new(9, 1);
            let draws = 200_000;
            let mut counts = [0u64; 100];
            for _ in 0..draws {
                counts[z.next(&mut rng) as usize] += 1;
            }
            for r in [0u64, 1, 9] {
                let p = z.probability(r);
                let got = counts[r as usize] as f64 / draws as f64;
                assert!(
                    (got - p).abs() < 4.0 * (p * (1.0 - p) / draws as f64).sqrt() + 1e-4,
                    "s={s} rank {r}: {got} vs {p}"
                );
            }
        }
        assert!(ExactZipf::new(0, 1.2).is_err());
        assert!(ExactZipf::new(10, -1.0).is_err());
        assert!(ExactZipf::new(10, f64::NAN).is_err());
        assert!(ExactZipf::new(EXACT_ZIPF_MAX_N + 1, 1.0).is_err());
    }
}
