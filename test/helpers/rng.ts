/** A seeded generator of numbers in (0, 1) (Park–Miller): fuzz tests that replay the same cases. */
export function rng(seed: number): () => number {
  return () => (seed = (seed * 48271) % 2147483647) / 2147483647
}
