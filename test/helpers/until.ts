// A wait for what a test is waiting for (issue #48: no fixed sleeps): `read` asked again every
// `everyMs` until `ok` holds of its answer, which is returned; past `timeoutMs` the test fails
// naming `what` and the last answer seen.
export async function until<T>(
  what: string,
  read: () => T | Promise<T>,
  ok: (v: T) => boolean,
  { timeoutMs = 10_000, everyMs = 25 }: { timeoutMs?: number; everyMs?: number } = {}
): Promise<T> {
  const end = performance.now() + timeoutMs
  for (;;) {
    const v = await read()
    if (ok(v)) return v
    if (performance.now() > end)
      throw new Error(`waited ${timeoutMs} ms for ${what}; last seen: ${JSON.stringify(v)}`)
    await new Promise((r) => setTimeout(r, everyMs))
  }
}

/** `until` of a condition alone (it names itself in the failure). */
export async function holds(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  everyMs = 25
): Promise<void> {
  await until(cond.toString(), cond, (v) => v, { timeoutMs, everyMs })
}
