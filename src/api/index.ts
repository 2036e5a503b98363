// The API, the folder's face: the node's two doors on one port (HTTP/1.1 through fastify, gRPC over
// HTTP/2), opened by node.ts; what the doors ask of the node (NodeControl); and the leader routing
// a cluster hands them. Routes, codecs and the error table stay inside.
export { openDoors, type Doors } from './doors.js';
export type { Route } from './app.js';
export type { NodeControl, ReloadOutcome } from './context.js';
export type { LeaderRouting } from './leader-routing.js';
export { SendQueue } from './send-queue.js';
