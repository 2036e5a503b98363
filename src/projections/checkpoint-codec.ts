// The one codec of what a projection stores about its progress: the body of a checkpoint (a
// partition's state and result) and the checkpoint tag (which projection, epoch and version
// wrote an event, at what log position). Every writer encodes through here and every reader
// decodes through here, so a state and result read back are the ones written.
//
// Body (the data of `$ProjectionCheckpoint` and of each partition's `$Checkpoint`, §14):
//   []                nothing stored (a root no event reached)
//   [state]           the result is the state (half the bytes against the event size limit)
//   [state,result]    any other result; `null` when there is none (filterBy, a null transform)
// The state itself may be `null` (a handler returned null). The established server writes
// `[state]` for "no result" and `[state,result]` whenever there is one; this house has always
// written `[state]` for "result = state" in partitions, and reads data it wrote before: so
// `[state]` keeps that meaning and "no result" is spelled `[state,null]`. (Before this codec the
// root and a completed query wrote `[state]` for a null or transformed result too; such a body
// still reads as result = state, the only reading it allows, until the next checkpoint.)
//
// Tag (the metadata of every event a projection writes): `$v` = "id:epoch:version:4", `$c`/`$p`
// the log position; `$cp` true on the last checkpoint of a completed query. Extra keys (an
// emitted event's own metadata, `partition` on a query's Result) may sit beside them.

/** A partition's state and result as JSON texts (null: none). */
export interface PartitionValue { readonly state: string | null; readonly result: string | null }

export interface CheckpointTag {
  readonly projectionId: number;
  readonly epoch: number;
  readonly version: number;
  /** Log position of the checkpoint ($c): the next record to read. 0 when the tag has none. */
  readonly position: number;
  /** A query's last checkpoint: it completed ($cp). */
  readonly completed: boolean;
}

/** The `$v` of a projection's tag (4: the projection subsystem version of the established servers). */
export function tagVersion(projectionId: number, epoch: number, version: number): string {
  return `${projectionId}:${epoch}:${version}:4`;
}

/** The metadata that marks what a projection writes at `position`. */
export function tagMetadata(version: string, position: number): Record<string, unknown> {
  return { $v: version, $c: position, $p: position };
}

/** The tag in an event's metadata; undefined when it has none (not written by a projection). */
export function readTag(metadata: Buffer): CheckpointTag | undefined {
  if (metadata.length === 0) return undefined;
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(metadata.toString('utf8')) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (m === null || typeof m !== 'object' || typeof m.$v !== 'string') return undefined;
  const [projectionId, epoch, version] = m.$v.split(':').map(Number);
  return { projectionId, epoch, version, position: Number(m.$c) || 0, completed: m.$cp === true };
}

/** Whether a tag was written by this projection in this epoch (older epochs are what a reset left behind). */
export function isOfEpoch(tag: CheckpointTag | undefined, projectionId: number, epoch: number): boolean {
  return tag !== undefined && tag.projectionId === projectionId && tag.epoch === epoch;
}

/** The body of a checkpoint holding `value` (undefined: nothing stored). */
export function encodeCheckpointBody(value: PartitionValue | undefined): string {
  if (value === undefined) return '[]';
  const state = value.state ?? 'null';
  return value.result === value.state ? `[${state}]` : `[${state},${value.result ?? 'null'}]`;
}

/** The value a checkpoint body holds; undefined for `[]`. Throws on a body that is not a JSON array. */
export function decodeCheckpointBody(data: Buffer | string): PartitionValue | undefined {
  const body = JSON.parse(typeof data === 'string' ? data : data.toString('utf8')) as unknown;
  if (!Array.isArray(body)) throw new Error(`A checkpoint body is a JSON array, not ${JSON.stringify(body)}`);
  if (body.length === 0) return undefined;
  const state = json(body[0]);
  return { state, result: body.length < 2 ? state : json(body[1]) };
}

function json(value: unknown): string | null {
  return value === null || value === undefined ? null : JSON.stringify(value);
}
