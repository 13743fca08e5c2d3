// Reading a gateway's /metrics in a test: one parser for every test that reads a figure.

/** A metric in a /metrics text: the sum of its series (every label set); NaN when it has none. */
export function metricSum(text: string, name: string): number {
  let sum = NaN
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue
    const rest = line.slice(name.length)
    if (rest[0] !== ' ' && rest[0] !== '{') continue // another metric whose name starts so
    const v = Number(rest.slice(rest.lastIndexOf(' ') + 1))
    sum = Number.isNaN(sum) ? v : sum + v
  }
  return sum
}

/** A metric of the gateway whose admin listener is at `adminUrl` (see metricSum). */
export async function metricOf(
  adminUrl: string,
  name: string,
  headers: Record<string, string> = {}
): Promise<number> {
  return metricSum(await (await fetch(`${adminUrl}/metrics`, { headers })).text(), name)
}
