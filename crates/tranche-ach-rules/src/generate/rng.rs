//! The generator's random numbers: SplitMix64, written out so a seed gives the same
//! day on every machine and after every dependency update (benchmarks and tests
//! compare days by seed).

/// A SplitMix64 stream.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    #[cfg(test)]
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// A stream of its own for `(seed, stream)`: segments draw from their own, so a
    /// segment's entries do not depend on how many numbers the others drew.
    pub fn derived(seed: u64, stream: u64) -> Self {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F));
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// In `lo..=hi`, as likely in each factor of ten as in the next: amounts and
    /// sizes of things spread that way (many small, few large).
    pub fn log_uniform(&mut self, lo: u64, hi: u64) -> u64 {
        let (l, h) = ((lo as f64).ln(), (hi as f64).ln());
        let v = (l + (h - l) * self.unit()).exp().round() as u64;
        v.clamp(lo, hi)
    }

    /// `n` decimal digits.
    pub fn digits(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| char::from(b'0' + self.below(10) as u8))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_fixed_by_its_seed() {
        // SplitMix64's published first output for seed 0.
        assert_eq!(Rng::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
        let a: Vec<u64> = (0..5).map(|_| Rng::derived(7, 3).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(Rng::derived(7, 3).next_u64(), Rng::derived(7, 4).next_u64());
    }

    #[test]
    fn draws_stay_in_their_ranges() {
        let mut r = Rng::new(42);
        for _ in 0..10_000 {
            assert!(r.below(7) < 7);
            assert!((3..=9).contains(&r.range(3, 9)));
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
            assert!((50_000..=900_000).contains(&r.log_uniform(50_000, 900_000)));
        }
        assert_eq!(r.digits(12).len(), 12);
    }
}
