import { useState } from 'preact/hooks';
import { request } from '../../api';
import { ConfirmButton, errorText, Notice } from '../../components';
import { projectionPath, type ProjectionStats } from './model';

// Enable all / Disable all, as the established console offers them: one command per projection
// of the list as shown (system projections only when they are shown), each behind one
// confirmation that names how many. Only for $ops and $admins (the list does not offer it to
// others: the node would refuse them for every non-transient projection).

const isRunning = (p: ProjectionStats) => /^Running/.test(p.status);
/** Enabled: running, or stopped or faulted with the ` (Enabled)` suffix. */
const isEnabled = (p: ProjectionStats) => isRunning(p) || / \(Enabled\)$/.test(p.status);
/** A one-time projection that completed is not started again by Enable all. */
const isCompleted = (p: ProjectionStats) => /^Completed/.test(p.status);

function namesOf(list: ProjectionStats[]): string {
  const names = list.map((p) => p.name);
  return names.length <= 5 ? names.join(', ') : `${names.slice(0, 5).join(', ')} and ${names.length - 5} more`;
}

export function BulkCommands({ projections, onDone }: { projections: ProjectionStats[]; onDone: () => void }) {
  const [done, setDone] = useState<string>();
  const toEnable = projections.filter((p) => !isRunning(p) && !isCompleted(p));
  const toDisable = projections.filter(isEnabled);

  const runAll = (command: 'enable' | 'disable', targets: ProjectionStats[], past: string) => async () => {
    setDone(undefined);
    const failed: string[] = [];
    // One at a time: each command writes to the log and restarts or stops a projection.
    for (const p of targets) {
      try {
        await request(`${projectionPath(p.name)}/command/${command}`, { method: 'POST', body: '', contentType: 'application/json' });
      } catch (err) {
        failed.push(`${p.name}: ${errorText(err)}`);
      }
    }
    onDone();
    const succeeded = targets.length - failed.length;
    if (failed.length > 0) throw new Error(`${past} ${succeeded} of ${targets.length}. Refused:\n${failed.join('\n')}`);
    setDone(`${past} ${succeeded} projection${succeeded === 1 ? '' : 's'}.`);
  };

  return (
    <div class="row bulk" role="group" aria-label="All projections">
      <ConfirmButton label="Enable all" disabled={toEnable.length === 0} onConfirm={runAll('enable', toEnable, 'Enabled')}
        question={`Enable the ${toEnable.length} projection${toEnable.length === 1 ? '' : 's'} shown that are not running (${namesOf(toEnable)})? Each starts from its last checkpoint.`} />
      <ConfirmButton label="Disable all" danger disabled={toDisable.length === 0} onConfirm={runAll('disable', toDisable, 'Disabled')}
        question={`Disable the ${toDisable.length} enabled projection${toDisable.length === 1 ? '' : 's'} shown (${namesOf(toDisable)})? Each stops after writing a checkpoint, until enabled again.`} />
      {done ? <Notice>{done}</Notice> : null}
    </div>
  );
}
