import { DomainError } from '../errors.js';

// The coordinator's refusals; each door answers them by code (src/api/errors.ts for HTTP, as
// reference §3.5 says): not enabled 503, rejected 400 (the reason as a JSON string), failed 500.

/** The feature is off (no license, dev mode, in-memory database...): the control endpoints answer 503. */
export class AutoScavengeNotEnabledError extends DomainError {
  readonly code = 'AUTO_SCAVENGE_NOT_ENABLED';

  constructor() {
    super('AutoScavenge is not enabled');
  }
}

/** A command the state refuses ("Auto scavenge process is currently pausing", "Node is not the leader"). */
export class AutoScavengeRejectedError extends DomainError {
  readonly code = 'AUTO_SCAVENGE_REJECTED';
}

/** The coordinator cannot take the command: its loop died, it stopped, or its queue is full. */
export class AutoScavengeFailedError extends DomainError {
  readonly code = 'AUTO_SCAVENGE_FAILED';
}
