// Streams and event types the store itself treats specially.

/** Scavenge points are written here (event numbers from 0), one `$scavengePoint` event each. */
export const SCAVENGE_POINTS_STREAM = '$scavengePoints';
export const SCAVENGE_POINT_EVENT_TYPE = '$scavengePoint';

/**
 * A cluster leader's epoch records (src/cluster/epochs.ts): how two logs are compared. Reserved:
 * only Store.appendReserved writes it or its metadata stream; the write door refuses everyone else.
 */
export const EPOCHS_STREAM = '$epochs';
export const RESERVED_STREAMS: ReadonlySet<string> = new Set([EPOCHS_STREAM]);
