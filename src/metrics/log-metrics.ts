import type { Registry } from 'prom-client';
import type { Store } from '../store/index.js';
import type { DriveFigures, StatsCollector } from '../stats/index.js';
import { one, scrapedCounter, scrapedGauge } from './scrape.js';

// The log and its writer, read at scrape time: what the writer committed (the figures /stats
// shows under svc.writer), its queue, where the log ends, the data directory's free space, and a
// follower's distance behind its leader.

export interface LogSources {
  store: Store;
  /** Its data drive figures (statfs, cached for a second). */
  stats: StatsCollector;
  /** Bytes of the leader's log this node does not hold yet, as last heard; undefined when it follows no leader. */
  replicationLagBytes(): number | undefined;
}

export function registerLogMetrics(registry: Registry, { store, stats, replicationLagBytes }: LogSources): void {
  const writer = store.writerStats;
  scrapedCounter({
    registry, name: 'svc_events_written_total',
    help: 'Log records this node\'s writer committed since it started: events, links, metadata events and tombstones, '
      + 'whoever wrote them (clients, projections, subscriptions, the node itself; on a follower, the leader\'s replicated).',
    read: () => one(writer.recordsWritten),
  });
  scrapedCounter({
    registry, name: 'svc_written_bytes_total', help: 'Bytes of those records as stored in the log.',
    read: () => one(writer.recordBytesWritten),
  });
  scrapedGauge({
    registry, name: 'svc_writer_queue_length', help: 'Writes waiting for the writer (appends, deletes, checkpoints, replicated batches).',
    read: () => one(store.writerQueueLength),
  });
  scrapedGauge({
    registry, name: 'svc_log_position_bytes',
    help: 'The position after the last record readers see: bytes of log written since the database was created (a scavenge does not lower it).',
    read: () => one(store.headPosition),
  });
  const drive = (pick: (d: DriveFigures) => number) => () => {
    const d = stats.dataDrive();
    return d.totalBytes > 0 ? one(pick(d)) : []; // statfs failed: not measured
  };
  scrapedGauge({
    registry, name: 'svc_data_disk_available_bytes', help: 'Bytes the node may still use on the data directory\'s file system.',
    read: drive((d) => d.availableBytes),
  });
  scrapedGauge({
    registry, name: 'svc_data_disk_size_bytes', help: 'Size of the data directory\'s file system.', read: drive((d) => d.totalBytes),
  });
  scrapedGauge({
    registry, name: 'svc_replication_lag_bytes',
    help: 'A follower: bytes of the leader\'s log (its end as last heard, every 250 ms) not yet written here. Absent on a leader or single node.',
    read: () => {
      const lag = replicationLagBytes();
      return lag === undefined ? [] : one(lag);
    },
  });
}
