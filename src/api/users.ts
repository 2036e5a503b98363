import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import type { UserAccount } from '../auth/index.js';
import { demandSelf, USER_RULES, type UserChange, type ValueRule } from '../verbs/index.js';
import { ApiError, badRequest } from './errors.js';
import { lowerCaseMembers, parseJson } from './json-body.js';
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

const JSON_OBJECT = 'The body must be a JSON object.';
const XML_DOCUMENT = 'The body must be a well-formed XML document.';

/** preValidation hook: a JSON or XML body (any other type is 415) as a map of lower-cased member names. */
async function readUserBody(req: FastifyRequest): Promise<void> {
  const mediaType = requestMediaType(req);
  if (!mediaType || !(JSON_XML_TYPES as readonly string[]).includes(mediaType)) throw new ApiError('UNSUPPORTED_MEDIA_TYPE');
  const doc = mediaType === MEDIA.json ? parseJson(req.body, JSON_OBJECT) : parseXmlBody(req.body);
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw badRequest(mediaType === MEDIA.json ? JSON_OBJECT : XML_DOCUMENT);
  req.body = lowerCaseMembers(doc as Record<string, unknown>);
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

// The body schemas, over the lower-cased member names; null is the same as absent. Each rule is
// a step of `allOf`, so the first broken one (in the order listed) is the one answered.

const member = (name: string, schema: object) => ({ properties: { [name.toLowerCase()]: schema } });

function optionalString(name: string) {
  return member(name, { type: ['string', 'null'], errorMessage: `${name} must be a string.` });
}

function requiredString(name: string) {
  const required = USER_RULES.required(name);
  return {
    allOf: [
      optionalString(name),
      { required: [name.toLowerCase()], ...member(name, { type: 'string', minLength: 1, errorMessage: required }), errorMessage: required },
    ],
  };
}

const ruled = (name: string, rule: ValueRule) => member(name, { type: 'string', pattern: rule.pattern, errorMessage: rule.message });
const GROUPS = member('Groups', {
  type: ['array', 'null'],
  items: { type: 'string', pattern: USER_RULES.group.pattern, errorMessage: USER_RULES.group.message },
  errorMessage: USER_RULES.group.message,
});
const LOGIN = ruled('LoginName', USER_RULES.loginName);
const newPassword = (name: string) => ruled(name, USER_RULES.password(name));

const userBody = (...rules: object[]) => ({ type: 'object', allOf: rules });
const BODIES = {
  create: userBody(requiredString('LoginName'), LOGIN, requiredString('Password'), newPassword('Password'), optionalString('FullName'), GROUPS),
  update: userBody(optionalString('FullName'), GROUPS),
  resetPassword: userBody(requiredString('NewPassword'), newPassword('NewPassword')),
  changePassword: userBody(requiredString('CurrentPassword'), requiredString('NewPassword'), newPassword('NewPassword')),
};

/** Route hook: the account's own user only (before the body is read; the verb asks the same). */
async function requireSelf(req: FastifyRequest): Promise<void> {
  demandSelf(principalOf(req), loginParam(req), 'users');
}

type UserBody = Record<string, string | string[] | null | undefined>;

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
  const users = ctx.verbs.users;
  const admin = { onRequest: requireAdmin };
  const withBody = (body: object) => ({ schema: { body }, preValidation: readUserBody });
  const changed = (req: FastifyRequest, reply: FastifyReply, login: string, change: UserChange) =>
    result(req, reply, login, change === 'done' ? 'Success' : 'NotFound');

  const list = async (req: FastifyRequest, reply: FastifyReply) => {
    const base = baseUrl(req);
    const data = users.list(principalOf(req)).map((a) => userData(base, a, true));
    return answer(req, reply, 200, { success: true, error: 'Success', data });
  };
  app.get('/users', admin, list);
  app.get('/users/', admin, list);

  const create = async (req: FastifyRequest, reply: FastifyReply) => {
    const body = req.body as UserBody;
    const loginName = body.loginname as string;
    const outcome = await users.create(principalOf(req), {
      loginName, password: body.password as string, fullName: (body.fullname as string | null) ?? '', groups: (body.groups as string[] | null) ?? [],
    });
    if (outcome === 'conflict') return result(req, reply, loginName, 'Conflict');
    reply.header('Location', `${baseUrl(req)}/users/${encodeURIComponent(loginName)}`);
    return answer(req, reply, 201, { loginName, success: true, error: 'Success' });
  };
  app.post('/users', { ...admin, ...withBody(BODIES.create) }, create);
  app.post('/users/', { ...admin, ...withBody(BODIES.create) }, create);

  app.get('/users/:login', { onRequest: requireAuthenticated }, async (req, reply) => {
    const principal = principalOf(req);
    const login = loginParam(req);
    const current = login === '$current';
    const account = users.details(principal, current ? principal.name : login);
    if (!account) return answer(req, reply, 404, { success: false, error: 'NotFound', data: null });
    return answer(req, reply, 200, { success: true, error: 'Success', data: userData(baseUrl(req), account, !current) });
  });

  app.put('/users/:login', { ...admin, ...withBody(BODIES.update) }, async (req, reply) => {
    const login = loginParam(req);
    const body = req.body as UserBody;
    const changes = { fullName: body.fullname ?? undefined, groups: body.groups ?? undefined };
    const defined = Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== undefined));
    return changed(req, reply, login, await users.update(principalOf(req), login, defined));
  });

  app.delete('/users/:login', admin, async (req, reply) => {
    const login = loginParam(req);
    if ((await users.delete(principalOf(req), login)) === 'notFound') return result(req, reply, login, 'NotFound');
    return reply.code(204).send();
  });

  for (const [command, disabled] of [['enable', false], ['disable', true]] as const) {
    app.route({
      method: ['PUT', 'POST'], url: `/users/:login/command/${command}`, ...admin,
      handler: async (req, reply) => {
        const login = loginParam(req);
        return changed(req, reply, login, await users.setDisabled(principalOf(req), login, disabled));
      },
    });
  }

  app.post('/users/:login/command/reset-password', { ...admin, ...withBody(BODIES.resetPassword) }, async (req, reply) => {
    const login = loginParam(req);
    const { newpassword } = req.body as UserBody;
    return changed(req, reply, login, await users.resetPassword(principalOf(req), login, newpassword as string));
  });

  app.post('/users/:login/command/change-password', { onRequest: [requireAuthenticated, requireSelf], ...withBody(BODIES.changePassword) },
    async (req, reply) => {
      const login = loginParam(req);
      const { currentpassword, newpassword } = req.body as UserBody;
      const outcome = await users.changePassword(principalOf(req), login, currentpassword as string, newpassword as string);
      return outcome === 'wrongPassword' ? result(req, reply, login, 'Unauthorized') : changed(req, reply, login, outcome);
    });
}
