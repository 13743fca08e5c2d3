import { compileClassifier, type Classifier } from '../http/classify.js'
import { createClientIpResolver, type ClientIpResolver } from '../http/client-ip.js'
import type { Config } from '../types.js'

/**
 * Everything that depends only on the configuration, compiled once per load. A request reads
 * the snapshot once, so a reload never tears a request in two.
 */
export interface Snapshot {
  config: Config
  classifier: Classifier
  clientIp: ClientIpResolver
}

export function compileSnapshot(config: Config): Snapshot {
  return {
    config,
    classifier: compileClassifier(config),
    clientIp: createClientIpResolver(config.clientIp),
  }
}
