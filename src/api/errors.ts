// Every error the HTTP API answers with, declared once: a stable code, the status, the HTTP
// reason phrase (existing clients read it), and a default message sent as the text body.

export const API_ERRORS = {
  BAD_REQUEST: { status: 400, reason: 'Bad Request', message: 'Bad request.' },
  WRONG_EXPECTED_VERSION: { status: 400, reason: 'Wrong expected EventNumber', message: '' },
  UNAUTHORIZED: { status: 401, reason: 'Unauthorized', message: '' },
  GOSSIP_REFUSED: { status: 403, reason: 'Forbidden', message: 'This node runs alone (cluster size 1): it takes gossip from no node.' },
  NOT_FOUND: { status: 404, reason: 'Not Found', message: '' },
  METHOD_NOT_ALLOWED: { status: 405, reason: 'Method Not Allowed', message: '' },
  NOT_ACCEPTABLE: { status: 406, reason: 'Requested URI is not available in requested format', message: '' },
  STREAM_DELETED: { status: 410, reason: 'Stream deleted', message: '' },
  PAYLOAD_TOO_LARGE: { status: 413, reason: 'Payload Too Large', message: 'Too large events received.' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, reason: 'Invalid or missing Content-Type', message: '' },
  READ_TOO_BIG: { status: 400, reason: 'Bad Request', message: 'Read size too big, should be less than 4096 items' },
  INTERNAL: { status: 500, reason: 'Internal Server Error', message: 'Internal error.' },
  SHUTTING_DOWN: { status: 503, reason: 'Server Is Not Ready', message: 'The server is shutting down.' },
} as const;

export type ApiErrorCode = keyof typeof API_ERRORS;

export class ApiError extends Error {
  readonly status: number;
  readonly reason: string;

  constructor(readonly code: ApiErrorCode, message?: string, readonly headers: Record<string, string> = {},
    reason?: string) {
    super(message ?? API_ERRORS[code].message);
    this.status = API_ERRORS[code].status;
    this.reason = reason ?? API_ERRORS[code].reason;
  }
}

export function badRequest(message: string): ApiError {
  return new ApiError('BAD_REQUEST', message);
}
