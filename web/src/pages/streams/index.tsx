import type { ViewProps } from '../../view';

// The streams views: being built (issue 16).
export default function Streams(_props: ViewProps) {
  return <section><h1>Streams</h1></section>;
}
