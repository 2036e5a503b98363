import type { ViewProps } from '../../view';
import { CreateProjection } from './create';
import { DebugProjection } from './debugger';
import { ProjectionDetail } from './detail';
import { ProjectionList } from './list';
import './projections.css';

// The projections views: `#/projections` (the list), `#/projections/new` (the creation form),
// `#/projections/{name}` (one projection; `#/projections/{name}/details` works for any name,
// including one called `new`), `#/projections/{name}/debug` (the debugger over its query).
export default function Projections({ path, session }: ViewProps) {
  if (path.length === 0) return <ProjectionList session={session} />;
  if (path.length === 1 && path[0] === 'new') return <CreateProjection session={session} />;
  if (path.length === 2 && path[1] === 'debug') return <DebugProjection key={path[0]} name={path[0]} />;
  return <ProjectionDetail key={path[0]} name={path[0]} session={session} />;
}
