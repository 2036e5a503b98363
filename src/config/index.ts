import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import {
  OPTIONS, cliFlag, envVar, yamlKey,
  type Config, type OptionName, type OptionSpec,
} from './options.js';

// Configuration, the folder's face: the one option table (options.ts) read into one typed Config,
// defaults < YAML file < SVC_* environment < command line, each problem a ConfigError naming the
// option; and the --help text. reference.ts writes the option reference from the same table.

export { OPTIONS, type Config, type OptionName } from './options.js';

export type ConfigSource = 'default' | 'yaml' | 'environment' | 'command line';

export interface LoadedConfig {
  config: Config;
  sources: Record<OptionName, ConfigSource>;
}

/** A configuration problem: one line naming the option and what is allowed. */
export class ConfigError extends Error {}

const NAMES = Object.keys(OPTIONS) as OptionName[];
const BY_FLAG = new Map(NAMES.map((n) => [cliFlag(n), n]));
const BY_YAML = new Map(NAMES.map((n) => [yamlKey(n).toLowerCase(), n]));

function allowed(spec: OptionSpec): string {
  switch (spec.kind) {
    case 'bool': return 'true or false';
    case 'enum': return `one of ${spec.values!.join(', ')}`;
    case 'int': case 'size': return `an integer from ${spec.min} to ${spec.max}`;
    default: return 'a string';
  }
}

function coerce(name: OptionName, raw: unknown, where: string): string | number | boolean {
  const spec: OptionSpec = OPTIONS[name];
  const bad = () => new ConfigError(
    `Invalid value ${JSON.stringify(raw)} for option ${where}: expected ${allowed(spec)}.`);
  switch (spec.kind) {
    case 'bool': {
      if (typeof raw === 'boolean') return raw;
      const s = String(raw).toLowerCase();
      if (s === 'true' || s === '1' || s === 'yes') return true;
      if (s === 'false' || s === '0' || s === 'no') return false;
      throw bad();
    }
    case 'int': case 'size': {
      const n = typeof raw === 'number' ? raw : /^-?\d+$/.test(String(raw).trim()) ? Number(raw) : NaN;
      if (!Number.isSafeInteger(n) || n < spec.min! || n > spec.max!) throw bad();
      return n;
    }
    case 'enum': {
      const s = String(raw).toLowerCase();
      const match = spec.values!.find((v) => v.toLowerCase() === s);
      if (!match) throw bad();
      return match;
    }
    default:
      if (typeof raw === 'object' || raw === undefined) throw bad();
      return String(raw);
  }
}

interface Layer { source: ConfigSource; values: Map<OptionName, unknown>; label: (n: OptionName) => string }

function parseArgs(argv: readonly string[]): Layer {
  const values = new Map<OptionName, unknown>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) throw new ConfigError(`Unexpected argument "${arg}": options are written --name value.`);
    const eq = arg.indexOf('=');
    const flag = (eq < 0 ? arg.slice(2) : arg.slice(2, eq)).toLowerCase();
    const name = BY_FLAG.get(flag);
    if (!name) throw new ConfigError(`Unknown option --${flag}; run with --help to list the options.`);
    let raw: string | undefined = eq < 0 ? undefined : arg.slice(eq + 1);
    if (raw === undefined) {
      const next = argv[i + 1];
      const isBool = OPTIONS[name].kind === 'bool';
      if (isBool && (next === undefined || !/^(true|false|yes|no|0|1)$/i.test(next))) raw = 'true';
      else if (next === undefined) throw new ConfigError(`Option --${flag} needs a value: ${allowed(OPTIONS[name])}.`);
      else { raw = next; i++; }
    }
    values.set(name, raw);
  }
  return { source: 'command line', values, label: (n) => `--${cliFlag(n)}` };
}

function parseEnv(env: NodeJS.ProcessEnv): Layer {
  const values = new Map<OptionName, unknown>();
  const known = new Map(NAMES.map((n) => [envVar(n), n]));
  for (const [key, value] of Object.entries(env)) {
    if (!key.startsWith('SVC_') || value === undefined) continue;
    const name = known.get(key);
    if (!name) throw new ConfigError(`Unknown environment variable ${key}; run with --help to list the options.`);
    values.set(name, value);
  }
  return { source: 'environment', values, label: envVar };
}

/** The yaml package, read when a configuration file is (a start without one did not need its ~75 ms). */
const parseYaml = (text: string): unknown => (createRequire(import.meta.url)('yaml') as typeof import('yaml')).parse(text);

function parseYamlFile(path: string): Layer {
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ConfigError(`Cannot read the configuration file ${path}: ${(err as Error).message.split('\n')[0]}`);
  }
  const values = new Map<OptionName, unknown>();
  const written = new Map<OptionName, string>();
  if (doc === null || doc === undefined) return { source: 'yaml', values, label: yamlKey };
  if (!isMapping(doc)) {
    throw new ConfigError(`The configuration file ${path} must be a YAML mapping of option names to values.`);
  }
  const take = (key: string, value: unknown) => {
    const name = BY_YAML.get(key.replaceAll('.', '').toLowerCase());
    if (!name || name === 'config') throw new ConfigError(`Unknown key ${key} in ${path}; run with --help to list the options.`);
    values.set(name, value);
    written.set(name, key);
  };
  for (const [key, value] of Object.entries(doc)) {
    // A section is the option's name split in two: `AutoScavenge: {Enabled: true}` is AutoScavengeEnabled.
    if (isMapping(value) && !BY_YAML.has(key.toLowerCase())) {
      for (const [sub, inner] of Object.entries(value)) take(`${key}.${sub}`, inner);
    } else {
      take(key, value);
    }
  }
  return { source: 'yaml', values, label: (n) => `${written.get(n) ?? yamlKey(n)} (in ${path})` };
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Reads defaults < YAML file < SVC_* environment < command line into one typed Config. */
export function loadConfig(argv: readonly string[], env: NodeJS.ProcessEnv = {}): LoadedConfig {
  const cli = parseArgs(argv);
  const environment = parseEnv(env);
  const configPath = (cli.values.get('config') ?? environment.values.get('config')) as string | undefined;
  const layers = configPath ? [parseYamlFile(configPath), environment, cli] : [environment, cli];

  const config = {} as Record<OptionName, unknown>;
  const sources = {} as Record<OptionName, ConfigSource>;
  for (const name of NAMES) {
    config[name] = OPTIONS[name].default;
    sources[name] = 'default';
  }
  for (const layer of layers) {
    for (const [name, raw] of layer.values) {
      config[name] = coerce(name, raw, layer.label(name));
      sources[name] = layer.source;
    }
  }
  return { config: config as Config, sources };
}

/** The --help text: every option with its flag, YAML key, environment variable, default and meaning. */
export function helpText(): string {
  const lines = ['Usage: npm start -- [options]', '', 'Options (precedence: defaults < YAML < environment < command line):', ''];
  for (const name of NAMES) {
    const spec: OptionSpec = OPTIONS[name];
    const def = spec.default === undefined ? 'none' : spec.secret ? '(set)' : String(spec.default);
    lines.push(`  --${cliFlag(name)} <${allowed(spec)}>`);
    lines.push(`      ${spec.help}`);
    lines.push(`      default: ${def}; YAML: ${yamlKey(name)}; environment: ${envVar(name)}`);
  }
  lines.push('', 'A YAML key may also be written as a section: AutoScavenge: {Enabled: true} for AutoScavengeEnabled.');
  lines.push('', '  --help      print this text', '  --version   print the version');
  return lines.join('\n');
}
