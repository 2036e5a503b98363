import { parseArgs } from 'node:util';
import { BackupInvalidError } from '../store/backup-format.js';
import { DatabaseInUseError, restoreBackup } from '../store/restore.js';

// `node dist/src/main.js restore --from DIR --db PATH` (`npm run restore -- ...`): restores a
// backup into the data directory of a stopped node (src/store/restore.ts). Exit code 0 once
// restored, 1 when refused (a node runs on PATH, DIR holds no valid backup), 2 on bad arguments.

const USAGE = 'Usage: node dist/src/main.js restore --from DIR --db PATH   (or npm run restore -- --from DIR --db PATH)';

export async function restoreCommand(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: { from: { type: 'string' }, db: { type: 'string' }, help: { type: 'boolean', default: false } } }));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (!values.from || !values.db) {
    process.stderr.write(`--from and --db are required.\n${USAGE}\n`);
    return 2;
  }
  try {
    const summary = await restoreBackup(values.from, values.db);
    process.stdout.write(`${JSON.stringify(summary)}\n`);
    process.stdout.write(`Restored ${summary.records} keys to position ${summary.position}. Start the node on ${values.db}`
      + ` with --chunk-size ${summary.chunkSize}; it truncates anything past position ${summary.position} as it starts.\n`);
    return 0;
  } catch (err) {
    if (err instanceof BackupInvalidError || err instanceof DatabaseInUseError) {
      process.stderr.write(`Restore refused: ${err.message}\n`);
      return 1;
    }
    process.stderr.write(`Restore failed: ${(err as Error).message}\n`);
    return 1;
  }
}
