import { parseArgs, type ParseArgsConfig } from 'node:util';

// The command-line tools' arguments: parsed with node:util, `--help` prints the usage, a bad or
// missing argument prints why and the usage. Exit code 2 for those, as for the node's own options.

type Options = NonNullable<ParseArgsConfig['options']>;

/** The parsed values, or the exit code to end with (0 after --help, 2 after a bad or missing argument). */
export function commandArgs<O extends Options>(argv: string[], options: O, usage: string,
  required: readonly (keyof O & string)[]): ReturnType<typeof parseArgs<{ args: string[]; options: O }>>['values'] | number {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: { ...options, help: { type: 'boolean', default: false } } as O }));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${usage}\n`);
    return 2;
  }
  if ((values as { help?: boolean }).help) {
    process.stdout.write(`${usage}\n`);
    return 0;
  }
  const missing = required.filter((name) => (values as Record<string, unknown>)[name] === undefined);
  if (missing.length > 0) {
    process.stderr.write(`${missing.map((m) => `--${m}`).join(' and ')} ${missing.length > 1 ? 'are' : 'is'} required.\n${usage}\n`);
    return 2;
  }
  return values as ReturnType<typeof parseArgs<{ args: string[]; options: O }>>['values'];
}
