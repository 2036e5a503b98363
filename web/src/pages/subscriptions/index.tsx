import type { ViewProps } from '../../view';

// The subscriptions views: being built (issue 16).
export default function Subscriptions(_props: ViewProps) {
  return <section><h1>Subscriptions</h1></section>;
}
