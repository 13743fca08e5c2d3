// One string hash for the places that need a number for a string and can live with a rare
// collision: FNV-1a (32 bits) over the string's UTF-16 code units. Cheap (no allocation) and
// stable across processes and releases (the tuning shards are named by it).

const FNV_OFFSET = 0x811c9dc5

/** FNV-1a of `s`, continuing from `h` (chain strings by passing the last result). */
export function fnv1a(s: string, h: number = FNV_OFFSET): number {
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193)
  return h | 0
}
