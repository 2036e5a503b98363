import { useEffect, useState } from 'preact/hooks';

// Hash routes (`#/streams/orders-1`): the node serves one page at /web/, so a reload or a link
// to any view works without server-side routing.

export function currentPath(): string {
  const hash = location.hash.replace(/^#/, '');
  return hash.startsWith('/') ? hash : '/';
}

/** The current route's path segments, decoded: `#/streams/a%2Fb` → ['streams', 'a/b']. */
export function useRoute(): string[] {
  const [path, setPath] = useState(currentPath());
  useEffect(() => {
    const update = () => setPath(currentPath());
    addEventListener('hashchange', update);
    return () => removeEventListener('hashchange', update);
  }, []);
  return path.split('/').filter(Boolean).map((s) => { try { return decodeURIComponent(s); } catch { return s; } });
}

/** A href for a route from its segments (each encoded). */
export function href(...segments: Array<string | number>): string {
  return '#/' + segments.map((s) => encodeURIComponent(String(s))).join('/');
}

export function navigate(...segments: Array<string | number>): void {
  location.hash = href(...segments).slice(1);
}
