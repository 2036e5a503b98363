import { VERSION_LINE } from '../../version.js';

// ServerFeatures.GetSupportedMethods: what the clients ask on connect to choose their code
// paths. The list is built from the methods this node serves (never one that would answer
// UNIMPLEMENTED), with the features the established 24.10 line reports for them: every
// persistent-subscription method says `stream` and `all` (the Node clients refuse the `…ToAll`
// calls without `all`, and fall back to HTTP for info, list and replay without `stream`).

const FEATURES: Record<string, string[]> = {
  'event_store.client.streams.streams/read': ['position', 'events'],
  'event_store.client.streams.streams/batchappend': ['deadline_duration'],
  'event_store.client.projections.projections/create': ['track_emitted_streams'],
};
const SERVICE_FEATURES: Record<string, string[]> = {
  'event_store.client.persistent_subscriptions.persistentsubscriptions': ['stream', 'all'],
};

export function supportedMethods(paths: readonly string[]): Record<string, unknown> {
  const methods = paths.map((path) => {
    const [service, method] = path.slice(1).toLowerCase().split('/');
    return { method_name: method, service_name: service, features: FEATURES[`${service}/${method}`] ?? SERVICE_FEATURES[service] ?? [] };
  });
  return { methods, event_store_server_version: VERSION_LINE };
}
