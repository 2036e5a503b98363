// The project's own .proto files (src/api/grpc/proto) against what the published Node clients put
// on the wire: @eventstore/db-client 6.2.1 and @kurrent/kurrentdb-client 1.3.1 ship google-protobuf
// code generated from the server's definitions. Three checks:
//  1. statically, every message, field (number, name, type, repetition), oneof and enum value in
//     both clients' generated code exists in ours, and every service path/shape matches;
//  2. messages built with @eventstore/db-client's classes decode with ours (client -> server), and
//     messages encoded with ours decode with theirs (server -> client);
//  3. the fields only @kurrent/kurrentdb-client knows (BatchAppend Duration deadline, CaughtUp
//     checkpoint) round-trip with its classes, in a child process: both clients' generated code
//     registers the same global `proto.event_store...` names, so they cannot share a process.

import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import protobuf from 'protobufjs';
import { methodOf, protoFolder, protoRoot } from '../src/api/grpc/codecs.js';

const require = createRequire(import.meta.url);
const ES_DIR = join(dirname(require.resolve('@eventstore/db-client/package.json')), 'generated');
const KC_DIR = join(dirname(require.resolve('@kurrent/kurrentdb-client/package.json')), 'generated', 'kurrentdb', 'protocols', 'v1');

const es = (file: string): any => require(join(ES_DIR, file));

const MAX = '18446744073709551615'; // 2^64-1, "end" / "unknown" on the wire

let protos: { dir: string };
let root: protobuf.Root;

beforeAll(() => {
  protos = { dir: protoFolder() };
  root = protoRoot();
});

/** The method definition the node serves, e.g. method('streams.Streams', 'Read'). */
function method(service: string, name: string): any {
  return methodOf(`event_store.client.${service}`, name);
}

const toBuffer = (msg: { serializeBinary(): Uint8Array }): Buffer => Buffer.from(msg.serializeBinary());

// ---------------------------------------------------------------------------------------------
// 1. Static comparison with the generated code
// ---------------------------------------------------------------------------------------------

interface GenField { id: number; name: string; type: string; repeated: boolean; map?: { key: string; value: string } }

const READERS: Record<string, string> = {
  Uint64String: 'uint64', Uint64: 'uint64', Int64String: 'int64', Int64: 'int64', Uint32: 'uint32', Int32: 'int32',
  String: 'string', Bytes: 'bytes', Bool: 'bool', Enum: 'enum', Float: 'float', Double: 'double',
};
// The module variables the generated code names imported classes by, and their packages.
const MODULES: Record<string, string> = {
  shared_pb: 'event_store.client', kurrentdb_protocols_v1_shared_pb: 'event_store.client',
  status_pb: 'google.rpc', kurrentdb_protocols_v1_status_pb: 'google.rpc',
  google_protobuf_empty_pb: 'google.protobuf', google_protobuf_timestamp_pb: 'google.protobuf',
  google_protobuf_duration_pb: 'google.protobuf', google_protobuf_any_pb: 'google.protobuf',
  google_protobuf_struct_pb: 'google.protobuf',
};

/** Messages (from each deserializeBinaryFromReader) and enums of one generated *_pb.js file. */
function parseGenerated(file: string) {
  const src = readFileSync(file, 'utf8');
  const messages = new Map<string, { fields: GenField[]; oneofs: number[][] }>();
  const reader = /^proto\.([\w.]+)\.deserializeBinaryFromReader = function\(msg, reader\) \{\n([\s\S]*?)\n {2}return msg;\n\};/gm;
  for (const [, name, body] of src.matchAll(reader)) {
    const fields: GenField[] = [];
    for (const [, id, arm] of body!.matchAll(/case (\d+):\n([\s\S]*?)break;/g)) {
      const mapGetter = arm!.match(/msg\.get(\w+)Map\(\)/);
      if (mapGetter) {
        const [key, value] = [...arm!.matchAll(/BinaryReader\.prototype\.read(\w+)/g)].map((m) => READERS[m[1]!]!);
        fields.push({ id: Number(id), name: mapGetter[1]!, type: 'map', repeated: false, map: { key: key!, value: value! } });
        continue;
      }
      const setter = arm!.match(/msg\.(set|add)(\w+)\(/)!;
      const cls = arm!.match(/new ([\w.]+);/);
      let type: string;
      if (cls) {
        const [head, ...rest] = cls[1]!.split('.');
        type = head === 'proto' ? rest.join('.') : `${MODULES[head!] ?? `?${head}`}.${rest.join('.')}`;
      } else {
        const read = arm!.match(/reader\.read(?:Packed)?(\w+)\(/)!;
        type = READERS[read[1]!] ?? `?${read[1]}`;
      }
      fields.push({ id: Number(id), name: setter[2]!, type, repeated: setter[1] === 'add' });
    }
    const groups = src.match(new RegExp(`^proto\\.${name!.replace(/\./g, '\\.')}\\.oneofGroups_ = (\\[.*\\]);`, 'm'));
    messages.set(name!, { fields, oneofs: groups ? JSON.parse(groups[1]!) : [] });
  }
  const enums = new Map<string, Record<string, number>>();
  for (const [, name, body] of src.matchAll(/^proto\.([\w.]+) = \{\n([\s\S]*?)\n\};/gm)) {
    if (name!.endsWith('Case')) continue; // oneof case enums, not proto enums
    enums.set(name!, Object.fromEntries([...body!.matchAll(/^\s+(\w+): (\d+)/gm)].map((m) => [m[1]!, Number(m[2])])));
  }
  return { messages, enums };
}

/** jspb accessor names drop underscores and re-case words: compare on letters and digits only. */
const squash = (s: string) => s.replace(/_/g, '').toLowerCase();

function ourTypeName(field: protobuf.Field): string {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Enum) return 'enum';
  if (resolved) return resolved.fullName.slice(1);
  return field.type;
}

/** Problems (must be none) and differences that are only extras on our side. */
function compareWithGenerated(dir: string) {
  const problems: string[] = [];
  const extras: string[] = [];
  const files = readdirSync(dir).filter((f) => f.endsWith('_pb.js') && !f.endsWith('_grpc_pb.js') && !f.startsWith('cluster'));
  let fieldCount = 0;
  for (const file of files) {
    const { messages, enums } = parseGenerated(join(dir, file));
    for (const [name, gen] of messages) {
      const type = root.lookup(name);
      if (!(type instanceof protobuf.Type)) {
        problems.push(`${name}: no such message`);
        continue;
      }
      for (const f of gen.fields) {
        fieldCount++;
        const ours = type.fieldsById[f.id];
        if (!ours) {
          problems.push(`${name} #${f.id} ${f.name}: no such field`);
          continue;
        }
        if (squash(ours.name) !== squash(f.name)) extras.push(`${name} #${f.id}: named ${ours.name}, theirs ${f.name}`);
        if (f.map) {
          const m = ours as unknown as protobuf.MapField;
          if (!ours.map || m.keyType !== f.map.key || m.type !== f.map.value) problems.push(`${name} #${f.id}: map<${f.map.key},${f.map.value}> differs`);
        } else {
          if (ourTypeName(ours) !== f.type) problems.push(`${name} #${f.id} ${f.name}: ${ourTypeName(ours)}, theirs ${f.type}`);
          if (ours.repeated !== f.repeated) problems.push(`${name} #${f.id} ${f.name}: repeated differs`);
        }
      }
      for (const ours of type.fieldsArray) {
        if (!gen.fields.some((f) => f.id === ours.id)) extras.push(`${name} #${ours.id} ${ours.name}: only ours`);
      }
      const key = (ids: number[]) => [...ids].sort((a, b) => a - b).join(',');
      // proto3 `optional` fields sit in synthetic one-field oneofs that jspb does not list.
      const ourGroups = type.oneofsArray.filter((o) => !o.name.startsWith('_')).map((o) => key(o.fieldsArray.map((f) => f.id)));
      const theirGroups = gen.oneofs.map(key);
      for (const g of theirGroups) if (!ourGroups.includes(g)) problems.push(`${name}: oneof {${g}} not ours (${ourGroups.join(' | ')})`);
      for (const g of ourGroups) if (!theirGroups.includes(g)) extras.push(`${name}: oneof {${g}} only ours`);
    }
    for (const [name, values] of enums) {
      const ours = root.lookup(name);
      if (!(ours instanceof protobuf.Enum)) {
        problems.push(`${name}: no such enum`);
        continue;
      }
      // jspb upper-cases enum value names.
      const ourValues = Object.fromEntries(Object.entries(ours.values).map(([k, v]) => [k.toUpperCase(), v]));
      if (JSON.stringify(Object.entries(ourValues).sort()) !== JSON.stringify(Object.entries(values).sort())) {
        problems.push(`${name}: values ${JSON.stringify(ourValues)}, theirs ${JSON.stringify(values)}`);
      }
    }
  }
  return { problems, extras, fieldCount };
}

interface GenMethod { path: string; requestStream: boolean; responseStream: boolean; request: string; response: string }

/** Every method of every service in the generated *_grpc_pb.js files of a client. */
function generatedMethods(dir: string): GenMethod[] {
  const out: GenMethod[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith('_grpc_pb.js') && !f.startsWith('cluster'))) {
    const src = readFileSync(join(dir, file), 'utf8');
    const re = /path: '([^']+)',\n\s+requestStream: (true|false),\n\s+responseStream: (true|false),\n[\s\S]*?requestSerialize: serialize_(\w+),\n[\s\S]*?responseSerialize: serialize_(\w+),/g;
    for (const m of src.matchAll(re)) {
      out.push({ path: m[1]!, requestStream: m[2] === 'true', responseStream: m[3] === 'true', request: m[4]!, response: m[5]! });
    }
  }
  return out.sort((a, b) => a.path.localeCompare(b.path));
}

/** The same for ours; type names spelled as the generated serializer names spell them. */
function ourMethods(): GenMethod[] {
  const out: GenMethod[] = [];
  const walk = (ns: protobuf.NamespaceBase) => {
    for (const child of ns.nestedArray) {
      if (child instanceof protobuf.Service) {
        for (const m of child.methodsArray) {
          const flat = (t: protobuf.Type | null) => t!.fullName.slice(1).replace(/\./g, '_');
          out.push({
            path: `/${child.fullName.slice(1)}/${m.name}`, requestStream: !!m.requestStream, responseStream: !!m.responseStream,
            request: flat(m.resolvedRequestType), response: flat(m.resolvedResponseType),
          });
        }
      } else if (child instanceof protobuf.Namespace) walk(child);
    }
  };
  walk(root);
  return out.sort((a, b) => a.path.localeCompare(b.path));
}

describe('the .proto files against the clients\' generated code', () => {
  it('hold every message, field, oneof and enum of @eventstore/db-client 6.2.1 (it lacks some newer fields)', () => {
    const { problems, extras, fieldCount } = compareWithGenerated(ES_DIR);
    expect(fieldCount).toBeGreaterThan(400);
    expect(problems).toEqual([]);
    expect(extras.sort()).toEqual([
      'event_store.client.projections.CreateReq.Options #5 engine_version: only ours',
      'event_store.client.streams.BatchAppendReq.Options #6: named deadline_21_10_0, theirs Deadline',
      'event_store.client.streams.BatchAppendReq.Options #7 deadline: only ours',
      'event_store.client.streams.BatchAppendReq.Options: oneof {6,7} only ours',
      'event_store.client.streams.ReadResp.CaughtUp #1 timestamp: only ours',
      'event_store.client.streams.ReadResp.CaughtUp #2 stream_revision: only ours',
      'event_store.client.streams.ReadResp.CaughtUp #3 position: only ours',
      'event_store.client.streams.ReadResp.Checkpoint #3 timestamp: only ours',
      'event_store.client.streams.ReadResp.FellBehind #1 timestamp: only ours',
      'event_store.client.streams.ReadResp.FellBehind #2 stream_revision: only ours',
      'event_store.client.streams.ReadResp.FellBehind #3 position: only ours',
    ]);
  });

  it('are exactly the v1 definitions of @kurrent/kurrentdb-client 1.3.1', () => {
    const { problems, extras, fieldCount } = compareWithGenerated(KC_DIR);
    expect(fieldCount).toBeGreaterThan(400);
    expect(problems).toEqual([]);
    expect(extras).toEqual([]);
  });

  it('serve every method at the path, with the streaming kinds and types, the clients call', () => {
    const ours = ourMethods();
    expect(ours.map((m) => m.path)).toContain('/event_store.client.streams.Streams/Read');
    // 6.2.1 knows every service we define (Monitoring included); 1.3.1 all but Monitoring.
    expect(ours).toEqual(generatedMethods(ES_DIR));
    const kurrent = generatedMethods(KC_DIR);
    expect(kurrent.length).toBe(ours.length - 1);
    for (const m of kurrent) expect(ours).toContainEqual(m);
    // And the node's loaded definitions have the same paths.
    for (const m of ours) {
      const [, fullService, name] = m.path.split('/');
      expect(method(fullService!.replace(/^event_store\.client\./, ''), name!).path).toBe(m.path);
    }
  });

  it('are read from src/api/grpc/proto under the package root', () => {
    const pkg = dirname(dirname(dirname(dirname(protos.dir))));
    expect(protos.dir).toBe(join(pkg, 'src', 'api', 'grpc', 'proto'));
    expect(root.lookupService('event_store.client.streams.Streams').methodsArray.map((m) => m.name).sort())
      .toEqual(['Append', 'BatchAppend', 'Delete', 'Read', 'Tombstone']);
  });
});

// ---------------------------------------------------------------------------------------------
// 2. Round trips with @eventstore/db-client's classes
// ---------------------------------------------------------------------------------------------

describe('wire round trips with @eventstore/db-client', () => {
  const shared = es('shared_pb.js');
  const streams = es('streams_pb.js');
  const status = es('status_pb.js');
  const code = es('code_pb.js');
  const { Any } = require('google-protobuf/google/protobuf/any_pb.js');
  const { Empty: GEmpty } = require('google-protobuf/google/protobuf/empty_pb.js');
  const { Timestamp } = require('google-protobuf/google/protobuf/timestamp_pb.js');

  const streamId = (name: string) => new shared.StreamIdentifier().setStreamName(Buffer.from(name));
  const textOf = (bytes: Uint8Array | string) => Buffer.from(bytes as Uint8Array).toString();

  it('ReadReq: a stream read (count) and a filtered $all subscription', () => {
    const { ReadReq } = streams;
    const O = ReadReq.Options;
    const read = new ReadReq().setOptions(new O()
      .setStream(new O.StreamOptions().setStreamIdentifier(streamId('orders-1')).setRevision('5'))
      .setReadDirection(O.ReadDirection.BACKWARDS)
      .setResolveLinks(true)
      .setCount(MAX)
      .setNoFilter(new shared.Empty())
      .setUuidOption(new O.UUIDOption().setString(new shared.Empty()))
      .setControlOption(new O.ControlOption().setCompatibility(1)));
    expect(method('streams.Streams', 'Read').requestDeserialize(toBuffer(read))).toEqual({
      options: {
        stream_option: 'stream',
        stream: { stream_identifier: { stream_name: Buffer.from('orders-1') }, revision_option: 'revision', revision: '5' },
        read_direction: 'Backwards',
        resolve_links: true,
        count_option: 'count',
        count: MAX,
        filter_option: 'no_filter',
        no_filter: {},
        uuid_option: { content: 'string', string: {} },
        control_option: { compatibility: 1 },
      },
    });

    const subscribe = new ReadReq().setOptions(new O()
      .setAll(new O.AllOptions().setPosition(new O.Position().setCommitPosition('1200').setPreparePosition('1100')))
      .setSubscription(new O.SubscriptionOptions())
      .setFilter(new O.FilterOptions()
        .setEventType(new O.FilterOptions.Expression().setRegex('^[^$].*').setPrefixList(['a-', 'b-']))
        .setMax(32)
        .setCheckpointintervalmultiplier(2))
      .setUuidOption(new O.UUIDOption().setStructured(new shared.Empty())));
    const decoded = method('streams.Streams', 'Read').requestDeserialize(toBuffer(subscribe));
    expect(decoded).toEqual({
      options: {
        stream_option: 'all',
        all: { all_option: 'position', position: { commit_position: '1200', prepare_position: '1100' } },
        count_option: 'subscription',
        subscription: {},
        filter_option: 'filter',
        filter: {
          filter: 'event_type',
          event_type: { regex: '^[^$].*', prefix: ['a-', 'b-'] },
          window: 'max',
          max: 32,
          checkpointIntervalMultiplier: 2,
        },
        uuid_option: { content: 'structured', structured: {} },
      },
    });
    // Forwards is 0: never on the wire, so absent (defaults: false), and the handler defaults it.
    expect(decoded.options.read_direction).toBeUndefined();
  });

  it('ReadResp event with a resolved link and commit_position, both directions', () => {
    const { ReadResp } = streams;
    const RE = ReadResp.ReadEvent.RecordedEvent;
    const recorded = (id: string, stream: string, revision: string, pos: string, type: string, data: string) => {
      const e = new RE().setId(new shared.UUID().setString(id)).setStreamIdentifier(streamId(stream))
        .setStreamRevision(revision).setPreparePosition(pos).setCommitPosition(pos)
        .setCustomMetadata(Buffer.from('{"$causedBy":"x"}')).setData(Buffer.from(data));
      e.getMetadataMap().set('type', type).set('created', '17000000000000000').set('content-type', 'application/json');
      return e;
    };
    const theirs = new ReadResp().setEvent(new ReadResp.ReadEvent()
      .setEvent(recorded('5f8b1e9e-4f0a-4c7a-9d0e-2f9f2b1a3c4d', 'target', '2', '300', 'linky', '{"a":1}'))
      .setLink(recorded('0b6a1d2c-8e3f-4a5b-9c7d-1e2f3a4b5c6d', 'a-1', '0', MAX, '$>', '2@target'))
      .setCommitPosition('900'));
    const expected = {
      content: 'event',
      event: {
        event: {
          id: { value: 'string', string: '5f8b1e9e-4f0a-4c7a-9d0e-2f9f2b1a3c4d' },
          stream_identifier: { stream_name: Buffer.from('target') },
          stream_revision: '2', prepare_position: '300', commit_position: '300',
          metadata: { type: 'linky', created: '17000000000000000', 'content-type': 'application/json' },
          custom_metadata: Buffer.from('{"$causedBy":"x"}'),
          data: Buffer.from('{"a":1}'),
        },
        link: {
          id: { value: 'string', string: '0b6a1d2c-8e3f-4a5b-9c7d-1e2f3a4b5c6d' },
          stream_identifier: { stream_name: Buffer.from('a-1') },
          prepare_position: MAX, commit_position: MAX, // revision 0: not on the wire
          metadata: { type: '$>', created: '17000000000000000', 'content-type': 'application/json' },
          custom_metadata: Buffer.from('{"$causedBy":"x"}'),
          data: Buffer.from('2@target'),
        },
        position: 'commit_position',
        commit_position: '900',
      },
    };
    const read = method('streams.Streams', 'Read');
    expect(read.responseDeserialize(toBuffer(theirs))).toEqual(expected);

    // Server -> client: what a handler writes, read back by the client.
    const bytes: Buffer = read.responseSerialize(expected);
    const back = ReadResp.deserializeBinary(bytes);
    expect(back.getContentCase()).toBe(ReadResp.ContentCase.EVENT);
    const ev = back.getEvent();
    expect(ev.getPositionCase()).toBe(ReadResp.ReadEvent.PositionCase.COMMIT_POSITION);
    expect(ev.getCommitPosition()).toBe('900');
    expect(ev.getEvent().getId().getString()).toBe('5f8b1e9e-4f0a-4c7a-9d0e-2f9f2b1a3c4d');
    expect(textOf(ev.getEvent().getStreamIdentifier().getStreamName())).toBe('target');
    expect(ev.getEvent().getStreamRevision()).toBe('2');
    expect(ev.getEvent().getMetadataMap().get('type')).toBe('linky');
    expect(textOf(ev.getEvent().getData())).toBe('{"a":1}');
    expect(ev.getLink().getCommitPosition()).toBe(MAX);
    expect(ev.getLink().getStreamRevision()).toBe('0');
    expect(textOf(ev.getLink().getData())).toBe('2@target');
  });

  it('ReadResp caught_up, checkpoint, confirmation, stream_not_found and last_stream_position', () => {
    const { ReadResp } = streams;
    const read = method('streams.Streams', 'Read');
    // Client-built (6.2.1 knows CaughtUp without fields, Checkpoint without its timestamp).
    expect(read.responseDeserialize(toBuffer(new ReadResp().setCaughtUp(new ReadResp.CaughtUp()))))
      .toEqual({ content: 'caught_up', caught_up: {} });
    expect(read.responseDeserialize(toBuffer(new ReadResp().setCheckpoint(
      new ReadResp.Checkpoint().setCommitPosition('4096').setPreparePosition('4000')))))
      .toEqual({ content: 'checkpoint', checkpoint: { commit_position: '4096', prepare_position: '4000' } });

    // Server-built, with the fields a 24.10 server fills; 6.2.1 skips what it does not know.
    const caughtUp = ReadResp.deserializeBinary(read.responseSerialize({
      caught_up: { timestamp: { seconds: '1700000000', nanos: 5 }, stream_revision: '41' },
    }));
    expect(caughtUp.getContentCase()).toBe(ReadResp.ContentCase.CAUGHT_UP);
    const checkpoint = ReadResp.deserializeBinary(read.responseSerialize({
      checkpoint: { commit_position: '4096', prepare_position: '4000', timestamp: { seconds: '1700000000', nanos: 0 } },
    })).getCheckpoint();
    expect([checkpoint.getCommitPosition(), checkpoint.getPreparePosition()]).toEqual(['4096', '4000']);
    expect(ReadResp.deserializeBinary(read.responseSerialize({ confirmation: { subscription_id: 'abc' } }))
      .getConfirmation().getSubscriptionId()).toBe('abc');
    const notFound = ReadResp.deserializeBinary(read.responseSerialize({ stream_not_found: { stream_identifier: { stream_name: Buffer.from('nope') } } }));
    expect(notFound.getContentCase()).toBe(ReadResp.ContentCase.STREAM_NOT_FOUND);
    expect(textOf(notFound.getStreamNotFound().getStreamIdentifier().getStreamName())).toBe('nope');
    const last = ReadResp.deserializeBinary(read.responseSerialize({ last_stream_position: '0' }));
    expect(last.getContentCase()).toBe(ReadResp.ContentCase.LAST_STREAM_POSITION); // a 0 arm is still present
    expect(last.getLastStreamPosition()).toBe('0');
    // An Empty arm is sent as tag + zero length: the client sees it set.
    const fell = ReadResp.deserializeBinary(read.responseSerialize({ fell_behind: {} }));
    expect(fell.getContentCase()).toBe(ReadResp.ContentCase.FELL_BEHIND);
  });

  it('AppendReq: options, then a proposed message', () => {
    const { AppendReq } = streams;
    const append = method('streams.Streams', 'Append');
    const options = new AppendReq().setOptions(new AppendReq.Options().setStreamIdentifier(streamId('orders-1')).setNoStream(new shared.Empty()));
    expect(append.requestDeserialize(toBuffer(options))).toEqual({
      content: 'options',
      options: { stream_identifier: { stream_name: Buffer.from('orders-1') }, expected_stream_revision: 'no_stream', no_stream: {} },
    });
    const revision = new AppendReq().setOptions(new AppendReq.Options().setStreamIdentifier(streamId('s')).setRevision('0'));
    expect(append.requestDeserialize(toBuffer(revision)).options).toMatchObject({ expected_stream_revision: 'revision', revision: '0' });

    const proposed = new AppendReq.ProposedMessage().setId(new shared.UUID().setString('5f8b1e9e-4f0a-4c7a-9d0e-2f9f2b1a3c4d'))
      .setCustomMetadata(Buffer.from('{"m":1}')).setData(Buffer.from('{"d":2}'));
    proposed.getMetadataMap().set('type', 'OrderPlaced').set('content-type', 'application/json');
    expect(append.requestDeserialize(toBuffer(new AppendReq().setProposedMessage(proposed)))).toEqual({
      content: 'proposed_message',
      proposed_message: {
        id: { value: 'string', string: '5f8b1e9e-4f0a-4c7a-9d0e-2f9f2b1a3c4d' },
        metadata: { type: 'OrderPlaced', 'content-type': 'application/json' },
        custom_metadata: Buffer.from('{"m":1}'),
        data: Buffer.from('{"d":2}'),
      },
    });
  });

  it('AppendResp: success and wrong_expected_version (both generations), both directions', () => {
    const { AppendResp } = streams;
    const append = method('streams.Streams', 'Append');
    const success = AppendResp.deserializeBinary(append.responseSerialize({
      success: { current_revision: '0', position: { commit_position: '512', prepare_position: '512' } },
    }));
    expect(success.getResultCase()).toBe(AppendResp.ResultCase.SUCCESS);
    expect(success.getSuccess().getCurrentRevisionOptionCase()).toBe(AppendResp.Success.CurrentRevisionOptionCase.CURRENT_REVISION);
    expect(success.getSuccess().getCurrentRevision()).toBe('0');
    expect(success.getSuccess().getPosition().getCommitPosition()).toBe('512');

    const wrong = AppendResp.deserializeBinary(append.responseSerialize({
      wrong_expected_version: {
        no_stream_20_6_0: {}, expected_revision_20_6_0: MAX,
        current_no_stream: {}, expected_no_stream: {},
      },
    })).getWrongExpectedVersion();
    const W = AppendResp.WrongExpectedVersion;
    expect(wrong.getCurrentRevisionOptionCase()).toBe(W.CurrentRevisionOptionCase.CURRENT_NO_STREAM);
    expect(wrong.getExpectedRevisionOptionCase()).toBe(W.ExpectedRevisionOptionCase.EXPECTED_NO_STREAM);
    expect(wrong.getCurrentRevisionOption2060Case()).toBe(W.CurrentRevisionOption2060Case.NO_STREAM_20_6_0);
    expect(wrong.getExpectedRevisionOption2060Case()).toBe(W.ExpectedRevisionOption2060Case.EXPECTED_REVISION_20_6_0);

    const theirs = new AppendResp().setWrongExpectedVersion(new W()
      .setCurrentRevision2060(3).setExpectedRevision2060(1).setCurrentRevision('3').setExpectedRevision('1'));
    expect(append.responseDeserialize(toBuffer(theirs))).toEqual({
      result: 'wrong_expected_version',
      wrong_expected_version: {
        current_revision_option_20_6_0: 'current_revision_20_6_0', current_revision_20_6_0: '3',
        expected_revision_option_20_6_0: 'expected_revision_20_6_0', expected_revision_20_6_0: '1',
        current_revision_option: 'current_revision', current_revision: '3',
        expected_revision_option: 'expected_revision', expected_revision: '1',
      },
    });
  });

  it('BatchAppendReq (6.2.1 deadline = field 6 Timestamp) decodes as deadline_21_10_0', () => {
    const { BatchAppendReq } = streams;
    const m = new BatchAppendReq.ProposedMessage().setId(new shared.UUID().setString('5f8b1e9e-4f0a-4c7a-9d0e-2f9f2b1a3c4d')).setData(Buffer.from('x'));
    m.getMetadataMap().set('type', 't').set('content-type', 'application/octet-stream');
    const req = new BatchAppendReq()
      .setCorrelationId(new shared.UUID().setString('0b6a1d2c-8e3f-4a5b-9c7d-1e2f3a4b5c6d'))
      .setOptions(new BatchAppendReq.Options().setStreamIdentifier(streamId('orders-1')).setAny(new GEmpty())
        .setDeadline(new Timestamp().setSeconds(1700000010).setNanos(250)))
      .setProposedMessagesList([m, m])
      .setIsFinal(true);
    const decoded = method('streams.Streams', 'BatchAppend').requestDeserialize(toBuffer(req));
    expect(decoded).toEqual({
      correlation_id: { value: 'string', string: '0b6a1d2c-8e3f-4a5b-9c7d-1e2f3a4b5c6d' },
      options: {
        stream_identifier: { stream_name: Buffer.from('orders-1') },
        expected_stream_position: 'any', any: {},
        deadline_option: 'deadline_21_10_0', deadline_21_10_0: { seconds: '1700000010', nanos: 250 },
      },
      proposed_messages: [1, 2].map(() => ({
        id: { value: 'string', string: '5f8b1e9e-4f0a-4c7a-9d0e-2f9f2b1a3c4d' },
        metadata: { type: 't', 'content-type': 'application/octet-stream' },
        data: Buffer.from('x'),
      })),
      is_final: true,
    });
  });

  it('BatchAppendResp: error Status with one Any detail, and success, both directions', () => {
    const { BatchAppendResp } = streams;
    const batch = method('streams.Streams', 'BatchAppend');

    // Client-built error: the detail packed the way the server packs it.
    const detail = new shared.WrongExpectedVersion().setCurrentNoStream(new GEmpty()).setExpectedStreamPosition('5');
    const any = new Any();
    any.pack(detail.serializeBinary(), 'event_store.client.WrongExpectedVersion');
    const theirs = new BatchAppendResp()
      .setCorrelationId(new shared.UUID().setStructured(new shared.UUID.Structured().setMostSignificantBits('-1').setLeastSignificantBits('42')))
      .setStreamIdentifier(streamId('orders-1'))
      .setError(new status.Status().setCode(code.Code.ALREADY_EXISTS).setMessage('WrongExpectedVersion').setDetails(any));
    const decoded = batch.responseDeserialize(toBuffer(theirs));
    expect(decoded).toMatchObject({
      correlation_id: { value: 'structured', structured: { most_significant_bits: '-1', least_significant_bits: '42' } },
      stream_identifier: { stream_name: Buffer.from('orders-1') },
      result: 'error',
      error: { code: 'ALREADY_EXISTS', message: 'WrongExpectedVersion', details: { type_url: 'type.googleapis.com/event_store.client.WrongExpectedVersion' } },
    });
    const WEV = root.lookupType('event_store.client.WrongExpectedVersion');
    expect(WEV.toObject(WEV.decode(decoded.error.details.value), { longs: String, oneofs: true })).toEqual({
      current_stream_revision_option: 'current_no_stream', current_no_stream: {},
      expected_stream_position_option: 'expected_stream_position', expected_stream_position: '5',
    });

    // Server-built error: the Any given in its expanded `@type` form (protobufjs packs it).
    const fromUs = BatchAppendResp.deserializeBinary(batch.responseSerialize({
      correlation_id: { string: '0b6a1d2c-8e3f-4a5b-9c7d-1e2f3a4b5c6d' },
      stream_identifier: { stream_name: Buffer.from('orders-1') },
      error: {
        code: 'DEADLINE_EXCEEDED', message: 'Timeout',
        details: { '@type': 'type.googleapis.com/event_store.client.Timeout' },
      },
    }));
    expect(fromUs.getResultCase()).toBe(BatchAppendResp.ResultCase.ERROR);
    expect(fromUs.getCorrelationId().getString()).toBe('0b6a1d2c-8e3f-4a5b-9c7d-1e2f3a4b5c6d');
    expect(fromUs.getError().getCode()).toBe(code.Code.DEADLINE_EXCEEDED);
    expect(fromUs.getError().getDetails().getTypeName()).toBe('event_store.client.Timeout'); // what the client switches on

    const wrong = BatchAppendResp.deserializeBinary(batch.responseSerialize({
      stream_identifier: { stream_name: Buffer.from('s') },
      error: {
        code: 'ALREADY_EXISTS', message: 'WrongExpectedVersion',
        details: { '@type': 'type.googleapis.com/event_store.client.WrongExpectedVersion', current_stream_revision: '7', expected_no_stream: {} },
      },
    })).getError().getDetails().unpack(shared.WrongExpectedVersion.deserializeBinary, 'event_store.client.WrongExpectedVersion');
    expect(wrong.getCurrentStreamRevision()).toBe('7');
    expect(wrong.getExpectedStreamPositionOptionCase()).toBe(shared.WrongExpectedVersion.ExpectedStreamPositionOptionCase.EXPECTED_NO_STREAM);

    const ok = BatchAppendResp.deserializeBinary(batch.responseSerialize({
      correlation_id: { string: 'c' }, stream_identifier: { stream_name: Buffer.from('s') },
      success: { current_revision: '9', position: { commit_position: '77', prepare_position: '77' } },
    }));
    expect(ok.getResultCase()).toBe(BatchAppendResp.ResultCase.SUCCESS);
    expect(ok.getSuccess().getCurrentRevision()).toBe('9');
    expect(ok.getSuccess().getPosition().getPreparePosition()).toBe('77');
  });

  it('DeleteReq / TombstoneReq and their responses', () => {
    const { DeleteReq, DeleteResp, TombstoneReq } = streams;
    const del = new DeleteReq().setOptions(new DeleteReq.Options().setStreamIdentifier(streamId('gone')).setStreamExists(new shared.Empty()));
    expect(method('streams.Streams', 'Delete').requestDeserialize(toBuffer(del))).toEqual({
      options: { stream_identifier: { stream_name: Buffer.from('gone') }, expected_stream_revision: 'stream_exists', stream_exists: {} },
    });
    const tomb = new TombstoneReq().setOptions(new TombstoneReq.Options().setStreamIdentifier(streamId('gone')).setRevision('3'));
    expect(method('streams.Streams', 'Tombstone').requestDeserialize(toBuffer(tomb)).options.revision).toBe('3');
    const resp = DeleteResp.deserializeBinary(method('streams.Streams', 'Delete').responseSerialize({ position: { commit_position: '10', prepare_position: '10' } }));
    expect(resp.getPositionOptionCase()).toBe(DeleteResp.PositionOptionCase.POSITION);
    expect(resp.getPosition().getCommitPosition()).toBe('10');
  });

  it('ServerFeatures: Empty in, SupportedMethods out', () => {
    const sf = es('serverfeatures_pb.js');
    const get = method('server_features.ServerFeatures', 'GetSupportedMethods');
    expect(get.requestDeserialize(toBuffer(new shared.Empty()))).toEqual({});
    const back = sf.SupportedMethods.deserializeBinary(get.responseSerialize({
      event_store_server_version: '24.10.0',
      methods: [
        { method_name: 'read', service_name: 'event_store.client.streams.streams', features: ['position', 'events'] },
        { method_name: 'batchappend', service_name: 'event_store.client.streams.streams', features: ['deadline_duration'] },
      ],
    }));
    expect(back.getEventStoreServerVersion()).toBe('24.10.0');
    expect(back.getMethodsList().map((m: any) => [m.getServiceName(), m.getMethodName(), m.getFeaturesList()])).toEqual([
      ['event_store.client.streams.streams', 'read', ['position', 'events']],
      ['event_store.client.streams.streams', 'batchappend', ['deadline_duration']],
    ]);
  });

  it('PersistentSubscriptions: Read options/nack in, event with retry_count out; Create settings in', () => {
    const ps = es('persistent_pb.js');
    const read = method('persistent_subscriptions.PersistentSubscriptions', 'Read');
    const O = ps.ReadReq.Options;
    const options = new ps.ReadReq().setOptions(new O().setAll(new shared.Empty()).setGroupName('g').setBufferSize(10)
      .setUuidOption(new O.UUIDOption().setString(new shared.Empty())));
    expect(read.requestDeserialize(toBuffer(options))).toEqual({
      content: 'options',
      options: { stream_option: 'all', all: {}, group_name: 'g', buffer_size: 10, uuid_option: { content: 'string', string: {} } },
    });
    const nack = new ps.ReadReq().setNack(new ps.ReadReq.Nack().setIdsList([new shared.UUID().setString('i-1')])
      .setAction(ps.ReadReq.Nack.Action.RETRY).setReason('later'));
    expect(read.requestDeserialize(toBuffer(nack))).toEqual({
      content: 'nack', nack: { ids: [{ value: 'string', string: 'i-1' }], action: 'Retry', reason: 'later' },
    });

    const back = ps.ReadResp.deserializeBinary(read.responseSerialize({
      event: { event: { id: { string: 'e-1' }, stream_identifier: { stream_name: Buffer.from('s') }, stream_revision: '1' }, commit_position: '64', retry_count: 2 },
    }));
    expect(back.getEvent().getRetryCount()).toBe(2);
    expect(back.getEvent().getCountCase()).toBe(ps.ReadResp.ReadEvent.CountCase.RETRY_COUNT);
    expect(back.getEvent().getEvent().getStreamRevision()).toBe('1');

    const S = ps.CreateReq.Settings;
    const create = new ps.CreateReq().setOptions(new ps.CreateReq.Options().setStreamIdentifier(streamId('s')).setGroupName('g')
      .setSettings(new S().setRevision(MAX).setMessageTimeoutMs(30000).setCheckpointAfterMs(2000).setMaxRetryCount(10)
        .setNamedConsumerStrategy(ps.CreateReq.ConsumerStrategy.ROUNDROBIN).setConsumerStrategy('PinnedByCorrelation')));
    expect(method('persistent_subscriptions.PersistentSubscriptions', 'Create').requestDeserialize(toBuffer(create))).toEqual({
      options: {
        stream_identifier: { stream_name: Buffer.from('s') }, group_name: 'g',
        settings: {
          revision: MAX, message_timeout: 'message_timeout_ms', message_timeout_ms: 30000,
          checkpoint_after: 'checkpoint_after_ms', checkpoint_after_ms: 2000, max_retry_count: 10,
          named_consumer_strategy: 'RoundRobin', consumer_strategy: 'PinnedByCorrelation',
        },
      },
    });
  });

  it('Projections: Create in, Statistics and State (a google.protobuf.Value) out', () => {
    const pj = es('projections_pb.js');
    const create = new pj.CreateReq().setOptions(new pj.CreateReq.Options()
      .setContinuous(new pj.CreateReq.Options.Continuous().setName('p').setEmitEnabled(true).setTrackEmittedStreams(true)).setQuery('fromAll()'));
    expect(method('projections.Projections', 'Create').requestDeserialize(toBuffer(create))).toEqual({
      options: { mode: 'continuous', continuous: { name: 'p', emit_enabled: true, track_emitted_streams: true }, query: 'fromAll()' },
    });
    const stats = pj.StatisticsResp.deserializeBinary(method('projections.Projections', 'Statistics').responseSerialize({
      details: { name: 'p', status: 'Running', mode: 'Continuous', progress: 100, eventsProcessedAfterRestart: '12', bufferedEvents: '0' },
    })).getDetails();
    expect([stats.getName(), stats.getStatus(), stats.getMode(), stats.getProgress(), stats.getEventsprocessedafterrestart()])
      .toEqual(['p', 'Running', 'Continuous', 100, '12']);
    // protobufjs' bundled struct.proto names Value's fields in camelCase, keepCase or not.
    const state = pj.StateResp.deserializeBinary(method('projections.Projections', 'State').responseSerialize({
      state: { structValue: { fields: { count: { numberValue: 3 }, name: { stringValue: 'x' }, none: { nullValue: 'NULL_VALUE' } } } },
    }));
    expect(state.getState().toJavaScript()).toEqual({ count: 3, name: 'x', none: null });
  });

  it('Users: Create in, Details out', () => {
    const us = es('users_pb.js');
    const create = new us.CreateReq().setOptions(new us.CreateReq.Options().setLoginName('ouro').setPassword('pw').setFullName('O').setGroupsList(['$ops']));
    expect(method('users.Users', 'Create').requestDeserialize(toBuffer(create))).toEqual({
      options: { login_name: 'ouro', password: 'pw', full_name: 'O', groups: ['$ops'] },
    });
    const d = us.DetailsResp.deserializeBinary(method('users.Users', 'Details').responseSerialize({
      user_details: { login_name: 'admin', full_name: 'Admin', groups: ['$admins'], last_updated: { ticks_since_epoch: '17000000000000000' }, disabled: false },
    })).getUserDetails();
    expect([d.getLoginName(), d.getGroupsList(), d.getLastUpdated().getTicksSinceEpoch(), d.getDisabled()])
      .toEqual(['admin', ['$admins'], '17000000000000000', false]);
  });

  it('Operations: StartScavenge in, ScavengeResp out', () => {
    const op = es('operations_pb.js');
    const start = new op.StartScavengeReq().setOptions(new op.StartScavengeReq.Options().setThreadCount(2).setStartFromChunk(4));
    expect(method('operations.Operations', 'StartScavenge').requestDeserialize(toBuffer(start))).toEqual({ options: { thread_count: 2, start_from_chunk: 4 } });
    const resp = op.ScavengeResp.deserializeBinary(method('operations.Operations', 'StartScavenge').responseSerialize({ scavenge_id: 'sc-1', scavenge_result: 'InProgress' }));
    expect([resp.getScavengeId(), resp.getScavengeResult()]).toEqual(['sc-1', op.ScavengeResp.ScavengeResult.INPROGRESS]);
    expect(method('operations.Operations', 'SetNodePriority').requestDeserialize(toBuffer(new op.SetNodePriorityReq().setPriority(-3)))).toEqual({ priority: -3 });
  });

  it('Gossip: ClusterInfo out (structured UUID, enum state, endpoint)', () => {
    const gs = es('gossip_pb.js');
    const info = gs.ClusterInfo.deserializeBinary(method('gossip.Gossip', 'Read').responseSerialize({
      members: [{
        instance_id: { structured: { most_significant_bits: '-6124895493223874560', least_significant_bits: '1' } },
        time_stamp: '17000000000000000', state: 'Leader', is_alive: true, http_end_point: { address: '127.0.0.1', port: 2113 },
      }],
    }));
    const m = info.getMembersList()[0];
    expect(m.getInstanceId().getStructured().getMostSignificantBits()).toBe('-6124895493223874560');
    expect(m.getState()).toBe(gs.MemberInfo.VNodeState.LEADER);
    expect([m.getIsAlive(), m.getHttpEndPoint().getAddress(), m.getHttpEndPoint().getPort(), m.getTimeStamp()]).toEqual([true, '127.0.0.1', 2113, '17000000000000000']);
  });

  it('Monitoring: StatsReq in, StatsResp map out', () => {
    const mo = es('monitoring_pb.js');
    const req = new mo.StatsReq().setUseMetadata(true).setRefreshTimePeriodInMs('1000');
    expect(method('monitoring.Monitoring', 'Stats').requestDeserialize(toBuffer(req))).toEqual({ use_metadata: true, refresh_time_period_in_ms: '1000' });
    const resp = mo.StatsResp.deserializeBinary(method('monitoring.Monitoring', 'Stats').responseSerialize({ stats: { 'proc-id': '42', 'es-queue-x': '0' } }));
    expect(Object.fromEntries(resp.getStatsMap().entries())).toEqual({ 'proc-id': '42', 'es-queue-x': '0' });
  });
});

// ---------------------------------------------------------------------------------------------
// 3. The newer fields, with @kurrent/kurrentdb-client's classes (own process)
// ---------------------------------------------------------------------------------------------

describe('wire round trips with @kurrent/kurrentdb-client (child process)', () => {
  it('BatchAppend Duration deadline and ReadReq compatibility in; CaughtUp with its checkpoint out', () => {
    const read = method('streams.Streams', 'Read');
    const caughtUp: Buffer = read.responseSerialize({
      caught_up: { timestamp: { seconds: '1700000000', nanos: 7 }, stream_revision: '41', position: { commit_position: '99', prepare_position: '98' } },
    });
    const fellBehind: Buffer = read.responseSerialize({ fell_behind: { timestamp: { seconds: '1', nanos: 0 } } });
    const script = `
      const dir = process.argv[1];
      const streams = require(dir + '/streams_pb.js');
      const shared = require(dir + '/shared_pb.js');
      const { Duration } = require('google-protobuf/google/protobuf/duration_pb.js');
      const { Empty } = require('google-protobuf/google/protobuf/empty_pb.js');
      const b64 = (m) => Buffer.from(m.serializeBinary()).toString('base64');
      const batch = new streams.BatchAppendReq()
        .setCorrelationId(new shared.UUID().setString('c-1'))
        .setOptions(new streams.BatchAppendReq.Options()
          .setStreamIdentifier(new shared.StreamIdentifier().setStreamName(Buffer.from('s')))
          .setStreamPosition('4')
          .setDeadline(new Duration().setSeconds(10).setNanos(5)));
      const O = streams.ReadReq.Options;
      const readReq = new streams.ReadReq().setOptions(new O()
        .setStream(new O.StreamOptions().setStreamIdentifier(new shared.StreamIdentifier().setStreamName(Buffer.from('$$s'))).setEnd(new shared.Empty()))
        .setReadDirection(O.ReadDirection.BACKWARDS).setCount('1').setNoFilter(new shared.Empty())
        .setUuidOption(new O.UUIDOption().setString(new shared.Empty()))
        .setControlOption(new O.ControlOption().setCompatibility(1)));
      const cu = streams.ReadResp.deserializeBinary(Buffer.from(process.argv[2], 'base64'));
      const c = cu.getCaughtUp();
      const fb = streams.ReadResp.deserializeBinary(Buffer.from(process.argv[3], 'base64'));
      process.stdout.write(JSON.stringify({
        batch: b64(batch), readReq: b64(readReq),
        caughtUp: {
          case: cu.getContentCase(), seconds: c.getTimestamp().getSeconds(), nanos: c.getTimestamp().getNanos(),
          hasRevision: c.hasStreamRevision(), revision: c.getStreamRevision(),
          commit: c.getPosition().getCommitPosition(), prepare: c.getPosition().getPreparePosition(),
        },
        fellBehind: { case: fb.getContentCase(), hasRevision: fb.getFellBehind().hasStreamRevision(), hasPosition: fb.getFellBehind().hasPosition() },
        cases: { caughtUp: streams.ReadResp.ContentCase.CAUGHT_UP, fellBehind: streams.ReadResp.ContentCase.FELL_BEHIND },
      }));
    `;
    const out = JSON.parse(execFileSync(process.execPath, ['-e', script, KC_DIR, caughtUp.toString('base64'), fellBehind.toString('base64')], {
      cwd: dirname(dirname(dirname(dirname(protos.dir)))), encoding: 'utf8',
    }));

    expect(method('streams.Streams', 'BatchAppend').requestDeserialize(Buffer.from(out.batch, 'base64'))).toEqual({
      correlation_id: { value: 'string', string: 'c-1' },
      options: {
        stream_identifier: { stream_name: Buffer.from('s') },
        expected_stream_position: 'stream_position', stream_position: '4',
        deadline_option: 'deadline', deadline: { seconds: '10', nanos: 5 },
      },
    });
    expect(read.requestDeserialize(Buffer.from(out.readReq, 'base64')).options).toMatchObject({
      stream: { revision_option: 'end', end: {} }, read_direction: 'Backwards', count: '1', control_option: { compatibility: 1 },
    });
    expect(out.caughtUp).toEqual({ case: out.cases.caughtUp, seconds: 1700000000, nanos: 7, hasRevision: true, revision: '41', commit: '99', prepare: '98' });
    // proto3 `optional`: absent stays absent (a 0 revision would still be sent and seen).
    expect(out.fellBehind).toEqual({ case: out.cases.fellBehind, hasRevision: false, hasPosition: false });
  });
});
