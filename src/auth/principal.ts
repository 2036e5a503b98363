/** Who a request runs as. Roles are the user's login name and groups. */
export interface Principal {
  readonly name: string;
  readonly roles: readonly string[];
  readonly authenticated: boolean;
  /** The node itself (system writes); passes every check. */
  readonly system?: boolean;
}

export const ADMINS = '$admins';
export const OPS = '$ops';
/** The ACL role that grants everyone. */
export const EVERYONE = '$all';

export const ANONYMOUS: Principal = Object.freeze({ name: '$anonymous', roles: [], authenticated: false });
export const SYSTEM: Principal = Object.freeze({ name: '$system', roles: [ADMINS], authenticated: true, system: true });

export function userPrincipal(login: string, groups: readonly string[]): Principal {
  return Object.freeze({ name: login, roles: [login, ...groups], authenticated: true });
}

export function isAdmin(p: Principal): boolean {
  return p.system === true || p.roles.includes(ADMINS) || (p.authenticated && p.name === 'admin');
}

export function isOps(p: Principal): boolean {
  return isAdmin(p) || p.roles.includes(OPS) || (p.authenticated && p.name === 'ops');
}
