import type { Session } from './api';

/** What the shell gives each view: the route's segments after the view's own name, and the session. */
export interface ViewProps {
  path: string[];
  session: Session;
}
