import { VERSION_LINE } from '../../version.js';

// ServerFeatures.GetSupportedMethods: what the clients ask on connect to choose their code
// paths. The list is built from the methods this node serves (never one that would answer
// UNIMPLEMENTED), with the features the established 24.10 line reports for them.

const FEATURES: Record<string, string[]> = {
  'event_store.client.streams.streams/read': ['position', 'events'],
  'event_store.client.streams.streams/batchappend': ['deadline_duration'],
  'event_store.client.projections.projections/create': ['track_emitted_streams'],
};

export function supportedMethods(paths: readonly string[]): Record<string, unknown> {
  const methods = paths.map((path) => {
    const [service, method] = path.slice(1).toLowerCase().split('/');
    return { method_name: method, service_name: service, features: FEATURES[`${service}/${method}`] ?? [] };
  });
  return { methods, event_store_server_version: VERSION_LINE };
}
