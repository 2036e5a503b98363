import { indentJson } from '../../src/api/json-indent';

// How the console shows the JSON the node sends (event data and metadata, stream metadata,
// projection state and result, parked messages): the text as it came, re-indented token by token
// by the node's own re-indenter, never parsed into numbers, so 9007199254740993 and a $tb of
// 9223372036854775807 keep every digit. Text that is not JSON is shown as it is.

export function prettyJson(text: string): string {
  return indentJson(text) ?? text;
}

