// Persistent subscriptions, the folder's face: the service that keeps the node's groups (their
// definitions in the log), a group as the API drives it, its settings as the HTTP body gives and
// shows them, and the errors a change meets. Parked messages, limits and checkpoints stay inside.
export { SubscriptionService, SubscriptionError } from './service.js';
export type { PersistentGroup, NackAction } from './group.js';
export { SettingsError, settingsFromBody, settingsJson, type GroupSettings } from './settings.js';
