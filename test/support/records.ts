import { decodeRecord, encodeRecord } from '../../src/store/record.js';
import { newUuid, type EventRecord } from '../../src/store/index.js';

/**
 * A stored record as the log holds it, at `position`, created at `created` (µs since the epoch);
 * `isJson` with text data is an event flagged JSON for its metadata (the write door checks JSON data).
 */
export function storedRecord(at: { position: number; created: number }, streamId: string, eventNumber: number, type: string, data: string,
  metadata = '', isJson = true): EventRecord {
  let dataIsJson = isJson;
  try {
    JSON.parse(data);
  } catch {
    dataIsJson = false;
  }
  const bytes = encodeRecord(streamId, eventNumber, {
    eventId: newUuid(), eventType: type, isJson, dataIsJson, data: Buffer.from(data), metadata: Buffer.from(metadata),
  }, at.created, false);
  return decodeRecord(at.position, bytes);
}
