// Projections, the folder's face: the manager that keeps every projection's definition in the log
// and runs them (manager.ts), what the API shows of one (its configuration, source definition, mode
// and statistics), the errors a request meets, the read-events debugger feed and the debugger. The run loop,
// sandbox, language and checkpoint format stay inside.
export {
  ProjectionManager, ProjectionError, type ManagerOptions, type RunProjections, type CreateRequest, type DeleteFlags,
} from './manager.js';
export type { Projection } from './projection.js';
export type { SourceDefinition } from './language/source-definition.js';
export { DEFAULT_CONFIG, type ProjectionConfig, type ProjectionMode, type RunAs } from './model.js';
export type { ProjectionStatistics } from './statistics.js';
export { QuerySyntaxError } from './validate.js';
export { parseReadEventsRequest, readEvents, type ReadEventsResult } from './read-events.js';
export {
  ProjectionDebugger, DEFAULT_DEBUG_EVENTS, MAX_DEBUG_EVENTS, type DebugEvents, type DebugEvent, type DebugReport, type DebugStep,
} from './debugger.js';
