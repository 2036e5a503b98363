import type { ViewProps } from '../../view';

// The users views: being built (issue 16).
export default function Users(_props: ViewProps) {
  return <section><h1>Users</h1></section>;
}
