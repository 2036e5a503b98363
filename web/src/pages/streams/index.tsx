import type { ViewProps } from '../../view';
import { ALL } from './client';
import { AllView } from './all';
import { EventView } from './event';
import { StreamList } from './list';
import { StreamView } from './stream';
import './streams.css';

// The stream browser's routes (after #/streams):
//   (none)                       recent streams and open-by-name
//   /{stream}                    the stream's newest events, append, metadata, delete
//   /{stream}/{from}/{dir}/{n}   a page of the stream (the feed's own paging links)
//   /{stream}/{number}           one event
//   /$all[/{pos}/{dir}/{n}]      $all (admins)
export default function Streams({ path, session }: ViewProps) {
  const [stream, ...rest] = path;
  if (stream === undefined) return <StreamList session={session} />;
  if (stream === ALL) return <AllView page={rest.length === 3 ? rest : []} session={session} />;
  if (rest.length === 1 && /^\d+$/.test(rest[0])) return <EventView key={`${stream}/${rest[0]}`} stream={stream} number={Number(rest[0])} />;
  return <StreamView key={stream} stream={stream} page={rest.length === 3 ? rest : []} />;
}
