// SPEC §12 "what a call costs": what depends only on a request's method and path is worked out
// once while the path stays in a bounded map (a client calling the same paths again pays one
// lookup; a flood of made-up paths empties the map when it fills, and costs what it did before).
// Only short keys are kept: 4,000 made-up paths of 15 KB (Node takes a head of 16 KB) held 63 MiB
// in these maps after a full collection (SPEC §4: nothing a stranger sends outlives its window).

/** The longest key (a path, or a method and a path) a memo keeps; the service's paths are under 150. */
export const MEMO_KEY_MAX = 512

/** A bounded memo of `compute(a, b)`, by `a` then `b` (no key string is built per call). */
export function memo2<V>(
  max: number,
  compute: (a: string, b: string) => V
): (a: string, b: string) => V {
  const byA = new Map<string, Map<string, V>>()
  let size = 0
  return (a, b) => {
    let byB = byA.get(a)
    if (byB !== undefined) {
      const hit = byB.get(b)
      if (hit !== undefined || byB.has(b)) return hit as V
    }
    const v = compute(a, b)
    if (a.length + b.length > MEMO_KEY_MAX) return v
    if (size >= max) {
      byA.clear()
      size = 0
      byB = undefined
    }
    if (byB === undefined) byA.set(a, (byB = new Map()))
    byB.set(b, v)
    size++
    return v
  }
}

/** A bounded memo of `compute(a)`. */
export function memo1<V>(max: number, compute: (a: string) => V): (a: string) => V {
  const m = new Map<string, V>()
  return (a) => {
    const hit = m.get(a)
    if (hit !== undefined || m.has(a)) return hit as V
    const v = compute(a)
    if (a.length > MEMO_KEY_MAX) return v
    if (m.size >= max) m.clear()
    m.set(a, v)
    return v
  }
}
