import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import YAML from 'yaml'
import { ADMIN_PATHS } from '../../src/admin/routes.js'
import { parseConfig } from '../../src/config/load.js'
import { Metrics } from '../../src/observe/metrics.js'

// No Docker engine here: the deploy kit is proven by reading it. Every file parses, names
// only files that exist, and wires ports, the config mount and the probes to what basegate
// really serves.

const root = (p: string) => fileURLToPath(new URL(`../../${p}`, import.meta.url))
const read = (p: string) => readFileSync(root(p), 'utf8')

describe('docker-compose.yml', () => {
  const compose = YAML.parse(read('docker-compose.yml'))
  const s = compose.services

  it('runs basegate, its Redis, the service server, MariaDB and the server cache, all restarting, pinned, health-checked', () => {
    expect(Object.keys(s).sort()).toEqual([
      'basegate',
      'basegate-redis',
      'mariadb',
      'redis',
      'seatable',
    ])
    for (const [name, svc] of Object.entries<Record<string, unknown>>(s))
      expect(svc.restart, name).toBe('unless-stopped')
    expect(s.seatable.image).toMatch(/^seatable\/seatable-enterprise:\d+\.\d+\.\d+$/)
    for (const [name, svc] of Object.entries<Record<string, unknown>>(s)) {
      // Pinned releases: no :latest, no bare major.
      if (svc.image) expect(svc.image as string, name).toMatch(/:\d+\.\d+\.\d+(-[a-z]+)?$/)
      expect(svc.healthcheck, name).toBeDefined()
    }
    expect(s.seatable.volumes).toContain('seatable-data:/shared')
    // Issue #25: basegate starts once the server answers its health check (up to 2 minutes).
    expect(s.basegate.depends_on.seatable).toEqual({ condition: 'service_healthy' })
  })

  it('makes the server reachable only through basegate', () => {
    expect(s.seatable.ports).toBeUndefined()
    expect(s.mariadb.ports).toBeUndefined()
    expect(s.basegate.ports).toContain('80:8080')
  })

  it('configures the server with the 5.3+ environment (SEATABLE_MYSQL_DB_*, REDIS_*, JWT_PRIVATE_KEY)', () => {
    const env = s.seatable.environment
    for (const k of ['SEATABLE_MYSQL_DB_HOST', 'SEATABLE_MYSQL_DB_PORT', 'SEATABLE_MYSQL_DB_USER', 'SEATABLE_MYSQL_DB_PASSWORD', 'REDIS_HOST', 'REDIS_PORT', 'JWT_PRIVATE_KEY', 'SEATABLE_SERVER_HOSTNAME', 'SEATABLE_ADMIN_EMAIL', 'SEATABLE_ADMIN_PASSWORD', 'TIME_ZONE'])
      expect(env[k], k).toBeDefined()
    expect(env.DB_HOST).toBeUndefined()
    expect(env.DB_ROOT_PASSWD).toBeUndefined()
    expect(env.SEATABLE_MYSQL_DB_HOST).toBe('mariadb')
    expect(env.REDIS_HOST).toBe('redis')
    expect(env.JWT_PRIVATE_KEY).toMatch(/^\$\{JWT_PRIVATE_KEY:\?/)
    // Every secret the file asks for is listed in the example .env.
    const example = read('deploy/compose/env.example')
    for (const m of read('docker-compose.yml').matchAll(/\$\{([A-Z_]+):\?/g)) expect(example, m[1]).toContain(`${m[1]}=`)
  })

  it('mounts the limits folder (so an editor\'s save is seen), whose limits.yaml loads with the compose environment', () => {
    const mount = (s.basegate.volumes as string[]).find((v) => v.endsWith(':/etc/basegate:ro'))!
    const [src] = mount.split(':')
    expect(existsSync(join(root(src!), 'limits.yaml'))).toBe(true)
    expect(s.basegate.command).toContain('/etc/basegate/limits.yaml')
    // Compose fills ${BASEGATE_REDIS_PASSWORD} in REDIS_URL before basegate reads it.
    const env = {
      ...s.basegate.environment,
      BASEGATE_ADMIN_TOKEN: 'x',
      REDIS_URL: 'redis://:pw@basegate-redis:6379',
    }
    const r = parseConfig(readFileSync(join(root(src!), 'limits.yaml'), 'utf8'), env)
    expect(r.ok).toBe(true)
    if (r.ok) {
      expect(r.config.listen.port).toBe(8080)
      expect(r.config.admin.port).toBe(9090)
      expect(r.config.upstream.url).toBe('http://seatable:80')
    }
  })

  it('health-checks basegate on an admin path that exists, with the script the image ships', () => {
    const test = s.basegate.healthcheck.test as string[]
    expect(test.slice(0, 3)).toEqual(['CMD', 'node', 'dist/src/healthcheck.js'])
    expect(ADMIN_PATHS).toContain(test[3])
    expect(existsSync(root('src/healthcheck.ts'))).toBe(true)
    expect(s['basegate-redis'].command).toContain('--appendonly')
  })

  it('builds from deploy/Dockerfile', () => {
    expect(existsSync(root(s.basegate.build.dockerfile))).toBe(true)
  })

  it('issue #41: every service logs within bounds; each Redis requires the password its client is given', () => {
    for (const [name, svc] of Object.entries<Record<string, unknown>>(s))
      expect(svc.logging, name).toEqual({ driver: 'json-file', options: { 'max-size': '20m', 'max-file': '5' } })
    const pass = (cmd: string[]) => cmd[cmd.indexOf('--requirepass') + 1]
    expect(pass(s.redis.command)).toBe('${REDIS_PASSWORD:?set REDIS_PASSWORD}')
    expect(s.seatable.environment.REDIS_PASSWORD).toBe('${REDIS_PASSWORD:?set REDIS_PASSWORD}')
    expect(pass(s['basegate-redis'].command)).toBe('${BASEGATE_REDIS_PASSWORD:?set BASEGATE_REDIS_PASSWORD}')
    expect(s.basegate.environment.REDIS_URL).toContain('${BASEGATE_REDIS_PASSWORD:?set BASEGATE_REDIS_PASSWORD}@basegate-redis')
    const cmd = s['basegate-redis'].command as string[]
    expect(cmd[cmd.indexOf('--maxmemory-policy') + 1]).toBe('noeviction')
  })
})

describe('Kubernetes manifests', () => {
  // What `kubectl apply -k deploy/k8s/` applies: the kustomization's resources, and the
  // ConfigMap its generator makes of limits.yaml.
  const kustomization = YAML.parse(read('deploy/k8s/kustomization.yaml'))
  const generated = kustomization.configMapGenerator.map(
    (g: { name: string; files: string[]; options: { labels: Record<string, string> } }) => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: g.name, labels: g.options.labels },
      data: Object.fromEntries(g.files.map((f) => [f, read(`deploy/k8s/${f}`)])),
    })
  )
  const docs = [
    ...kustomization.resources.flatMap((f: string) =>
      YAML.parseAllDocuments(read(`deploy/k8s/${f}`)).map((d) => d.toJS())
    ),
    ...generated,
  ]
  const byKind = (kind: string, name: string) =>
    docs.find((d) => d.kind === kind && d.metadata.name === name)

  it('every object is valid against the Kubernetes OpenAPI models (offline)', async () => {
    for (const d of docs) {
      const [group, version] = d.apiVersion.includes('/') ? d.apiVersion.split('/') : ['', d.apiVersion]
      const mod =
        group === 'monitoring.coreos.com'
          ? await import(`@kubernetes-models/prometheus-operator/monitoring.coreos.com/${version}`)
          : await import(`kubernetes-models/${group ? `${group}/` : ''}${version}`)
      const Model = mod[d.kind]
      expect(() => new Model(d).validate(), `${d.kind}/${d.metadata.name}`).not.toThrow()
    }
  })

  it('a Deployment of 2+ replicas: httpGet probes on the admin port, restricted security, spread, resources', () => {
    const dep = byKind('Deployment', 'basegate')
    expect(dep.spec.replicas).toBeGreaterThanOrEqual(2)
    const pod = dep.spec.template.spec
    const c = pod.containers[0]
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'admin' })
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'admin' })
    expect(c.resources.requests.cpu).toBeDefined()
    // The "restricted" Pod Security Standard.
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } })
    expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } })
    expect(pod.topologySpreadConstraints.map((t: { topologyKey: string }) => t.topologyKey)).toContain('kubernetes.io/hostname')
    const vol = pod.volumes.find((v: { configMap?: { name: string } }) => v.configMap)
    expect(byKind('ConfigMap', vol.configMap.name)).toBeDefined()
    expect(c.volumeMounts[0].mountPath).toBe('/etc/basegate')
  })

  it('a PodDisruptionBudget keeps pods serving through node drains', () => {
    const pdb = byKind('PodDisruptionBudget', 'basegate')
    expect(pdb.spec.minAvailable).toBeLessThan(byKind('Deployment', 'basegate').spec.replicas)
  })

  it('the admin port is off the public Service; a ServiceMonitor scrapes it with the token; a NetworkPolicy lets only monitoring in', () => {
    expect(byKind('Service', 'basegate').spec.ports.map((p: { targetPort: string }) => p.targetPort)).toEqual(['http'])
    const admin = byKind('Service', 'basegate-admin')
    expect(admin.spec.type).toBe('ClusterIP')
    const sm = byKind('ServiceMonitor', 'basegate')
    expect(admin.metadata.labels).toMatchObject(sm.spec.selector.matchLabels)
    expect(sm.spec.endpoints[0]).toMatchObject({ port: 'admin', path: '/metrics', authorization: { type: 'Bearer' } })
    const np = byKind('NetworkPolicy', 'basegate')
    const adminRule = np.spec.ingress.find((r: { ports: { port: number }[] }) => r.ports.some((p) => p.port === 9090))
    expect(adminRule.from[0].namespaceSelector.matchLabels['kubernetes.io/metadata.name']).toBe('monitoring')
  })

  it('the ConfigMap holds a valid limits.yaml whose ports match the container and the Services', () => {
    const cm = byKind('ConfigMap', 'basegate-limits')
    const r = parseConfig(cm.data['limits.yaml'], { BASEGATE_ADMIN_TOKEN: 'secret', REDIS_PASSWORD: 'pw' })
    if (!r.ok) throw new Error(JSON.stringify(r.problems))
    const c = byKind('Deployment', 'basegate').spec.template.spec.containers[0]
    const port = (name: string) => c.ports.find((p: { name: string }) => p.name === name).containerPort
    expect(port('http')).toBe(r.config.listen.port)
    expect(port('admin')).toBe(r.config.admin.port)
    expect(r.config.store.onError).toBe('open')
    expect(r.config.store.url).toBe('redis://:pw@basegate-redis:6379')
    expect(byKind('Service', 'basegate-redis').spec.ports[0].port).toBe(6379)
    expect(byKind('StatefulSet', 'basegate-redis').spec.template.spec.containers[0].args).toContain('--appendonly')
  })

  it('issue #41: Redis with a password basegate is given, a memory bound that refuses writes rather than being killed, and only basegate let in', () => {
    const redis = byKind('StatefulSet', 'basegate-redis').spec.template.spec.containers[0]
    const args = redis.args as string[]
    expect(args[args.indexOf('--requirepass') + 1]).toBe('$(REDIS_PASSWORD)')
    expect(args[args.indexOf('--maxmemory-policy') + 1]).toBe('noeviction')
    const maxMb = Number(/^(\d+)mb$/.exec(args[args.indexOf('--maxmemory') + 1] ?? '')![1])
    const limitMi = Number(/^(\d+)Gi$/.exec(redis.resources.limits.memory)![1]) * 1024
    expect(maxMb).toBeLessThan(limitMi * 0.8) // AOF rewrites and buffers need the rest
    const secretOf = (c: { env: { name: string; valueFrom?: { secretKeyRef: { name: string } } }[] }, name: string) =>
      c.env.find((e) => e.name === name)!.valueFrom!.secretKeyRef.name
    const gw = byKind('Deployment', 'basegate').spec.template.spec.containers[0]
    expect(secretOf(gw, 'REDIS_PASSWORD')).toBe(secretOf(redis, 'REDIS_PASSWORD'))
    const r = parseConfig(read('deploy/k8s/limits.yaml'), { BASEGATE_ADMIN_TOKEN: 't', REDIS_PASSWORD: 'pw' })
    expect(r.ok && r.config.store.url).toBe('redis://:pw@basegate-redis:6379')
    const np = byKind('NetworkPolicy', 'basegate-redis')
    expect(np.spec.ingress).toEqual([
      { from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'basegate' } } }], ports: [{ port: 6379, protocol: 'TCP' }] },
    ])
  })

  it('issue #41: the kustomization names what a chart would (its resources exist, the image tag is the release)', () => {
    for (const f of kustomization.resources) expect(existsSync(root(`deploy/k8s/${f}`)), f).toBe(true)
    const version = JSON.parse(read('package.json')).version
    expect(kustomization.images).toEqual([{ name: 'basegate', newName: 'basegate', newTag: version }])
    expect(kustomization.configMapGenerator[0].options.disableNameSuffixHash).toBe(true)
  })
})

describe('systemd unit', () => {
  const unit = read('deploy/systemd/basegate.service')
  it('reloads with SIGHUP, stops with SIGTERM, and runs the built entry point', () => {
    expect(unit).toMatch(/^ExecReload=\/bin\/kill -HUP \$MAINPID$/m)
    expect(unit).toMatch(/^KillSignal=SIGTERM$/m)
    expect(unit).toMatch(
      /^ExecStart=\S*node \/opt\/basegate\/dist\/src\/main\.js --config \/etc\/basegate\/limits\.yaml$/m
    )
    expect(unit).toMatch(/^RestartPreventExitStatus=2$/m)
  })
  // systemd-analyze verify and security run from test/tools/ (`.ci/tools`, which installs them).
  it('is a well-formed unit', () => {
    // Every line is blank, a comment, a [Section] or a Key=Value, in the three sections a service needs.
    for (const line of unit.split('\n'))
      expect(line, line).toMatch(/^(|#.*|\[(Unit|Service|Install)\]|[A-Za-z]+=.*)$/)
    expect(unit.match(/^\[(\w+)\]$/gm)).toEqual(['[Unit]', '[Service]', '[Install]'])
  })
})

describe('Prometheus alert rules', () => {
  const file = 'deploy/prometheus/alerts.yml'
  // promtool check rules runs from test/tools/ (`.ci/tools`).
  it('cover the store, readiness, upstream errors, the 429 share, quotas at 80 % and 100 %, reloads; on metrics that exist', () => {
    const rules = YAML.parse(read(file)).groups.flatMap((g: { rules: unknown[] }) => g.rules) as { alert: string; expr: string }[]
    const exposed = new Set(new Metrics().names())
    for (const r of rules) for (const m of r.expr.matchAll(/\b(basegate_[a-z_]+)\b/g)) expect(exposed.has(m[1]!), `${r.alert}: ${m[1]}`).toBe(true)
    const exprs = rules.map((r) => r.expr).join('\n')
    for (const needle of ['min by (instance) (basegate_store_up) == 0', 'min by (instance) (basegate_upstream_up) == 0', 'store_unavailable', 'up{job="basegate"}', 'upstream_error', 'basegate_refusals_total', '>= 0.8', 'max by (team) (basegate_monthly_used) >= max by (team) (basegate_monthly_quota)', 'upstream_5xx', 'basegate_config_last_reload_successful'])
      expect(exprs, needle).toContain(needle)
    expect(YAML.parse(read('deploy/prometheus/prometheus.yml')).rule_files).toContain('alerts.yml')
  })
})

describe('Prometheus and Grafana', () => {
  it('scrapes /metrics with the admin bearer token', () => {
    const p = YAML.parse(read('deploy/prometheus/prometheus.yml'))
    const job = p.scrape_configs[0]
    expect(ADMIN_PATHS).toContain(job.metrics_path)
    expect(job.authorization.type).toBe('Bearer')
  })

  it('the dashboard queries only metric names /metrics really exposes', () => {
    const dash = JSON.parse(read('deploy/grafana/basegate-dashboard.json'))
    const exposed = new Set<string>()
    for (const name of new Metrics().names())
      for (const suffix of ['', '_bucket', '_count', '_sum']) exposed.add(name + suffix)
    const used = new Set<string>()
    for (const panel of dash.panels) {
      for (const t of panel.targets ?? [])
        for (const m of (t.expr as string).matchAll(/\b(basegate_[a-z_]+)\b/g)) used.add(m[1]!)
    }
    expect(used.size).toBeGreaterThanOrEqual(8)
    for (const name of used) expect(exposed.has(name), name).toBe(true)
    // Every metric family the issue names has a panel.
    for (const family of [
      'basegate_requests_total',
      'basegate_refusals_total',
      'basegate_monthly_used',
      'basegate_store_duration_seconds_bucket',
      'basegate_upstream_duration_seconds_bucket',
      // Issue #49: the states the page shows, the protection, connections, bodies, reloads.
      'basegate_upstream_up',
      'basegate_store_up',
      'basegate_protect_in_flight',
      'basegate_protect_shed_total',
      'basegate_connections_refused_total',
      'basegate_body_refusals_total',
      'basegate_config_reloads_total',
    ]) {
      expect(used.has(family), family).toBe(true)
    }
    // Issue #49: three replicas are three lines, and any of them can be picked.
    expect(dash.templating.list.map((v: { name: string }) => v.name)).toContain('instance')
    for (const panel of dash.panels)
      for (const t of panel.targets ?? [])
        for (const m of (t.expr as string).matchAll(/\b(?:basegate|process|nodejs)_[a-z_]+(\{[^}]*\})?/g))
          expect(m[1] ?? '', `${panel.title}: ${t.expr}`).toContain('instance=~"$instance"')
  })
})

describe('one version everywhere (issue #12)', () => {
  it('package.json, the CHANGELOG, the image label, the compose and Kubernetes tags, --version and build_info agree', async () => {
    const version = JSON.parse(read('package.json')).version as string
    expect(read('CHANGELOG.md')).toMatch(new RegExp(`^## ${version.replace(/\./g, '\\.')} `, 'm'))
    expect(read('deploy/Dockerfile')).toMatch(new RegExp(`^ARG VERSION=${version}$`, 'm'))
    expect(read('deploy/Dockerfile')).toMatch(/org\.opencontainers\.image\.version="\$\{VERSION\}"/)
    const compose = YAML.parse(read('docker-compose.yml')).services.basegate
    expect(compose.image).toBe(`basegate:${version}`)
    expect(compose.build.args.VERSION).toBe(version)
    expect(read('deploy/k8s/basegate.yaml')).toContain(`image: basegate:${version}`)
    const r = spawnSync(process.execPath, [root('dist/src/main.js'), '--version'], { encoding: 'utf8' })
    expect(r.stdout.trim()).toBe(`basegate ${version}`)
    const metrics = await new Metrics({ version }).registry.metrics()
    expect(metrics).toContain(`basegate_build_info{version="${version}",node="${process.version}"} 1`)
  })

  it('the image is on the current Node LTS, pinned by digest', () => {
    expect(read('deploy/Dockerfile')).toMatch(/^ARG NODE_IMAGE=node:24-bookworm-slim@sha256:[0-9a-f]{64}$/m)
    expect(read('deploy/Dockerfile')).toMatch(/^FROM \$\{NODE_IMAGE\}/m)
  })
})

describe('production weight (issue #12)', () => {
  it('keeps test and bench tools out of a production install', () => {
    const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { dev?: boolean }> }
    const prod = Object.entries(lock.packages)
      .filter(([path, p]) => path.startsWith('node_modules/') && !p.dev)
      .map(([path]) => path.slice('node_modules/'.length))
    for (const name of ['testcontainers', 'vitest', 'fastify', 'node-sql-parser', 'dtable-web-api', 'kubernetes-models', 'prettier'])
      expect(prod, name).not.toContain(name)
  })
})

describe('the kit in real use (issue #34 item 11)', () => {
  const k8s = YAML.parseAllDocuments(read('deploy/k8s/basegate.yaml')).map((d) => d.toJS())
  const deployment = k8s.find((o) => o.kind === 'Deployment')
  const pod = deployment.spec.template.spec

  it('a read-only root filesystem still has a /tmp for spilled bodies, sized to spill_bytes', () => {
    const container = pod.containers[0]
    expect(container.securityContext.readOnlyRootFilesystem).toBe(true)
    const mount = container.volumeMounts.find((m: { mountPath: string }) => m.mountPath === '/tmp')
    expect(mount).toBeDefined()
    const volume = pod.volumes.find((v: { name: string }) => v.name === mount.name)
    expect(volume.emptyDir.sizeLimit).toBe('1Gi')
    const limits = parseConfig(read('limits.yaml'), {})
    if (!limits.ok) throw new Error('limits.yaml')
    expect(limits.config.sizeLimits.spillBytes).toBe(1024 ** 3)
  })

  it('the alert rules’ job label is what both scrape configurations produce', () => {
    const alerts = read('deploy/prometheus/alerts.yml')
    expect(alerts).toContain('up{job="basegate"}')
    // The ServiceMonitor names the job after a label the admin Service carries: basegate.
    const monitor = k8s.find((o) => o.kind === 'ServiceMonitor')
    const service = k8s.find((o) => o.kind === 'Service' && o.metadata.name === 'basegate-admin')
    expect(service.metadata.labels[monitor.spec.jobLabel]).toBe('basegate')
    // prometheus.yml: the static job, and the commented discovery keeps pods by a label they have.
    const prom = read('deploy/prometheus/prometheus.yml')
    expect(YAML.parse(prom).scrape_configs[0].job_name).toBe('basegate')
    const keep = /__meta_kubernetes_pod_label_([a-z0-9_]+)\], regex: ([a-z-]+)/.exec(prom)!
    const labels = Object.entries(deployment.spec.template.metadata.labels as Record<string, string>)
    expect(labels.some(([k, v]) => k.replace(/[^a-zA-Z0-9]/g, '_') === keep[1] && v === keep[2])).toBe(true)
  })

  it('compose serves http, so the server is told http; the systemd unit says how to bind :80/:443', () => {
    expect(read('deploy/compose/env.example')).toMatch(/^SEATABLE_SERVER_PROTOCOL=http$/m)
    expect(read('deploy/systemd/basegate.service')).toMatch(/CAP_NET_BIND_SERVICE/)
  })
})

describe('engines (issue #34 item 7)', () => {
  /** Whether a package's `engines.node` range admits `version` (the forms npm packages use). */
  function admits(range: string, version: [number, number, number]): boolean {
    const cmp = (a: number[], b: number[]) => {
      for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) - (b[i] ?? 0)
      return 0
    }
    const parse = (v: string) => v.replace(/\.x/g, '').split('.').map(Number)
    return range.split('||').some((alt) =>
      alt
        .trim()
        .replace(/(>=|<=|>|<|\^|~)\s+/g, '$1')
        .split(/\s+/)
        .filter(Boolean)
        .every((c) => {
          const m = /^(>=|<=|>|<|\^|~)?(.+)$/.exec(c)!
          const v = parse(m[2]!)
          const d = cmp(version, v)
          switch (m[1]) {
            case '>=':
              return d >= 0
            case '>':
              return d > 0
            case '<':
              return d < 0
            case '<=':
              return d <= 0
            case '^':
              return d >= 0 && version[0] === v[0]
            case '~':
              return d >= 0 && version[0] === v[0] && version[1] === v[1]
            default:
              return d === 0 || (v.length < 3 && version[0] === v[0])
          }
        })
    )
  }

  it('every production dependency runs on the oldest Node that engines names (dev tools may need more: README)', () => {
    const pkg = JSON.parse(read('package.json'))
    const oldest = (/>=\s*(\d+)\.(\d+)\.(\d+)/.exec(pkg.engines.node)!.slice(1).map(Number) as [number, number, number])
    const r = spawnSync('npm', ['ls', '--omit=dev', '--all', '--parseable'], { cwd: root(''), encoding: 'utf8' })
    const dirs = r.stdout.trim().split('\n').slice(1)
    expect(dirs.length).toBeGreaterThan(10)
    const needMore = dirs.flatMap((d) => {
      const p = JSON.parse(readFileSync(join(d, 'package.json'), 'utf8'))
      const range: string | undefined = p.engines?.node
      return range === undefined || admits(range, oldest) ? [] : [`${p.name}@${p.version}: ${range}`]
    })
    expect(needMore).toEqual([])
    expect(admits('>=26', oldest)).toBe(false) // the check itself
    expect(admits('^18.19.0 || >=20.6.0', oldest)).toBe(true)
  })
})
