// Streams and event types the store itself treats specially.

/** Scavenge points are written here (event numbers from 0), one `$scavengePoint` event each. */
export const SCAVENGE_POINTS_STREAM = '$scavengePoints';
export const SCAVENGE_POINT_EVENT_TYPE = '$scavengePoint';
