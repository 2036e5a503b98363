// Persistent subscriptions, the folder's face: the service that keeps the node's groups (their
// definitions in the log), a group and what it shows, its settings as the HTTP body gives and
// shows them and as clients must send them, its push consumers, and the errors a change meets.
// Sources, strategies, parked messages, limits and checkpoints stay inside.
export { SubscriptionService } from './service.js';
export { SubscriptionError, SettingsError } from './errors.js';
export type { PersistentGroup, GroupInfo, NackAction } from './group.js';
export type { Message } from './message.js';
export type { ConnectionInfo, ConsumerOptions, DropReason } from './consumer.js';
export { ALL_SOURCE } from './source.js';
export {
  STRATEGIES, checkClientSettings, settingsFromBody, settingsJson, type ConsumerStrategyName, type FilterDefinition, type GroupSettings,
} from './settings.js';
