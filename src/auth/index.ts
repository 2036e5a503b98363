// Auth, the folder's face: who a request runs as (principal.ts), the user accounts kept as events
// in the log (users.ts), and the one place that turns a principal and a stream's ACL into allow or
// deny (access.ts). Password hashing (password.ts) stays inside: only UserStore checks a password.
export { AccessControl, ALL_STREAM } from './access.js';
export { ANONYMOUS, SYSTEM, isAdmin, isOps, type Principal } from './principal.js';
export { UserStore, type UserAccount, type NewUser } from './users.js';
