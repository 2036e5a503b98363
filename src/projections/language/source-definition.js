// @ts-check
// The source definition: what a query declares (selectors, partitioning, handlers, options),
// in the one shape every side uses. The sandbox records a query's definition starting from
// blankDefinition() (definition-phase.js); the host checks it (../definition.ts) and builds the
// definitions it makes itself (the system projections, read-events queries) from the same blank.

/**
 * @typedef {object} SourceDefinition
 * @property {boolean} allEvents
 * @property {boolean} allStreams
 * @property {string[]} streams
 * @property {string[]} categories
 * @property {string[]} events
 * @property {boolean} byStream
 * @property {boolean} byCustomPartitions
 * @property {boolean} definesFold
 * @property {boolean} producesResults
 * @property {boolean} definesStateTransform
 * @property {boolean} handlesDeletedNotifications
 * @property {boolean} biState
 * @property {boolean} includeLinks
 * @property {boolean} reorderEvents
 * @property {number} processingLag
 * @property {string | null} resultStreamName
 * @property {string | null} partitionResultStreamNamePattern
 * @property {boolean} anyHandler
 * @property {string[]} handlerOrder Handler keys in property order ($any and event types), which decides what is delivered.
 */

/** @returns {SourceDefinition} a definition that declares nothing yet */
export function blankDefinition() {
  return {
    allEvents: false, allStreams: false, streams: [], categories: [], events: [],
    byStream: false, byCustomPartitions: false, definesFold: false, producesResults: false,
    definesStateTransform: false, handlesDeletedNotifications: false, biState: false,
    includeLinks: false, reorderEvents: false, processingLag: 0, resultStreamName: null,
    partitionResultStreamNamePattern: null, anyHandler: false, handlerOrder: [],
  };
}
