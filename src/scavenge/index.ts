// Scavenge, the folder's face: the node's scavenger (one run at a time, in the background), the
// request it takes and the errors that refuse one, and the name of a run's history stream (the
// auto-scavenge coordinator reads it). The phases and the scavenge state database stay inside.
export { Scavenger, type ScavengerOptions } from './scavenger.js';
export { BackupRunningError, ScavengeAlreadyRunningError, ScavengeNotFoundError, type ScavengeRequest } from './types.js';
export { scavengeStream, SCAVENGES_STREAM } from './history.js';
