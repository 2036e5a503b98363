import { commandArgs } from './args.js';
import { BackupInvalidError, DatabaseInUseError, restoreBackup } from '../store/index.js';

// `node dist/src/main.js restore --from DIR --db PATH` (`npm run restore -- ...`): restores a
// backup into the data directory of a stopped node (src/store/restore.ts). Exit code 0 once
// restored, 1 when refused (a node runs on PATH, DIR holds no valid backup), 2 on bad arguments.

const USAGE = 'Usage: node dist/src/main.js restore --from DIR --db PATH   (or npm run restore -- --from DIR --db PATH)';

export async function restoreCommand(argv: string[]): Promise<number> {
  const values = commandArgs(argv, { from: { type: 'string' }, db: { type: 'string' } }, USAGE, ['from', 'db']);
  if (typeof values === 'number') return values;
  try {
    const summary = await restoreBackup(values.from!, values.db!);
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
