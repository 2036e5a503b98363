import type { ViewProps } from '../../view';

// The projections views: being built (issue 16).
export default function Projections(_props: ViewProps) {
  return <section><h1>Projections</h1></section>;
}
