import { useState } from 'preact/hooks';
import { request } from '../../api';
import { ConfirmButton, Notice } from '../../components';

// The node's own commands, each asked twice: reload the configuration (files and environment
// read again, the reloadable settings applied: log level, certificates) and shut the node down.

interface ReloadOutcome {
  result: 'Reloaded' | 'Failed' | 'AlreadyInProgress';
  message: string;
}

export function NodeSection({ onShutdown, stopping }: { onShutdown: () => void; stopping: boolean }) {
  const [reload, setReload] = useState<ReloadOutcome>();
  return (
    <section aria-labelledby="node-title">
      <h2 id="node-title">Node</h2>
      <div class="row">
        <ConfirmButton label="Reload configuration" disabled={stopping}
          question="Read the configuration files and environment again and apply the settings that can change while the node runs (log level, certificates)?"
          onConfirm={async () => {
            setReload(undefined);
            setReload((await request('/admin/reloadconfig', { method: 'POST' })).json<ReloadOutcome>());
          }} />
        <ConfirmButton label="Shut down node" danger disabled={stopping}
          question="Shut the node down? It finishes the writes in flight and stops; it serves nothing (this console included) until it is started again."
          onConfirm={async () => {
            await request('/admin/shutdown', { method: 'POST' });
            onShutdown();
          }} />
      </div>
      {reload ? (
        reload.result === 'Reloaded'
          ? <Notice>Configuration reloaded: {reload.message}</Notice>
          : <p class="error" role="alert">Configuration not reloaded ({reload.result}): {reload.message}</p>
      ) : null}
      {stopping ? <Notice>The node is stopping. It will not answer until it is started again.</Notice> : null}
    </section>
  );
}
