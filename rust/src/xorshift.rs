//! A small deterministic PRNG (xorshift64*, Vigna 2016) for the randomised `greedy_dag`
//! tests and `cargo bench --bench greedy_dag`: the same e-graphs on every run and machine.
//! Compiled into the library only for its tests; the bench includes this file by path.

/// xorshift64* state; seed with any non-zero value.
pub struct Rng(pub u64);

impl Rng {
    /// A value in `0..m` (`m` > 0).
    pub fn below(&mut self, m: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as usize % m
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// One of `xs`, uniformly (`xs` non-empty).
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
}
