import type { Charge, Decision, WindowState } from '../types.js'

/** Builds the per-window states from the store's raw numbers (shared by every store). */
export function toWindowState(
  charge: Charge,
  used: number,
  resetAtMs: number,
  retryAtMs: number,
  nowMs: number,
  limit = charge.limit
): WindowState {
  return {
    limit,
    windowMs: charge.windowMs,
    used,
    remaining: Math.max(0, limit - used),
    resetAtMs: resetAtMs === 0 ? nowMs : resetAtMs,
    retryAtMs,
  }
}

export const ADMIT_NOTHING_TO_CHECK: Decision = Object.freeze({
  allowed: true,
  windows: [],
}) as Decision
