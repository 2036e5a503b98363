import { useState } from 'preact/hooks';
import { isOps } from '../../api';
import type { ViewProps } from '../../view';
import { AutoScavengeSection } from './auto-scavenge';
import { NodeSection } from './node-control';
import { ScavengeDetail, ScavengeSection } from './scavenge';
import './admin.css';

// The admin views ($ops and $admins): scavenging (start with parameters, live progress, stop,
// history), auto-scavenge (status, schedule, pause/resume), and the node's reload and shutdown.
// Routes: #/admin, #/admin/scavenges/{id} (one scavenge's history stream).

export default function Admin({ path, session }: ViewProps) {
  const [stopping, setStopping] = useState(false);
  if (!isOps(session)) {
    // The node would refuse every request here (and a refusal ends the session): ask nothing.
    return (
      <section aria-labelledby="admin-title">
        <h1 id="admin-title">Admin</h1>
        <p>The admin views are for operators and administrators (members of $ops or $admins).</p>
      </section>
    );
  }
  if (path[0] === 'scavenges' && path[1]) return <ScavengeDetail id={path[1]} />;
  return (
    <section aria-labelledby="admin-title" class="admin">
      <h1 id="admin-title">Admin</h1>
      {stopping ? null : (
        <>
          <ScavengeSection live={!stopping} />
          <AutoScavengeSection live={!stopping} />
        </>
      )}
      <NodeSection stopping={stopping} onShutdown={() => setStopping(true)} />
    </section>
  );
}
