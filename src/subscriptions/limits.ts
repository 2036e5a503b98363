// The memory bounds of the persistent subscriptions, in one place. What a client chooses (how
// many groups, how big their buffers, how many messages it holds without settling them) and what
// the data holds (how many messages are parked) must not grow the node's memory without a bound:
// each in-memory structure is capped here, and the log stays the source of truth for the rest
// (unread events stay in the stream, parked messages in the parked stream until replayed).
//
// Per group, at most 2 × bufferSize + MAX_LEASED_MESSAGES messages: the read-ahead buffer and the
// replayed parked messages read ahead are each at most bufferSize, and every retry was one of at
// most MAX_LEASED_MESSAGES leases (retries go out before new events are leased). An idle group at
// the defaults holds at most 500; one at the extremes 30,000 (about 30 MB with 1 KB events).

/**
 * Groups on one node; a create beyond it answers 400. Definitions already stored all load. (Their
 * document is rewritten on every change: ~400 KB at the bound with short names; one larger than
 * `maxAppendSize` is refused by the write door, 413.)
 */
export const MAX_GROUPS = 1_000;

/**
 * Largest `bufferSize` (the read-ahead buffer, and the replayed parked messages read ahead) a
 * group may be created or updated with; beyond it 400. A definition stored before keeps its own.
 * The established servers' default is 500; 10,000 is twenty times that and far above any page a
 * pull takes (100).
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
