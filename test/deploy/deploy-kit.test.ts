import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
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

  it('runs basegate, its Redis, the service server, MariaDB and the server cache, all restarting', () => {
    expect(Object.keys(s).sort()).toEqual([
      'basegate',
      'basegate-redis',
      'mariadb',
      'redis',
      'seatable',
    ])
    for (const [name, svc] of Object.entries<Record<string, unknown>>(s))
      expect(svc.restart, name).toBe('unless-stopped')
    expect(s.seatable.image).toMatch(/^seatable\/seatable-enterprise/)
    expect(s.seatable.volumes).toContain('seatable-data:/shared')
  })

  it('makes the server reachable only through basegate', () => {
    expect(s.seatable.ports).toBeUndefined()
    expect(s.mariadb.ports).toBeUndefined()
    expect(s.basegate.ports).toContain('80:8080')
    expect(s.basegate.environment.BASEGATE_UPSTREAM).toBe('http://seatable:80')
    expect(s.basegate.environment.REDIS_URL).toBe('redis://basegate-redis:6379')
  })

  it('mounts limits.yaml, which exists and loads with the compose environment', () => {
    const mount = (s.basegate.volumes as string[]).find((v) => v.includes('limits.yaml'))!
    const [src, dst] = mount.split(':')
    expect(existsSync(root(src!))).toBe(true)
    expect(s.basegate.command).toContain(dst)
    const env = { ...s.basegate.environment, BASEGATE_ADMIN_TOKEN: 'x' }
    const r = parseConfig(read('limits.yaml'), env)
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
})

describe('Kubernetes manifests', () => {
  const docs = [
    ...YAML.parseAllDocuments(read('deploy/k8s/basegate.yaml')),
    ...YAML.parseAllDocuments(read('deploy/k8s/redis.yaml')),
  ].map((d) => d.toJS())
  const byKind = (kind: string, name: string) =>
    docs.find((d) => d.kind === kind && d.metadata.name === name)

  it('has a Deployment of two or more replicas with probes, resources and the ConfigMap mounted', () => {
    const dep = byKind('Deployment', 'basegate')
    expect(dep.spec.replicas).toBeGreaterThanOrEqual(2)
    const c = dep.spec.template.spec.containers[0]
    for (const probe of [c.readinessProbe, c.livenessProbe]) {
      const cmd = probe.exec.command as string[]
      expect(cmd.slice(0, 2)).toEqual(['node', 'dist/src/healthcheck.js'])
      expect(ADMIN_PATHS).toContain(cmd[2])
    }
    expect(c.readinessProbe.exec.command[2]).toBe('/readyz')
    expect(c.resources.requests.cpu).toBeDefined()
    expect(c.resources.requests.memory).toBeDefined()
    const vol = dep.spec.template.spec.volumes.find(
      (v: { configMap?: { name: string } }) => v.configMap
    )
    expect(byKind('ConfigMap', vol.configMap.name)).toBeDefined()
    expect(c.volumeMounts[0].mountPath).toBe('/etc/basegate')
    expect(c.args).toContain('/etc/basegate/limits.yaml')
  })

  it('the ConfigMap holds a valid limits.yaml whose ports match the container and the Service', () => {
    const cm = byKind('ConfigMap', 'basegate-limits')
    const r = parseConfig(cm.data['limits.yaml'], { BASEGATE_ADMIN_TOKEN: 'secret' })
    if (!r.ok) throw new Error(JSON.stringify(r.problems))
    const c = byKind('Deployment', 'basegate').spec.template.spec.containers[0]
    const port = (name: string) =>
      c.ports.find((p: { name: string }) => p.name === name).containerPort
    expect(port('http')).toBe(r.config.listen.port)
    expect(port('admin')).toBe(r.config.admin.port)
    const svc = byKind('Service', 'basegate')
    expect(svc.spec.ports.map((p: { targetPort: string }) => p.targetPort).sort()).toEqual([
      'admin',
      'http',
    ])
    expect(r.config.store.url).toBe('redis://basegate-redis:6379')
    expect(byKind('Service', 'basegate-redis').spec.ports[0].port).toBe(6379)
    expect(byKind('StatefulSet', 'basegate-redis').spec.template.spec.containers[0].args).toContain(
      '--appendonly'
    )
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
  it('is a well-formed unit, and passes systemd-analyze verify where it is available', () => {
    // Every line is blank, a comment, a [Section] or a Key=Value, in the three sections a service needs.
    for (const line of unit.split('\n'))
      expect(line, line).toMatch(/^(|#.*|\[(Unit|Service|Install)\]|[A-Za-z]+=.*)$/)
    expect(unit.match(/^\[(\w+)\]$/gm)).toEqual(['[Unit]', '[Service]', '[Install]'])
    if (spawnSync('systemd-analyze', ['--version']).status !== 0) return
    const r = spawnSync('systemd-analyze', ['verify', root('deploy/systemd/basegate.service')], {
      encoding: 'utf8',
    })
    // A machine without node at /usr/bin/node may say so; nothing else may be reported.
    expect(
      r.stderr
        .split('\n')
        .filter(
          (l) => l.includes('basegate.service') && !/node.*(not executable|No such file)/.test(l)
        )
    ).toEqual([])
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
      for (const t of panel.targets)
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
    ]) {
      expect(used.has(family), family).toBe(true)
    }
  })
})
