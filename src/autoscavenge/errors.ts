// The coordinator's refusals; src/api/auto-scavenge.ts turns each into its answer
// (reference §3.5): not enabled 503, rejected 400 (the reason as a JSON string), failed 500.

/** The feature is off (no license, dev mode, in-memory database...): the control endpoints answer 503. */
export class AutoScavengeNotEnabledError extends Error {
  constructor() {
    super('AutoScavenge is not enabled');
  }
}

/** A command the state refuses ("Auto scavenge process is currently pausing", "Node is not the leader"). */
export class AutoScavengeRejectedError extends Error {}

/** The coordinator cannot take the command: its loop died, it stopped, or its queue is full. */
export class AutoScavengeFailedError extends Error {}
