import type { Decision, WindowState } from '../types.js'

/** Builds one window's state from a store's raw numbers (shared by every store). */
export function toWindowState(
  used: number,
  resetAtMs: number,
  retryAtMs: number,
  nowMs: number,
  limit: number
): WindowState {
  return {
    limit,
    used,
    remaining: Math.max(0, limit - used),
    resetAtMs: resetAtMs === 0 ? nowMs : resetAtMs,
    retryAtMs,
  }
}

/** The decision for a request with no window to check. */
export function admitNothing(nowMs: number): Decision {
  return { allowed: true, windows: [], nowMs }
}
