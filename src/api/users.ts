import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { isAdmin } from '../auth/principal.js';
import type { UserAccount } from '../auth/users.js';
import { ApiError } from './errors.js';
import { parseJson } from './json-body.js';
import { JSON_XML_TYPES, MEDIA, negotiate, requestMediaType } from './media.js';
import { simpleXml } from './atom.js';
import { baseUrl } from './urls.js';
import { principalOf, type ApiContext } from './context.js';
import { requireAdmin, requireAuthenticated } from './guards.js';
import { sendJson } from './reply.js';

// The users API: accounts as the established servers expose them, with the typed answers
// `{success, error, data}` their clients read.

type ErrorName = 'Success' | 'NotFound' | 'Conflict' | 'Error' | 'Unauthorized';
const STATUS: Record<ErrorName, number> = { Success: 200, NotFound: 404, Conflict: 409, Error: 400, Unauthorized: 401 };

const xmlParser = new XMLParser({
  ignoreAttributes: true, ignoreDeclaration: true, ignorePiTags: true, parseTagValue: false,
  isArray: (name) => name.toLowerCase() === 'groups',
});

function answer(req: FastifyRequest, reply: FastifyReply, status: number, body: Record<string, unknown>): FastifyReply {
  const mediaType = negotiate(req, JSON_XML_TYPES);
  if (mediaType === MEDIA.json) return sendJson(reply, status, body);
  return reply.code(status).type(`${mediaType}; charset=utf-8`).send(simpleXml('result', body));
}

function result(req: FastifyRequest, reply: FastifyReply, loginName: string, error: ErrorName, message?: string): FastifyReply {
  return answer(req, reply, STATUS[error], { loginName, success: error === 'Success', error, ...(message ? { message } : {}) });
}

/** Reads a JSON or XML body into a map of lower-cased member names. */
function readBody(req: FastifyRequest): Record<string, unknown> {
  const mediaType = requestMediaType(req);
  if (!mediaType || !(JSON_XML_TYPES as readonly string[]).includes(mediaType)) throw new ApiError('UNSUPPORTED_MEDIA_TYPE');
  const doc = mediaType === MEDIA.json ? parseJson(req.body, 'The body must be a JSON object.') : parseXmlBody(req.body);
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    throw invalid(mediaType === MEDIA.json ? 'The body must be a JSON object.' : 'The body must be a well-formed XML document.');
  }
  return Object.fromEntries(Object.entries(doc).map(([k, v]) => [k.toLowerCase(), v]));
}

/** The document element's content, or undefined when the body is not well-formed XML (or too deep for the parser). */
function parseXmlBody(body: unknown): unknown {
  const text = Buffer.isBuffer(body) ? body.toString('utf8') : '';
  try {
    return XMLValidator.validate(text) === true ? Object.values(xmlParser.parse(text) as object)[0] : undefined;
  } catch {
    return undefined;
  }
}

function invalid(message: string): ApiError {
  return new ApiError('BAD_REQUEST', message);
}

function optionalString(body: Record<string, unknown>, name: string): string | undefined {
  const v = body[name.toLowerCase()];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw invalid(`${name} must be a string.`);
  return v;
}

function requiredString(body: Record<string, unknown>, name: string): string {
  const v = optionalString(body, name);
  if (!v) throw invalid(`${name} is required.`);
  return v;
}

const GROUP = /^[^\s,:]+$/;

function groupsOf(body: Record<string, unknown>): string[] | undefined {
  const v = body.groups;
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || !v.every((g) => typeof g === 'string' && GROUP.test(g))) {
    throw invalid('Groups must be an array of group names without spaces, commas or colons.');
  }
  return v as string[];
}

const LOGIN = /^[^\s/:]+$/;

function userData(base: string, a: UserAccount, withLinks: boolean): Record<string, unknown> {
  const url = `${base}/users/${encodeURIComponent(a.loginName)}`;
  const data: Record<string, unknown> = {
    loginName: a.loginName, fullName: a.fullName, groups: a.groups, dateLastUpdated: a.dateLastUpdated, disabled: a.disabled,
  };
  if (withLinks) {
    data.links = [
      { href: `${url}/command/reset-password`, rel: 'reset-password' },
      { href: `${url}/command/change-password`, rel: 'change-password' },
      { href: url, rel: 'edit' },
      { href: url, rel: 'delete' },
      a.disabled ? { href: `${url}/command/enable`, rel: 'enable' } : { href: `${url}/command/disable`, rel: 'disable' },
    ];
  }
  return data;
}

function loginParam(req: FastifyRequest): string {
  return (req.params as { login: string }).login;
}

export function registerUsers(app: FastifyInstance, ctx: ApiContext): void {
  const { users } = ctx;

  const list = async (req: FastifyRequest, reply: FastifyReply) => {
    await requireAdmin(req);
    const base = baseUrl(req);
    const data = users.list().sort((a, b) => a.loginName.localeCompare(b.loginName)).map((a) => userData(base, a, true));
    return answer(req, reply, 200, { success: true, error: 'Success', data });
  };
  app.get('/users', list);
  app.get('/users/', list);

  const create = async (req: FastifyRequest, reply: FastifyReply) => {
    await requireAdmin(req);
    const body = readBody(req);
    const loginName = requiredString(body, 'LoginName');
    if (!LOGIN.test(loginName)) throw invalid('LoginName must not contain spaces, slashes or colons.');
    const password = requiredString(body, 'Password');
    const outcome = await users.create({
      loginName, password, fullName: optionalString(body, 'FullName') ?? '', groups: groupsOf(body) ?? [],
    });
    if (outcome === 'conflict') return result(req, reply, loginName, 'Conflict');
    reply.header('Location', `${baseUrl(req)}/users/${encodeURIComponent(loginName)}`);
    return answer(req, reply, 201, { loginName, success: true, error: 'Success' });
  };
  app.post('/users', create);
  app.post('/users/', create);

  app.get('/users/:login', async (req, reply) => {
    await requireAuthenticated(req);
    const principal = principalOf(req);
    const login = loginParam(req);
    const current = login === '$current';
    const name = current ? principal.name : login;
    if (!current && !isAdmin(principal) && principal.name !== login) throw new ApiError('UNAUTHORIZED');
    const account = users.get(name);
    if (!account) return answer(req, reply, 404, { success: false, error: 'NotFound', data: null });
    return answer(req, reply, 200, { success: true, error: 'Success', data: userData(baseUrl(req), account, !current) });
  });

  app.put('/users/:login', async (req, reply) => {
    await requireAdmin(req);
    const login = loginParam(req);
    const body = readBody(req);
    const changes = { fullName: optionalString(body, 'FullName'), groups: groupsOf(body) };
    const defined = Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== undefined));
    return result(req, reply, login, (await users.update(login, defined)) ? 'Success' : 'NotFound');
  });

  app.delete('/users/:login', async (req, reply) => {
    await requireAdmin(req);
    const login = loginParam(req);
    if (!(await users.delete(login))) return result(req, reply, login, 'NotFound');
    return reply.code(204).send();
  });

  for (const [command, disabled] of [['enable', false], ['disable', true]] as const) {
    app.route({
      method: ['PUT', 'POST'], url: `/users/:login/command/${command}`,
      handler: async (req, reply) => {
        await requireAdmin(req);
        const login = loginParam(req);
        return result(req, reply, login, (await users.setDisabled(login, disabled)) ? 'Success' : 'NotFound');
      },
    });
  }

  app.post('/users/:login/command/reset-password', async (req, reply) => {
    await requireAdmin(req);
    const login = loginParam(req);
    const newPassword = requiredString(readBody(req), 'NewPassword');
    return result(req, reply, login, (await users.resetPassword(login, newPassword)) ? 'Success' : 'NotFound');
  });

  app.post('/users/:login/command/change-password', async (req, reply) => {
    await requireAuthenticated(req);
    const login = loginParam(req);
    if (principalOf(req).name !== login) throw new ApiError('UNAUTHORIZED');
    const body = readBody(req);
    const currentPassword = requiredString(body, 'CurrentPassword');
    const newPassword = requiredString(body, 'NewPassword');
    const outcome = await users.changePassword(login, currentPassword, newPassword);
    return result(req, reply, login, outcome === 'changed' ? 'Success' : outcome === 'denied' ? 'Unauthorized' : 'NotFound');
  });
}
