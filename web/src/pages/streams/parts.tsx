import { href } from '../../router';
import { linkPage, type Feed } from './client';

// Pieces the stream and $all views share: the pager (the events table is rows.tsx).

/** The feed's own links as pages: newest, newer, older, oldest (routes under `base`). */
export function Pager({ feed, base, atHead }: { feed: Feed; base: string[]; atHead: boolean }) {
  const page = (relation: string) => linkPage(feed, relation);
  const item = (label: string, target: string[] | undefined) => (
    target ? <a href={href(...base, ...target)}>{label}</a> : <span class="muted" aria-disabled="true">{label}</span>
  );
  return (
    <nav class="pager row" aria-label="Pages">
      {item('Newest', page('first'))}
      {/* At the head the feed's "previous" link is where new events will appear: nothing to page to yet. */}
      {item('Newer', feed.headOfStream || atHead ? undefined : page('previous'))}
      {item('Older', page('next'))}
      {item('Oldest', page('last'))}
    </nav>
  );
}
