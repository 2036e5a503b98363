import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import protobuf from 'protobufjs';
import { packageRoot } from '../../version.js';
import type { MethodDefinition } from './server.js';

// The codecs of the gRPC door, from the project's own .proto files (src/api/grpc/proto, written
// from the wire facts of the established server's client protocol) loaded with protobufjs.
// Decoded messages keep the proto's field names, 64-bit integers as decimal strings, enums as
// their names, and name the arm set in each oneof; absent fields stay absent.

export const TO_OBJECT: protobuf.IConversionOptions = { longs: String, enums: String, oneofs: true, defaults: false };

/** The .proto files stay in src/ (tsc copies no data); found from the package root, whether running src/ or dist/. */
export function protoFolder(): string {
  return join(packageRoot(), 'src', 'api', 'grpc', 'proto');
}

let loaded: protobuf.Root | undefined;

export function protoRoot(): protobuf.Root {
  if (loaded) return loaded;
  const folder = protoFolder();
  const root = new protobuf.Root();
  // Imports name files by their path under the folder; google/protobuf/* are protobufjs' own.
  root.resolvePath = (_origin, target) => (target.startsWith('google/protobuf/') ? target : join(folder, target.replace(/^.*\//, '')));
  root.loadSync(readdirSync(folder).filter((f) => f.endsWith('.proto')).map((f) => join(folder, f)), { keepCase: true });
  root.resolveAll();
  loaded = root;
  return root;
}

/** Both directions' codecs, for a client of the node (tests, benches). */
export interface ClientCodecs {
  readonly requestSerialize: (value: unknown) => Buffer;
  readonly responseDeserialize: (bytes: Buffer) => Record<string, unknown>;
}

/** The serializers of one method of a service (`event_store.client.streams.Streams`, `Read`). */
export function methodOf(service: string, name: string): MethodDefinition & ClientCodecs {
  const svc = protoRoot().lookupService(service);
  const method = svc.methods[name];
  if (!method) throw new Error(`${service} has no method ${name}`);
  const request = method.resolvedRequestType!;
  const response = method.resolvedResponseType!;
  return {
    path: `/${service}/${name}`,
    requestStream: Boolean(method.requestStream),
    responseStream: Boolean(method.responseStream),
    requestDeserialize: (bytes) => request.toObject(request.decode(bytes), TO_OBJECT),
    responseSerialize: (value) => Buffer.from(response.encode(response.fromObject(value as Record<string, unknown>)).finish()),
    requestSerialize: (value) => Buffer.from(request.encode(request.fromObject(value as Record<string, unknown>)).finish()),
    responseDeserialize: (bytes) => response.toObject(response.decode(bytes), TO_OBJECT),
  };
}

/** One message of a named type, encoded (the `Any` details of a BatchAppend error). */
export function encodeMessage(typeName: string, value: Record<string, unknown>): Buffer {
  const type = protoRoot().lookupType(typeName);
  return Buffer.from(type.encode(type.fromObject(value)).finish());
}

/** Decodes a message of a named type (tests, benches). */
export function decodeMessage(typeName: string, bytes: Buffer): Record<string, unknown> {
  const type = protoRoot().lookupType(typeName);
  return type.toObject(type.decode(bytes), TO_OBJECT);
}
