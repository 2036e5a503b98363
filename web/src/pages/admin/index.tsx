import type { ViewProps } from '../../view';

// The admin views: being built (issue 16).
export default function Admin(_props: ViewProps) {
  return <section><h1>Admin</h1></section>;
}
