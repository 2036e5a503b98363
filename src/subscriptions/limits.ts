// The memory bounds of the persistent subscriptions, in one place. What a client chooses (how
// many groups, how big their buffers, how many messages it holds without settling them) and what
// the data holds (how many messages are parked) must not grow the node's memory without a bound:
// each in-memory structure is capped here, and the log stays the source of truth for the rest
// (unread events stay in the stream, parked messages in the parked stream until replayed).
//
// Per group, at most MAX_BUFFER_SIZE read-ahead messages, as many retried or replayed ones
// waiting, and MAX_LEASED_MESSAGES handed out: with 1 KB events about 30 MB at the extreme and
// ~1 MB at the defaults (bufferSize 500), times at most MAX_GROUPS groups.

/** Groups on one node. A create beyond it answers 400; the definitions document stays well under an event's size. */
export const MAX_GROUPS = 1_000;

/**
 * Largest `bufferSize` (read buffer, and the retried/replayed messages waiting, each) a group may be
 * created or updated with; beyond it 400. The established servers' default is 500; 10,000 is
 * twenty times that and far above any page a pull takes (100).
 */
export const MAX_BUFFER_SIZE = 10_000;

/**
 * Messages of one group handed out and not yet settled (acked, nacked or timed out). HTTP pulls
 * bypass consumer capacity, so without a cap a client pulling and never acking would hold every
 * event of the stream in memory until the timeouts. At the cap a pull answers fewer messages
 * (an empty feed when none fit) until some are settled or time out. The bench's 8 pullers × 50
 * hold 400.
 */
export const MAX_LEASED_MESSAGES = 10_000;
