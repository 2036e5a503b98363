// One member of a JSON object changed in the object's text, everything else kept as it was
// written: other members' numbers (a `$tb` of 9223372036854775807 does not fit a double),
// their order, spacing and escapes. The ACL form writes `$acl` this way instead of parsing the
// stream's metadata and serialising it again.

/** A stream's metadata as the stream view read it: its document and text, none written, or the read's failure. */
export type Metadata = { status: 'ok'; doc: any; text: string } | { status: 'none' } | { status: 'error'; error: unknown };

interface Member {
  key: string;
  /** Where the member's key starts. */
  start: number;
  valueStart: number;
  /** Just after the member's value. */
  end: number;
}

interface ObjectText {
  /** Index of the opening `{`. */
  open: number;
  members: Member[];
}

const WHITESPACE = /[ \t\n\r]/;

class NotAnObject extends Error {
  constructor(detail: string) {
    super(`The metadata is not a JSON object (${detail}).`);
  }
}

/** The top-level members of an object's text; throws NotAnObject for anything else. */
function membersOf(text: string): ObjectText {
  let i = 0;
  const space = () => { while (i < text.length && WHITESPACE.test(text[i])) i++; };
  const expect = (c: string) => {
    if (text[i] !== c) throw new NotAnObject(`expected “${c}” at character ${i + 1}`);
    i++;
  };
  const string = () => {
    const from = i;
    expect('"');
    while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    expect('"');
    return text.slice(from, i);
  };
  const value = () => {
    if (text[i] === '"') return void string();
    if (text[i] === '{' || text[i] === '[') {
      let depth = 0;
      do {
        if (text[i] === '"') { string(); continue; }
        if (text[i] === '{' || text[i] === '[') depth++;
        else if (text[i] === '}' || text[i] === ']') depth--;
        i++;
      } while (depth > 0 && i < text.length);
      if (depth !== 0) throw new NotAnObject('unbalanced brackets');
      return;
    }
    const from = i;
    while (i < text.length && !WHITESPACE.test(text[i]) && !',}]'.includes(text[i])) i++;
    if (i === from) throw new NotAnObject(`no value at character ${i + 1}`);
  };

  space();
  const open = i;
  expect('{');
  const members: Member[] = [];
  space();
  if (text[i] === '}') i++;
  else {
    for (;;) {
      space();
      const start = i;
      const key = JSON.parse(string()) as string;
      space();
      expect(':');
      space();
      const valueStart = i;
      value();
      members.push({ key, start, valueStart, end: i });
      space();
      if (text[i] === ',') { i++; continue; }
      expect('}');
      break;
    }
  }
  space();
  if (i !== text.length) throw new NotAnObject('text after the object');
  return { open, members };
}

/**
 * `text` (a JSON object) with member `key` set to `valueJson` (JSON text), or removed when
 * `valueJson` is undefined. A new member goes last, on its own line when the object has lines.
 */
export function withMember(text: string, key: string, valueJson: string | undefined): string {
  let { open, members } = membersOf(text);
  if (valueJson === undefined) {
    for (let at = members.findIndex((m) => m.key === key); at >= 0; at = members.findIndex((m) => m.key === key)) {
      const m = members[at];
      // Cut the member with the comma before it (or after it, when it is the first).
      const [from, to] = at > 0 ? [members[at - 1].end, m.end] : members.length > 1 ? [m.start, members[1].start] : [m.start, m.end];
      text = text.slice(0, from) + text.slice(to);
      ({ open, members } = membersOf(text));
    }
    return text;
  }
  const same = members.filter((m) => m.key === key);
  if (same.length > 0) {
    // Every occurrence (a reader takes the last one; none is left saying otherwise).
    for (const m of [...same].reverse()) text = text.slice(0, m.valueStart) + valueJson + text.slice(m.end);
    return text;
  }
  const member = `${JSON.stringify(key)}: ${valueJson}`;
  if (members.length === 0) return `${text.slice(0, open + 1)}${member}${text.slice(open + 1)}`;
  const first = members[0];
  const lead = text.slice(open + 1, first.start);
  const separator = lead.includes('\n') ? `,\n${lead.slice(lead.lastIndexOf('\n') + 1)}` : ', ';
  const last = members[members.length - 1];
  return text.slice(0, last.end) + separator + member + text.slice(last.end);
}
