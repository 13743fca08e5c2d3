import {
  context,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import type { IncomingMessage } from 'node:http'
import type { Tracing } from './tracing-sdk.js'

// Issue #25: OpenTelemetry traces with the official packages, off unless
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set. One span per
// request (class, key, outcome, status), a child for the store call and one for the upstream
// call, whose context goes upstream as W3C `traceparent`. Spans leave in batches from a
// background exporter: an endpoint that is down costs a request nothing.

const W3C = new W3CTraceContextPropagator()

export type { Tracing }

/**
 * The tracer, or null when no OTLP endpoint is configured (then nothing is traced, and the SDK
 * and its exporter are never loaded: issue #41, a start or `--version` pays nothing for them).
 */
export async function startTracing(
  env: NodeJS.ProcessEnv,
  version: string
): Promise<Tracing | null> {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT
  if (endpoint === undefined || endpoint === '' || env.OTEL_SDK_DISABLED === 'true') return null
  const { startSdk } = await import('./tracing-sdk.js')
  return startSdk(env, version)
}

const headerGetter = {
  keys: (h: IncomingMessage['headers']) => Object.keys(h),
  get: (h: IncomingMessage['headers'], key: string) => h[key],
}

/** A request's span, a child of the client's `traceparent` when it sent one. */
export function requestSpan(tracer: Tracer, req: IncomingMessage): Span {
  const parent = W3C.extract(context.active(), req.headers, headerGetter)
  return tracer.startSpan(
    `${req.method ?? 'GET'} basegate`,
    {
      kind: SpanKind.SERVER,
      // The path comes at the end, normalised and with its tokens masked (SPEC §6).
      attributes: { 'http.request.method': req.method ?? 'GET' },
    },
    parent
  )
}

/** The context of a span, to start its children in. */
export function within(span: Span): Context {
  return trace.setSpan(context.active(), span)
}

/** A child span that already happened (the store call): its start and length on performance.now(). */
export function pastChild(
  tracer: Tracer,
  parent: Span,
  name: string,
  startedMs: number,
  ms: number
): void {
  const start = performance.timeOrigin + startedMs
  const child = tracer.startSpan(name, { kind: SpanKind.CLIENT, startTime: start }, within(parent))
  child.end(start + ms)
}

/** The upstream call's span, and the `traceparent` that carries it to the server. */
export function upstreamSpan(
  tracer: Tracer,
  parent: Span
): { span: Span; traceparent: string | undefined } {
  const span = tracer.startSpan('upstream', { kind: SpanKind.CLIENT }, within(parent))
  const carrier: Record<string, string> = {}
  W3C.inject(trace.setSpan(context.active(), span), carrier, {
    set: (c, k, v) => (c[k] = v),
  })
  return { span, traceparent: carrier.traceparent }
}

/** Ends a span with the status the client got (5xx and 0 are errors). */
export function endWith(
  span: Span,
  status: number,
  attributes: Record<string, string | number | undefined>
): void {
  span.setAttribute('http.response.status_code', status)
  for (const [k, v] of Object.entries(attributes)) if (v !== undefined) span.setAttribute(k, v)
  if (status >= 500 || status === 0) span.setStatus({ code: SpanStatusCode.ERROR })
  span.end()
}
