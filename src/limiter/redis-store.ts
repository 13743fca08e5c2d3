import { randomBytes } from 'node:crypto'
import { scriptBeside, type Part } from './script.js'
import type { Cluster, Redis } from 'ioredis'
import {
  BUCKETS_PER_WINDOW,
  windowMsOf,
  type BatchId,
  type Charge,
  type CheckTag,
  type ConsumeOptions,
  type CreditEntry,
  type Decision,
  type GiveBack,
  type LedgerBatch,
  type LedgerMonth,
  type LedgerRef,
  type LimiterStore,
} from '../types.js'
import { keys } from './keys.js'
import type { Clock } from '../clock.js'
import { admitNothing, toWindowState } from './decision.js'
import { StoreError } from './store-error.js'
import { slotGroups } from './pipeline.js'
import { sendBatch } from './batch-write.js'
import { TurnBatch } from './turn-batch.js'

/** SPEC §5: days are kept 400 days (a ledger: past its month's end). */
export const LEDGER_KEEP_DAYS = 400

const lua = (name: string, uses: readonly Part[] = []) =>
  scriptBeside(new URL('./lua/', import.meta.url).href, name, uses)
/**
 * One script per purpose, each after the shared parts it uses (fastify-rate-limit's `{ increment, read }`).
 * The check answers its commonest call (check-short.lua) after the clock and before the rest.
 */
export const CHECK = lua('check', ['clock', { own: 'check-short' }, 'prelude', 'ledger'])
const GIVE_BACK = lua('give-back', ['clock', 'prelude', 'ledger'])
/** SPEC §5: a credit kept as an entry, and the team's late calls written once per batch. */
const CREDIT = lua('credit', ['ledger'])
const LEDGER_ADD = lua('ledger-add', ['once', 'ledger'])
const CLAIM_NOTICE = lua('claim-notice')

type Script = (numKeys: number, ...args: (string | number)[]) => Promise<number[]>
/** A client with the scripts defined on it, by command name. */
type ScriptClient = (Redis | Cluster) & Record<string, Script>

/** A check's tag numbers wrap here (they fit a ring's four bytes, lua/ledger.lua). */
const TAG_SEQS = 2 ** 31

/** The index (1-based, as Lua's KEYS) of `key` in `names` from `from` on, appended if missing. */
function keyIndex(names: string[], key: string, from: number): number {
  const j = names.indexOf(key, from)
  return (j === -1 ? names.push(key) - 1 : j) + 1
}

/** check.lua's argument that holds the deadline (see check()), in the long form and the short (check-short.lua). */
const DEADLINE_ARG = 2

/** The clock check.lua buckets on: its script, the arguments it takes after the windows', and whether deadlines apply. */
export interface CheckClock {
  /** The command the script is defined as (one per script on a shared client). */
  command: string
  lua: string
  args(nowMs: number): readonly number[]
  deadlines: boolean
}
const NO_ARGS: readonly number[] = []
const STORE_CLOCK: CheckClock = {
  command: 'basegateCheck',
  lua: CHECK,
  args: () => NO_ARGS,
  deadlines: true,
}

/** A check-script call waiting for the end of its turn (see writeChecks). */
interface QueuedCheck {
  keys: string[]
  argv: (string | number)[]
  /** Whether argv[DEADLINE_ARG] gets the store-clock deadline when the call is written. */
  deadline: boolean
  resolve(answer: Written): void
  reject(err: unknown): void
}

/** A check's answer, and when (this process's clock) it was written to the store. */
interface Written {
  raw: number[]
  sentMs: number
}

export interface RedisStoreOptions {
  /** Prepended to every key (store.prefix). */
  prefix: string
  /** Redis Cluster: a request's windows may span slots (see consume). */
  cluster?: boolean
  /** The caller's timeout for one call (store.timeout_ms): the script's deadline. */
  timeoutMs?: number
  /** This process's clock (for the store clock's offset); the system's by default. */
  clock: Clock
}

/** The script's answers per window (used, resetAt, retryAt, limit, charged). */
const ANSWERS_PER_WINDOW = 5
/** check-short.lua's answer's length: { 1, storeNow, used, resetAt } (the long form's is 8 or more, a passed deadline's 3). */
const SHORT_ANSWER = 4

/** A plain check's keys and arguments, built once per windows (plainCheck). */
interface PlainCheck {
  keys: string[]
  argv: (string | number)[]
}

/**
 * Counters in Redis: one EVALSHA per request for all its windows (ioredis defineCommand sends
 * EVALSHA and falls back to EVAL once after a restart flushed the script cache).
 */
export class RedisStore implements LimiterStore {
  private readonly client: ScriptClient
  private offsetMs = 0
  private offsetAtMs = 0
  /** The tags of checks that charge a month: this store's id and a number per check (SPEC §5). */
  private readonly storeId = randomBytes(4).toString('hex')
  private tagSeq = 0
  private offsetKnown = false
  private readonly clock: Clock
  private readonly checks = new TurnBatch<QueuedCheck>((calls) => this.writeChecks(calls))

  constructor(
    client: Redis | Cluster,
    private readonly opts: RedisStoreOptions
  ) {
    const check = this.checkClock()
    client.defineCommand(check.command, { lua: check.lua })
    client.defineCommand('basegateGiveBack', { lua: GIVE_BACK })
    client.defineCommand('basegateCredit', { lua: CREDIT })
    client.defineCommand('basegateLedgerAdd', { lua: LEDGER_ADD })
    client.defineCommand('basegateClaimNotice', { lua: CLAIM_NOTICE })
    this.client = client as ScriptClient
    this.clock = opts.clock
  }

  /**
   * The clock check.lua buckets a call on: the store's own (TIME), one clock for every instance
   * sharing the store (SPEC §3), and so the one a deadline is set on. The seam a test uses to
   * drive time by hand (test/helpers/caller-clock.ts: its own copy of the script).
   */
  protected checkClock(): CheckClock {
    return STORE_CLOCK
  }

  /**
   * `opts.asks` (limiter/leases.ts): by window key, the calls to charge as a lease. A
   * request whose windows span Cluster slots takes no lease: giving a share back after a later
   * slot refused would need a second refund path for little gain.
   */
  consume(charges: readonly Charge[], nowMs: number, opts?: ConsumeOptions): Promise<Decision> {
    if (this.opts.cluster && charges.length > 1) {
      const groups = this.bySlot(charges, (c) => c.key)
      if (groups.length > 1) return this.consumeAcrossSlots(charges, groups, nowMs)
    }
    return this.check(charges, nowMs, { peek: false, asks: opts?.asks })
  }

  /**
   * Takes back calls charged earlier, each from the bucket it was charged in: unused lease
   * shares, the refund of a request refused on a later Cluster slot, a shed call. One script
   * call, or one per slot on a Cluster.
   */
  async giveBack(uses: readonly GiveBack[]): Promise<void> {
    const groups = this.opts.cluster
      ? this.bySlot(uses, (u) => u.charge.key)
      : [uses.map((_, i) => i)]
    await Promise.all(groups.map((g) => this.runGiveBack(pick(uses, g))))
  }

  async peek(charges: readonly Charge[], nowMs: number): Promise<Decision> {
    const peek = { peek: true }
    if (!this.opts.cluster || charges.length < 2) return this.check(charges, nowMs, peek)
    const groups = this.bySlot(charges, (c) => c.key)
    const parts = await Promise.all(groups.map((g) => this.check(pick(charges, g), nowMs, peek)))
    return merge(charges.length, groups, parts)
  }

  /** Indexes of the items, grouped by the Cluster slot of their key (pipeline.ts). */
  private bySlot<T>(items: readonly T[], keyOf: (item: T) => string): number[][] {
    return slotGroups(items, (item) => this.opts.prefix + keyOf(item))
  }

  /**
   * Redis Cluster runs a script on one slot, and a request's windows may span slots (see
   * limiter/keys.ts). Such a request is checked slot by slot, in order; if a later slot
   * refuses, the earlier ones are refunded (the call given back to the bucket it was charged
   * in, on the store's clock at that charge). Until the refund the count is one high, which can
   * only refuse, never admit, a call: SPEC §3 holds.
   */
  private async consumeAcrossSlots(
    charges: readonly Charge[],
    groups: number[][],
    nowMs: number
  ): Promise<Decision> {
    const parts: Decision[] = []
    for (let g = 0; g < groups.length; g++) {
      const part = await this.check(pick(charges, groups[g]!), nowMs, { peek: false })
      parts.push(part)
      if (part.allowed) continue
      for (let r = 0; r < g; r++) await this.refund(charges, groups[r]!, parts[r]!)
      for (let rest = g + 1; rest < groups.length; rest++) {
        parts.push(await this.check(pick(charges, groups[rest]!), nowMs, { peek: true }))
      }
      return { ...merge(charges.length, groups, parts), allowed: false }
    }
    return merge(charges.length, groups, parts)
  }

  /** Takes back one slot's charge (a dry-run rule that was over was never charged). */
  private async refund(charges: readonly Charge[], group: number[], part: Decision): Promise<void> {
    const charged = group.filter((i, j) => {
      const c = charges[i]!
      return !(c.kind === 'rule' && c.dryRun && part.windows[j]!.retryAtMs !== 0)
    })
    const uses = charged.map((i) => ({ charge: charges[i]!, units: 1, atMs: part.nowMs }))
    await this.giveBack(uses).catch(() => {})
    for (const w of part.windows) {
      w.used -= 1
      w.remaining = Math.max(0, w.limit - w.used)
    }
  }

  /** The store's clock as this process estimates it (for the script's deadline). */
  private storeNowMs(localMs: number): number {
    return localMs + this.offsetMs
  }

  /**
   * Learns the store clock's offset from an answer. The script ran between the call's writing
   * and its answer's reading, so storeNow - receivedAt is at most the true offset: a deadline
   * on that estimate is never later than the caller's own timeout, however long the answer
   * took (a late deadline would let a call the caller gave up on, and charged locally, charge
   * in the store too). The largest bound is the closest: it is kept until a larger one comes,
   * or until it is 10 s old, when the next answer's bound replaces it whatever it is (so a clock
   * stepped back is learned within 10 s; a low bound taken then lasts only until an answer read
   * sooner after its script, usually the next one).
   */
  private learnOffset(storeNowMs: number): void {
    const local = this.clock.now()
    const bound = storeNowMs - local
    if (!this.offsetKnown || bound > this.offsetMs || local - this.offsetAtMs > 10_000) {
      this.offsetMs = bound
      this.offsetAtMs = local
      this.offsetKnown = true
    }
  }

  /**
   * The keys and arguments of a charging check of windows with no month and no lease (the same
   * windows of the same path: the classifier hands the same array), built once per array. One
   * window that is not a dry-run rule goes in the short form (check-short.lua: 4 arguments, not
   * 12; answered before the script makes its functions), the rest in the long form. The short
   * form is exactly 4 arguments, so a clock that adds its own (a test's) takes the long form.
   */
  private readonly plainChecks = new WeakMap<readonly Charge[], PlainCheck | null>()
  private plainCheck(charges: readonly Charge[]): PlainCheck | null {
    let p = this.plainChecks.get(charges)
    if (p !== undefined) return p
    const dryRun = (c: Charge) => c.kind === 'rule' && c.dryRun
    if (charges.some((c) => c.kind === 'monthly')) p = null
    else if (
      charges.length === 1 &&
      !dryRun(charges[0]!) &&
      this.checkClock().args(0).length === 0
    ) {
      const c = charges[0]!
      // The deadline (0 until written) where the long form has it: DEADLINE_ARG.
      p = {
        keys: [this.opts.prefix + c.key],
        argv: [BUCKETS_PER_WINDOW, c.limit, 0, windowMsOf(c)],
      }
    } else {
      const keys = charges.map((c) => this.opts.prefix + c.key)
      const argv: (string | number)[] = [BUCKETS_PER_WINDOW, 0, 0, 0]
      for (const c of charges) argv.push(c.limit, windowMsOf(c), 0, 0, dryRun(c) ? 1 : 0, 0, '', 0)
      p = { keys, argv }
    }
    this.plainChecks.set(charges, p)
    return p
  }

  /**
   * Keys in KEYS order, and for each monthly window the index (1-based) of its team quota key
   * and, with `rings` (a charging check), of its ledger's ring for this store (0 where none);
   * `monthly`: whether any window is a month (a charging check with one is tagged).
   */
  private keysOf(
    charges: readonly Charge[],
    rings: boolean
  ): { keys: string[]; quotaAt: number[]; ringAt: number[]; monthly: boolean } {
    const prefix = this.opts.prefix
    const n = charges.length
    const names: string[] = new Array(n)
    const quotaAt: number[] = new Array(n)
    const ringAt: number[] = new Array(n)
    let monthly = false
    for (let i = 0; i < n; i++) names[i] = prefix + charges[i]!.key
    for (let i = 0; i < n; i++) {
      const c = charges[i]!
      quotaAt[i] = ringAt[i] = 0
      if (c.kind !== 'monthly') continue
      monthly = true
      quotaAt[i] = keyIndex(names, prefix + c.quotaKey, n)
      if (rings) ringAt[i] = keyIndex(names, prefix + keys.ledgerRing(c.key, this.storeId), n)
    }
    return { keys: names, quotaAt, ringAt, monthly }
  }

  private async call(script: string, keys: string[], argv: (string | number)[]): Promise<number[]> {
    return this.timed(this.client[script]!(keys.length, ...keys, ...argv))
  }

  /** A store command under store.timeout_ms (see answerWithin); any failure is a StoreError. */
  private async timed<T>(command: Promise<T>): Promise<T> {
    try {
      const ms = this.opts.timeoutMs
      return ms === undefined ? await command : await answerWithin(command, ms, this.clock)
    } catch (err) {
      if (err instanceof StoreError) throw err
      throw new StoreError(`redis: ${(err as Error).message}`, { cause: err })
    }
  }

  /**
   * Issue #22: until a script has answered, this process does not know the store clock's
   * offset and could send no deadline, so a call queued in a frozen store's socket would charge
   * when it woke. So the first charging call waits for one TIME (harmless if it runs late); if
   * that does not answer in time, the call fails without sending anything that charges. Asked
   * only while the offset is unknown (check).
   */
  private learning: Promise<void> | null = null
  private async ensureOffset(): Promise<void> {
    this.learning ??= (async () => {
      const [sec, usec] = await this.timed((this.client as Redis).time())
      this.learnOffset(Number(sec) * 1000 + Math.floor(Number(usec) / 1000))
    })().finally(() => (this.learning = null))
    await this.learning
  }

  /** check.lua: check and charge (or only read) every window; see its header for the arguments. */
  private async check(
    charges: readonly Charge[],
    nowMs: number,
    opts: { peek: boolean; asks?: ReadonlyMap<string, number> }
  ): Promise<Decision> {
    const n = charges.length
    if (n === 0) return admitNothing(nowMs)
    const clock = this.checkClock()
    const deadline = !opts.peek && clock.deadlines && Boolean(this.opts.timeoutMs)
    // Known after the first answer: no await (a promise and a turn of the microtask queue) a call.
    if (deadline && !this.offsetKnown) await this.ensureOffset()
    // Issue #11: a call the caller has given up on (its timeout) must never charge later; the
    // script compares a deadline (argument DEADLINE_ARG, 0: none) with its own clock. It is set
    // when the call is written, when the caller's timer starts too, so the script gives up no
    // later than the caller.
    let keys: string[]
    let argv: (string | number)[]
    let tag: CheckTag | undefined
    const plain = opts.asks === undefined && !opts.peek ? this.plainCheck(charges) : null
    if (plain !== null) {
      // SPEC §12: the arguments of the same windows are built once (a copy per call).
      keys = plain.keys
      argv = plain.argv.slice()
    } else {
      const k = this.keysOf(charges, !opts.peek)
      // A charging check with a month is tagged: check.lua notes the tag where it charged, so
      // an owed call whose check went unanswered is written only if the check did not charge it.
      if (k.monthly && !opts.peek)
        tag = { store: this.storeId, seq: (this.tagSeq = (this.tagSeq % TAG_SEQS) + 1) }
      keys = k.keys
      argv = [BUCKETS_PER_WINDOW, opts.peek ? 1 : 0, 0, tag?.seq ?? 0]
      for (let i = 0; i < n; i++) {
        const c = charges[i]!
        const monthly = c.kind === 'monthly'
        const shadow = c.kind === 'rule' && c.dryRun ? 1 : 0
        const ask = opts.asks?.get(c.key) ?? 0
        argv.push(c.limit, windowMsOf(c), monthly ? c.endMs : 0, k.quotaAt[i]!, shadow, ask)
        argv.push(monthly ? `d${c.day}` : '', k.ringAt[i]!)
      }
    }
    for (const a of clock.args(nowMs)) argv.push(a)
    let written: Written
    try {
      written = await this.runCheck(keys, argv, deadline)
    } catch (err) {
      if (tag !== undefined && err instanceof StoreError)
        throw new StoreError(err.message, { cause: err.cause ?? err, inDoubt: tag })
      throw err
    }
    const { raw } = written
    if (raw.length === SHORT_ANSWER) {
      // check-short.lua's answer: admitted, one charged, under the caller's limit.
      const storeNow = raw[1]!
      this.learnOffset(storeNow)
      const w = toWindowState(raw[2]!, raw[3]!, 0, storeNow, charges[0]!.limit)
      return { allowed: true, windows: [w], nowMs: storeNow, storeMs: storeNow }
    }
    const decisionNow = raw[1]!
    const storeNow = raw[2]!
    this.learnOffset(storeNow)
    if (raw[0] === -1) throw new StoreError('redis: the call reached the store after its deadline')
    const windows = new Array(n)
    for (let i = 0; i < n; i++) {
      const o = 3 + ANSWERS_PER_WINDOW * i
      const w = toWindowState(raw[o]!, raw[o + 1]!, raw[o + 2]!, decisionNow, raw[o + 3]!)
      if (opts.asks !== undefined) w.charged = raw[o + 4]!
      windows[i] = w
    }
    return { allowed: raw[0] === 1, windows, nowMs: decisionNow, storeMs: storeNow }
  }

  /**
   * check.lua, written with the other checks of this turn as one write (writeChecks). On a
   * Cluster a call goes alone and at once: a batch must stay within one slot.
   */
  private runCheck(keys: string[], argv: (string | number)[], deadline: boolean): Promise<Written> {
    if (this.opts.cluster) {
      const sentMs = this.clock.now()
      if (deadline) argv[DEADLINE_ARG] = this.deadlineAt(sentMs)
      return this.call(this.checkClock().command, keys, argv).then((raw) => ({ raw, sentMs }))
    }
    return new Promise((resolve, reject) =>
      this.checks.add({ keys, argv, deadline, resolve, reject })
    )
  }

  /**
   * One turn's checks, in one write (issue #22, SPEC §3). A batch goes at once however many
   * earlier ones are unanswered, and its deadline and timeout start now, when it is written: a
   * batch held back behind this process's own late read of earlier answers would reach Redis
   * past its deadline, and load alone would send the instance to its fallback (ioredis's
   * auto-pipelining holds a turn's calls that way).
   *
   * The turn's commands are written on the corked socket, not as an ioredis `pipeline()`: the
   * socket sends them in one write all the same, but a `Pipeline` and its commands outlived the
   * young generation's collections: at 2,800 calls a second 4.3 MB survived each scavenge, each a
   * 3.3–5 ms pause; written alone, 0.85 MB and 1.0–1.4 ms (SPEC §12; docs/benchmarks.md, 0.7.5).
   * Each call is answered when its own answer is read; one timer a turn bounds them all.
   */
  private writeChecks(calls: QueuedCheck[]): void {
    const sentMs = this.clock.now()
    const deadline = this.deadlineAt(sentMs)
    const command = this.checkClock().command
    const script = this.client[command]!
    const client = this.client as Redis
    const socket = client.stream as Redis['stream'] | undefined
    // The turn's one timer (timed, below) bounds these answers, so ioredis's per-command backstop
    // (redis-client.ts: commandTimeout, a timer set and cleared for every command it sends) is
    // off while they are written: it cost a timer a call (SPEC §12). Without store.timeout_ms
    // (the unit tests' stores) the backstop stays.
    const backstop = client.options.commandTimeout
    if (this.opts.timeoutMs !== undefined) client.options.commandTimeout = undefined
    socket?.cork()
    // One promise a turn, settled when the last answer is read: the turn's timer is on it.
    let left = calls.length
    let allRead!: () => void
    const read = new Promise<void>((resolve) => (allRead = resolve))
    const answered = () => {
      if (--left === 0) allRead()
    }
    try {
      for (const c of calls) {
        if (c.deadline) c.argv[DEADLINE_ARG] = deadline
        script.call(this.client, c.keys.length, ...c.keys, ...c.argv).then(
          (raw) => {
            c.resolve({ raw, sentMs })
            answered()
          },
          (err: Error) => {
            c.reject(new StoreError(`redis: ${err.message}`, { cause: err }))
            answered()
          }
        )
      }
    } finally {
      socket?.uncork()
      client.options.commandTimeout = backstop
    }
    // A call already answered keeps its answer: a promise settles once.
    this.timed(read).catch((err: unknown) => {
      for (const c of calls) c.reject(err)
    })
  }

  /** The script's deadline for a call written at sentMs: 0 (none) until the offset is known. */
  private deadlineAt(sentMs: number): number {
    const ms = this.opts.timeoutMs
    return this.offsetKnown && ms ? this.storeNowMs(sentMs) + ms : 0
  }

  async credit(
    ref: LedgerRef,
    c: { calls: number; note: string | null; atMs: number; day: string; quota: number }
  ): Promise<CreditEntry> {
    const p = this.opts.prefix
    const ks = [
      p + keys.ledger(ref.team, ref.month),
      p + keys.credits(ref.team, ref.month),
      p + keys.notice(ref.team, ref.month, 80),
      p + keys.notice(ref.team, ref.month, 100),
    ]
    const argv = [c.calls, `c${c.day}`, c.quota, c.atMs, c.note ?? '', keepUntil(ref)]
    const [before, after] = await this.call('basegateCredit', ks, argv)
    const entry = { atMs: c.atMs, calls: before! - after!, asked: c.calls, note: c.note }
    return { ...entry, before: before!, after: after! }
  }

  async readLedger(ref: LedgerRef): Promise<LedgerMonth> {
    const p = this.opts.prefix
    const [fields, list] = await Promise.all([
      this.timed(this.client.hgetall(p + keys.ledger(ref.team, ref.month))),
      this.timed(this.client.lrange(p + keys.credits(ref.team, ref.month), 0, -1)),
    ])
    return ledgerOf(fields, list)
  }

  async claimNotice(ref: LedgerRef, threshold: 80 | 100, token: string): Promise<boolean> {
    const key = this.opts.prefix + keys.notice(ref.team, ref.month, threshold)
    // Kept a day past the month's end, so a late instance cannot say it again.
    const won = (await this.call(
      'basegateClaimNotice',
      [key],
      [token, ref.endMs + 86_400_000]
    )) as unknown
    return won === 1
  }

  /** ledger-add.lua on each ledger of the batch, through the batch writer (batch-write.ts). */
  async addToLedger(batch: LedgerBatch, id: BatchId): Promise<void> {
    const calls: { keys: string[]; argv: (string | number)[] }[] = []
    for (const [key, { ref, days, doubts }] of batch) {
      const ledger = this.opts.prefix + key
      const names = [ledger]
      const argv: (string | number)[] = [id.instance, id.seq, keepUntil(ref), days.size]
      for (const [day, n] of days) argv.push(`d${day}`, n)
      for (const [day, tags] of doubts ?? [])
        for (const t of tags)
          argv.push(
            `d${day}`,
            keyIndex(names, this.opts.prefix + keys.ledgerRing(key, t.store), 1),
            t.seq
          )
      calls.push({ keys: names, argv })
    }
    await sendBatch(this.client, 'basegateLedgerAdd', calls, undefined, (p) => this.timed(p))
  }

  /** give-back.lua on one slot's windows; see its header for the arguments. */
  private async runGiveBack(uses: readonly GiveBack[]): Promise<void> {
    if (uses.length === 0) return
    const keys = uses.map((u) => this.opts.prefix + u.charge.key)
    const argv: (string | number)[] = [BUCKETS_PER_WINDOW]
    for (const u of uses) {
      const c = u.charge
      argv.push(windowMsOf(c), u.atMs, u.units, c.kind === 'monthly' ? `d${c.day}` : '')
    }
    await this.call('basegateGiveBack', keys, argv)
  }

  async ready(): Promise<boolean> {
    if (this.opts.cluster) {
      // Ready when the client is (ioredis sends CLUSTER commands before it has the slots, and
      // refuses the scripts until then: a gateway let in on CLUSTER INFO alone found its store
      // down at its first calls) and the cluster as a whole says so (every slot served).
      if ((this.client as Cluster).status !== 'ready') return false
      try {
        const info = (await (this.client as Cluster).cluster('INFO')) as string
        return info.includes('cluster_state:ok')
      } catch {
        return false
      }
    }
    try {
      return (await this.client.ping()) === 'PONG'
    } catch {
      return false
    }
  }

  async close(): Promise<void> {
    try {
      await this.client.quit()
    } catch {
      this.client.disconnect()
    }
  }
}

/** Puts per-slot decisions back in the order of the request's charges. */
function merge(n: number, groups: number[][], parts: Decision[]): Decision {
  const windows = new Array(n)
  let allowed = true
  for (let g = 0; g < groups.length; g++) {
    const part = parts[g]!
    if (!part.allowed) allowed = false
    groups[g]!.forEach((i, j) => (windows[i] = part.windows[j]))
  }
  return { allowed, windows, nowMs: parts[0]!.nowMs, storeMs: parts[0]?.storeMs }
}

/** When a month's ledger and credits go: KEEP_DAYS after its end (SPEC §5: 400 days). */
export function keepUntil(ref: LedgerRef): number {
  return ref.endMs + LEDGER_KEEP_DAYS * 86_400_000
}

/** A ledger's hash and credits list as the store returned them. */
export function ledgerOf(fields: Record<string, string>, credits: readonly string[]): LedgerMonth {
  const days = new Map<string, number>()
  const credited = new Map<string, number>()
  for (const [f, v] of Object.entries(fields)) {
    if (f.length === 3 && f[0] === 'd') days.set(f.slice(1), Number(v))
    else if (f.length === 3 && f[0] === 'c') credited.set(f.slice(1), Number(v))
  }
  return {
    used: Number(fields.used ?? 0),
    days,
    credited,
    quota: fields.q === undefined ? null : Number(fields.q),
    credits: credits.map((text) => {
      const e = JSON.parse(text) as Record<string, unknown>
      return {
        atMs: Number(e.at),
        calls: Number(e.calls),
        asked: Number(e.asked),
        note: typeof e.note === 'string' ? e.note : null,
        before: Number(e.before),
        after: Number(e.after),
      }
    }),
  }
}

function pick<T>(items: readonly T[], indexes: readonly number[]): T[] {
  return indexes.map((i) => items[i]!)
}

/**
 * Issue #22: a reply that Redis sent in time is never a timeout because this process's event
 * loop was late to read it. A timer runs in the loop's timer phase, before the poll phase that
 * reads sockets: on a starved loop the timeout fires while the reply already waits in the
 * socket. So a fired timeout first lets the loop turn (setImmediate runs after the poll
 * phase), and, when the timer itself fired late (the loop was busy past half the timeout), a
 * few turns more; only a reply still missing then counts as the store's failure.
 */
export function answerWithin<T>(command: Promise<T>, timeoutMs: number, clock: Clock): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false
    const due = clock.monotonic() + timeoutMs
    const giveUp = (turns: number): void => {
      if (settled) return
      if (turns > 0) return void setImmediate(() => giveUp(turns - 1))
      settled = true
      reject(new StoreError(`redis: no answer within ${timeoutMs} ms`))
    }
    const timer = clock.setTimer(() => {
      const late = clock.monotonic() - due > timeoutMs / 2
      giveUp(late ? 3 : 1)
    }, timeoutMs)
    command.then(
      (v) => {
        if (settled) return
        settled = true
        timer.cancel()
        resolve(v)
      },
      (err: unknown) => {
        if (settled) return
        settled = true
        timer.cancel()
        reject(err)
      }
    )
  })
}
