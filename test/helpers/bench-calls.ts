// The benchmark's three calls (bench/run.ts), as the SPEC §12 guards send them: a base's UUID
// by number (the rotating call's 1,000 bases) and the append's 1,000-row JSON body (43 KB).

/** The n-th base of the rotating call, hyphenated as clients send it. */
export const benchUuid = (n: number) =>
  `${n.toString(16).padStart(8, '0')}-0d3b-4c59-9a51-3e2d7c8b9a10`

const ROWS = Array.from(
  { length: 1000 },
  (_, i) => `{"Name":"row ${i}","Count":${i},"Done":false}`
).join(',')

/** The append's body: 1,000 rows of three fields. */
export const APPEND_BODY = `{"table_name":"Table1","rows":[${ROWS}],"apply_default":false}`
