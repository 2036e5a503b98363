import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, helpText, loadConfig, OPTIONS } from '../src/config/index.js';
import { staleConsole, staleSource } from '../src/build-check.js';

function yamlFile(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'svc-config-')), 'config.yaml');
  writeFileSync(path, text);
  return path;
}

describe('configuration', () => {
  it('has the documented defaults', () => {
    const { config, sources } = loadConfig([]);
    expect(config).toMatchObject({
      db: './data', memDb: false, httpIp: '127.0.0.1', httpPort: 2113, chunkSize: 256 * 1024 * 1024,
      logLevel: 'info', defaultAdminPassword: 'changeit', defaultOpsPassword: 'changeit',
    });
    expect(sources.httpPort).toBe('default');
  });

  it('applies defaults < YAML < environment < command line', () => {
    const path = yamlFile('HttpPort: 3000\nDb: /from/yaml\nLogLevel: debug\nMemDb: true\n');
    const { config, sources } = loadConfig(
      ['--config', path, '--http-port', '5000'],
      { SVC_HTTP_PORT: '4000', SVC_DB: '/from/env' },
    );
    expect(config.httpPort).toBe(5000);
    expect(sources.httpPort).toBe('command line');
    expect(config.db).toBe('/from/env');
    expect(sources.db).toBe('environment');
    expect(config.logLevel).toBe('debug');
    expect(sources.logLevel).toBe('yaml');
    expect(config.memDb).toBe(true);
  });

  it('reads the config path from the environment too', () => {
    const path = yamlFile('HttpIp: 0.0.0.0\n');
    expect(loadConfig([], { SVC_CONFIG: path }).config.httpIp).toBe('0.0.0.0');
  });

  it('takes --flag=value, bare boolean flags and explicit booleans', () => {
    expect(loadConfig(['--http-port=7000']).config.httpPort).toBe(7000);
    expect(loadConfig(['--mem-db']).config.memDb).toBe(true);
    expect(loadConfig(['--mem-db', 'false']).config.memDb).toBe(false);
    expect(loadConfig(['--mem-db', '--http-port', '1']).config).toMatchObject({ memDb: true, httpPort: 1 });
  });

  it('rejects an unknown option with one line naming it', () => {
    expect(() => loadConfig(['--no-such-option', '1'])).toThrow(ConfigError);
    expect(() => loadConfig(['--no-such-option', '1'])).toThrow(/--no-such-option/);
    expect(() => loadConfig([], { SVC_BOGUS: '1' })).toThrow(/SVC_BOGUS/);
    expect(() => loadConfig(['--config', yamlFile('Bogus: 1\n')])).toThrow(/Bogus/);
  });

  it('rejects invalid values naming the option and what is allowed', () => {
    expect(() => loadConfig(['--http-port', 'abc'])).toThrow(/--http-port.*integer from 0 to 65535/);
    expect(() => loadConfig(['--http-port', '70000'])).toThrow(/--http-port/);
    expect(() => loadConfig(['--log-level', 'loud'])).toThrow(/--log-level.*one of fatal, error/);
    expect(() => loadConfig([], { SVC_MEM_DB: 'maybe' })).toThrow(/SVC_MEM_DB.*true or false/);
    expect(() => loadConfig(['--http-port'])).toThrow(/needs a value/);
    expect(() => loadConfig(['--config', yamlFile('HttpPort: [1, 2]\n')])).toThrow(/HttpPort/);
  });

  it('takes a negative --node-priority as its value, within int32 only', () => {
    expect(loadConfig([]).config.nodePriority).toBe(0);
    expect(loadConfig(['--node-priority', '-5']).config.nodePriority).toBe(-5);
    expect(loadConfig([], { SVC_NODE_PRIORITY: '2147483647' }).config.nodePriority).toBe(2147483647);
    expect(() => loadConfig(['--node-priority', '2147483648'])).toThrow(/--node-priority.*integer from -2147483648 to 2147483647/);
    expect(() => loadConfig(['--node-priority', '1.5'])).toThrow(/--node-priority/);
  });

  it('reads a YAML section as the option its key and sub-key name: AutoScavenge: {Enabled: ...}', () => {
    const nested = loadConfig(['--config', yamlFile('AutoScavenge:\n  Enabled: false\nLicenseKey: abc.def\n')]);
    expect(nested.config).toMatchObject({ autoScavengeEnabled: false, licenseKey: 'abc.def' });
    expect(nested.sources.autoScavengeEnabled).toBe('yaml');
    expect(loadConfig(['--config', yamlFile('AutoScavengeEnabled: true\n')]).config.autoScavengeEnabled).toBe(true);
    expect(loadConfig(['--config', yamlFile('autoscavenge: {enabled: yes}\n')]).config.autoScavengeEnabled).toBe(true);
    expect(() => loadConfig(['--config', yamlFile('AutoScavenge:\n  Bogus: true\n')])).toThrow(/Unknown key AutoScavenge.Bogus/);
    expect(() => loadConfig(['--config', yamlFile('AutoScavenge:\n  Enabled: maybe\n')])).toThrow(/AutoScavenge.Enabled .*true or false/);
    expect(() => loadConfig(['--config', yamlFile('HttpPort: {Value: 1}\n')])).toThrow(/HttpPort/);
  });

  it('--auto-scavenge-enabled is tri-state: unset unless given', () => {
    expect(loadConfig([]).config.autoScavengeEnabled).toBeUndefined();
    expect(loadConfig(['--auto-scavenge-enabled']).config.autoScavengeEnabled).toBe(true);
    expect(loadConfig([], { SVC_AUTO_SCAVENGE_ENABLED: 'false' }).config.autoScavengeEnabled).toBe(false);
    expect(loadConfig(['--dev']).config.dev).toBe(true);
  });

  it('help lists every option with its default and names', () => {
    const text = helpText();
    for (const name of Object.keys(OPTIONS)) {
      const flag = name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
      expect(text).toContain(`--${flag}`);
    }
    expect(text).toContain('default: 2113; YAML: HttpPort; environment: SVC_HTTP_PORT');
  });
});

describe('the build check of npm start', () => {
  it('finds a source newer than its compiled file, or one with none; a current build passes', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-build-'));
    try {
      mkdirSync(join(root, 'src', 'store'), { recursive: true });
      mkdirSync(join(root, 'dist', 'src', 'store'), { recursive: true });
      writeFileSync(join(root, 'src', 'main.ts'), '');
      writeFileSync(join(root, 'src', 'store', 'log.ts'), '');
      writeFileSync(join(root, 'src', 'types.d.ts'), '');
      const old = new Date(Date.now() - 60_000);
      for (const f of ['src/main.ts', 'src/store/log.ts']) utimesSync(join(root, f), old, old);
      writeFileSync(join(root, 'dist', 'src', 'main.js'), '');
      const distSrc = join(root, 'dist', 'src');
      expect(staleSource(distSrc)).toBe(join('store', 'log.ts')); // not compiled at all
      writeFileSync(join(root, 'dist', 'src', 'store', 'log.js'), '');
      expect(staleSource(distSrc)).toBeUndefined();
      const later = new Date(Date.now() + 60_000);
      utimesSync(join(root, 'src', 'main.ts'), later, later); // edited after the build
      expect(staleSource(distSrc)).toBe('main.ts');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('finds the Admin UI not built, or a file under web/ newer than its build', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-build-'));
    try {
      const distSrc = join(root, 'dist', 'src');
      mkdirSync(distSrc, { recursive: true });
      expect(staleConsole(distSrc)).toBeUndefined(); // an installed build without web/
      mkdirSync(join(root, 'web', 'src'), { recursive: true });
      writeFileSync(join(root, 'web', 'src', 'main.tsx'), '');
      const old = new Date(Date.now() - 60_000);
      utimesSync(join(root, 'web', 'src', 'main.tsx'), old, old);
      expect(staleConsole(distSrc)).toBe('web');
      mkdirSync(join(root, 'dist', 'web'), { recursive: true });
      writeFileSync(join(root, 'dist', 'web', 'index.html'), '');
      expect(staleConsole(distSrc)).toBeUndefined();
      const later = new Date(Date.now() + 60_000);
      utimesSync(join(root, 'web', 'src', 'main.tsx'), later, later);
      expect(staleConsole(distSrc)).toBe(join('web', 'src', 'main.tsx'));
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
