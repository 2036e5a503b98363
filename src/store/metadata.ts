// Stream metadata: the latest event of the metastream `$$<stream>`. The reserved keys drive what
// a stream read shows ($maxAge, $maxCount, $tb), caching ($cacheControl) and access ($acl).

/** `$tb` written by a soft delete (Int64.MaxValue); anything ≥ 2^53 reads as "deleted". */
export const SOFT_DELETED_TB_TEXT = '9223372036854775807';
export const SOFT_DELETED_TB = 2 ** 53;

export type AclOperation = 'r' | 'w' | 'd' | 'mr' | 'mw';
export type Acl = Partial<Record<AclOperation, readonly string[]>>;

export interface StreamMetadata {
  maxAge?: number;        // seconds
  maxCount?: number;
  truncateBefore?: number;
  cacheControl?: number;  // seconds
  acl?: Acl;
  raw: Record<string, unknown>;
}

/** The type of a metadata stream's events (`$$<stream>`: the latest one is the stream's metadata). */
export const METADATA_EVENT_TYPE = '$metadata';

export const EMPTY_METADATA: StreamMetadata = Object.freeze({ raw: {} });

export function isMetastream(streamId: string): boolean {
  return streamId.startsWith('$$');
}

export function metastreamOf(streamId: string): string {
  return `$$${streamId}`;
}

export function originalStreamOf(metastreamId: string): string {
  return metastreamId.slice(2);
}

export function isSystemStream(streamId: string): boolean {
  return streamId.startsWith('$');
}

export function isSoftDeleted(metadata: Pick<StreamMetadata, 'truncateBefore'>): boolean {
  return metadata.truncateBefore !== undefined && metadata.truncateBefore >= SOFT_DELETED_TB;
}

const ACL_KEYS: Record<string, AclOperation> = { $r: 'r', $w: 'w', $d: 'd', $mr: 'mr', $mw: 'mw' };

/** Why a metadata document is unacceptable, or undefined when it is fine. */
export function metadataProblem(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'Stream metadata must be a JSON object.';
  const doc = value as Record<string, unknown>;
  for (const key of ['$maxAge', '$maxCount', '$tb', '$cacheControl']) {
    if (key in doc && doc[key] !== null && !(typeof doc[key] === 'number' && Number.isInteger(doc[key]))) {
      return `Stream metadata ${key} must be an integer.`;
    }
  }
  if ('$tmp' in doc && doc.$tmp !== null && typeof doc.$tmp !== 'boolean') return 'Stream metadata $tmp must be a boolean.';
  if ('$acl' in doc && doc.$acl !== null) return aclProblem(doc.$acl, 'Stream metadata $acl');
  return undefined;
}

export function aclProblem(acl: unknown, what: string): string | undefined {
  if (typeof acl !== 'object' || acl === null || Array.isArray(acl)) return `${what} must be an object.`;
  for (const [key, roles] of Object.entries(acl as Record<string, unknown>)) {
    if (!(key in ACL_KEYS)) continue;
    const ok = roles === null || typeof roles === 'string'
      || (Array.isArray(roles) && roles.every((r) => typeof r === 'string'));
    if (!ok) return `${what} ${key} must be a role name or an array of role names.`;
  }
  return undefined;
}

function positive(v: unknown): number | undefined {
  return typeof v === 'number' && v > 0 ? v : undefined;
}

export function parseAcl(value: unknown): Acl | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const acl: Record<string, readonly string[]> = {};
  for (const [key, roles] of Object.entries(value as Record<string, unknown>)) {
    const op = ACL_KEYS[key];
    if (!op) continue;
    if (typeof roles === 'string') acl[op] = [roles];
    else if (Array.isArray(roles)) acl[op] = roles.filter((r): r is string => typeof r === 'string');
  }
  return acl as Acl;
}

/** Parses stored metadata bytes; a document that is not a JSON object has no effect. */
export function parseMetadata(bytes: Buffer): StreamMetadata {
  let doc: unknown;
  try {
    doc = JSON.parse(bytes.toString('utf8'));
  } catch {
    return EMPTY_METADATA;
  }
  if (metadataProblem(doc)) return { raw: typeof doc === 'object' && doc !== null ? doc as Record<string, unknown> : {} };
  const raw = doc as Record<string, unknown>;
  const tb = typeof raw.$tb === 'number' && raw.$tb >= 0 ? raw.$tb : undefined;
  return {
    maxAge: positive(raw.$maxAge),
    maxCount: positive(raw.$maxCount),
    truncateBefore: tb,
    cacheControl: positive(raw.$cacheControl),
    acl: parseAcl(raw.$acl),
    raw,
  };
}
