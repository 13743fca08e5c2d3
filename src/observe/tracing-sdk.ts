import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base'
import type { Tracer } from '@opentelemetry/api'

// The OpenTelemetry SDK and its OTLP exporter, loaded only when an endpoint is configured
// (observe/tracing.ts startTracing).

export interface Tracing {
  tracer: Tracer
  shutdown(): Promise<void>
}

export function startSdk(env: NodeJS.ProcessEnv, version: string): Tracing {
  // The exporter reads the endpoint, headers and timeout from the same OTEL_* variables.
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      'service.name': env.OTEL_SERVICE_NAME ?? 'basegate',
      'service.version': version,
    }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  })
  return {
    tracer: provider.getTracer('basegate', version),
    // The last spans get a second to leave; an endpoint that is down never holds a stop up.
    shutdown: () =>
      Promise.race([
        provider.shutdown().catch(() => {}),
        new Promise<void>((r) => setTimeout(r, 1000).unref()),
      ]),
  }
}
