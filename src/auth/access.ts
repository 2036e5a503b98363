import type { Store } from '../store/index.js';
import {
  isMetastream, isSystemStream, originalStreamOf, parseAcl, type Acl, type AclOperation,
} from '../store/index.js';
import { ADMINS, EVERYONE, isAdmin, type Principal } from './principal.js';

// The one place that turns a principal and a stream into allow or deny. Per operation the
// roles come from the first of: the stream's $acl, the $settings default for user or system
// streams, the built-in default (user streams: everyone; system streams: $admins).

export const SETTINGS_STREAM = '$settings';
export const ALL_STREAM = '$all';

interface DefaultAcls { user?: Acl; system?: Acl }

export class AccessControl {
  private defaults: DefaultAcls | undefined;
  private readonly unsubscribe: () => void;

  constructor(private readonly store: Store, private readonly allowAnonymousStreamAccess: boolean) {
    this.unsubscribe = store.bus.subscribe((commit) => {
      if (commit.records.some((r) => r.streamId === SETTINGS_STREAM)) this.defaults = undefined;
    }, 'access control');
  }

  stop(): void {
    this.unsubscribe();
  }

  /** May `principal` perform `operation` on `streamId`? Metastream reads and writes use $mr and $mw. */
  canAccess(principal: Principal, operation: AclOperation, streamId: string): boolean {
    if (principal.system) return true;
    if (streamId === ALL_STREAM && (operation === 'w' || operation === 'd')) return false;
    if (isAdmin(principal)) return true;
    if (!principal.authenticated && !this.allowAnonymousStreamAccess) return false;
    let stream = streamId;
    let op = operation;
    if (isMetastream(streamId)) {
      stream = originalStreamOf(streamId);
      if (op === 'r') op = 'mr';
      else if (op === 'w') op = 'mw';
    }
    const roles = this.rolesFor(stream, op);
    return roles.some((role) => role === EVERYONE || principal.roles.includes(role));
  }

  private rolesFor(streamId: string, op: AclOperation): readonly string[] {
    const own = this.store.metadataOf(streamId).acl?.[op];
    if (own) return own;
    const system = isSystemStream(streamId);
    const defaults = this.loadDefaults();
    const configured = (system ? defaults.system : defaults.user)?.[op];
    if (configured) return configured;
    return system ? [ADMINS] : [EVERYONE];
  }

  private loadDefaults(): DefaultAcls {
    if (this.defaults) return this.defaults;
    const found = this.store.readEvent(SETTINGS_STREAM, -1);
    let defaults: DefaultAcls = {};
    if (found.status === 'ok' && found.event.event) {
      try {
        const doc = JSON.parse(found.event.event.data.toString('utf8')) as Record<string, unknown>;
        defaults = { user: parseAcl(doc.$userStreamAcl), system: parseAcl(doc.$systemStreamAcl) };
      } catch {
        defaults = {};
      }
    }
    this.defaults = defaults;
    return defaults;
  }
}
