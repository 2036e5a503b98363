// Backups, the folder's face: the node's backup service (POST /admin/backup: one at a time, never
// beside a scavenge) and the errors a request for one can meet, its target's included. The store
// writes the bytes (store/backup.ts); the target's checks (target.ts, mounts.ts) stay inside.
export { BackupService, BackupAlreadyRunningError, ScavengeRunningError, type BackupRequest } from './service.js';
export { BackupTargetError, type BackupTargetProblem } from './target.js';
