import { MEDIA } from './media.js';
import { escapeStream } from './urls.js';

/** The description document of a stream (relative links to its feed and subscription groups). */
export function describeStream(streamId: string, mediaType: string, groups: readonly string[] = []): Record<string, unknown> {
  const href = `/streams/${escapeStream(streamId)}`;
  const subscriptions = groups.map((g) => ({
    href: `/subscriptions/${escapeStream(streamId)}/${encodeURIComponent(g)}`,
    supportedContentTypes: [MEDIA.competingXml, MEDIA.competingJsonK, MEDIA.competingJsonL],
  }));
  return {
    title: `Description document for '${streamId}'`,
    description: 'The description document will be presented when no accept header is present or it was requested',
    _links: {
      self: { href, supportedContentTypes: [mediaType] },
      stream: { href, supportedContentTypes: [MEDIA.atomXml, MEDIA.atomJsonK, MEDIA.atomJsonL] },
      ...(subscriptions.length > 0 ? { streamSubscription: subscriptions } : {}),
    },
  };
}
