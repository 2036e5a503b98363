// gRPC status codes, the status a failed call ends with (code, message, and the string trailers
// the established server adds: `exception` and its keys), and the percent-encoding of
// `grpc-message` (gRPC over HTTP/2: printable ASCII except '%' travels as is).

export const GrpcStatus = {
  OK: 0, CANCELLED: 1, UNKNOWN: 2, INVALID_ARGUMENT: 3, DEADLINE_EXCEEDED: 4, NOT_FOUND: 5, ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7, RESOURCE_EXHAUSTED: 8, FAILED_PRECONDITION: 9, ABORTED: 10, OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12, INTERNAL: 13, UNAVAILABLE: 14, DATA_LOSS: 15, UNAUTHENTICATED: 16,
} as const;

export type GrpcStatusCode = (typeof GrpcStatus)[keyof typeof GrpcStatus];

export interface Status {
  readonly code: GrpcStatusCode;
  readonly message: string;
  readonly trailers?: Readonly<Record<string, string>>;
}

/** Thrown by a handler (or the server) to end its call with this status. */
export class StatusError extends Error {
  constructor(readonly status: Status) {
    super(status.message);
  }
}

export function encodeGrpcMessage(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}
