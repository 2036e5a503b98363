import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { SyntaxPlace } from './model';

// The query editor: a plain textarea (so every browser feature — undo, find, screen readers —
// works) beside a gutter of line numbers. A syntax error the node reported marks its line in the
// gutter and with a band across the text, names the line and column next to the editor, and moves
// the caret there.

const LINE_PX = 20;

export function QueryEditor({ id, label, value, onInput, error, rows = 14 }: {
  id: string;
  label: string;
  value: string;
  onInput: (text: string) => void;
  /** The node's syntax error for this text, if any. */
  error?: SyntaxPlace;
  rows?: number;
}) {
  const area = useRef<HTMLTextAreaElement>(null);
  const gutter = useRef<HTMLDivElement>(null);
  const [scroll, setScroll] = useState(0);
  const lines = Math.max(1, value.split('\n').length);

  const syncScroll = () => {
    const top = area.current?.scrollTop ?? 0;
    if (gutter.current) gutter.current.scrollTop = top;
    setScroll(top);
  };

  // A new error: put the caret at its place and scroll its line into the middle of the view.
  useEffect(() => {
    const ta = area.current;
    if (!error || !ta) return;
    const starts = [0];
    for (let i = 0; i < value.length; i++) if (value[i] === '\n') starts.push(i + 1);
    const lineStart = starts[Math.min(error.line, starts.length) - 1] ?? 0;
    const lineEnd = error.line < starts.length ? starts[error.line] - 1 : value.length;
    const offset = Math.min(lineStart + Math.max(0, error.column - 1), lineEnd);
    ta.focus();
    ta.setSelectionRange(offset, offset);
    ta.scrollTop = Math.max(0, (error.line - 1) * LINE_PX - ta.clientHeight / 2 + LINE_PX);
    syncScroll();
  }, [error]);

  useLayoutEffect(syncScroll, [value]);

  const errorId = `${id}-error`;
  return (
    <div class="query-editor">
      <label for={id} class="query-editor-label">{label}</label>
      <div class="query-editor-body" style={{ height: `${rows * LINE_PX + 2}px` }}>
        <div class="query-gutter" ref={gutter} aria-hidden="true">
          {Array.from({ length: lines }, (_, i) => (
            <div key={i} class={error?.line === i + 1 ? 'gutter-line error-line' : 'gutter-line'} data-line={i + 1}>{i + 1}</div>
          ))}
          <div class="gutter-pad" />
        </div>
        <div class="query-text">
          {error ? (
            <div class="error-band" aria-hidden="true" style={{ top: `${(error.line - 1) * LINE_PX - scroll + 4}px` }} />
          ) : null}
          <textarea
            id={id} ref={area} value={value} spellcheck={false} wrap="off" autocomplete="off"
            aria-invalid={error ? 'true' : undefined} aria-describedby={error ? errorId : undefined}
            onInput={(e) => onInput(e.currentTarget.value)} onScroll={syncScroll}
          />
        </div>
      </div>
      {error ? (
        <p class="error syntax-error" role="alert" id={errorId}>
          <strong>Syntax error at line {error.line}, column {error.column}:</strong> {error.message}
        </p>
      ) : null}
    </div>
  );
}
