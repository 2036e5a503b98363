import { cloneElement, isValidElement, type ComponentChildren } from 'preact';
import { useCallback, useEffect, useId, useRef, useState } from 'preact/hooks';
import { ApiFailure } from './api';
import { prettyJson } from './json';

// Building blocks every view shares: async loading with errors shown, polling, pretty JSON,
// a confirmation dialog, labelled fields. Plain elements, so screen readers and tests see
// labels, roles and names.

export interface Async<T> {
  data: T | undefined;
  error: Error | undefined;
  loading: boolean;
  reload: () => void;
}

/**
 * Runs `load` when `deps` or `ticks` change (and on reload()). `deps` say what the data is (a
 * stream, a page, a user): when they change, the last data is no longer shown, since it belongs
 * to something else. `ticks` only ask for it again (a refresh counter): the last data stays
 * while reloading.
 */
export function useAsync<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[], ticks: unknown[] = []): Async<T> {
  const [state, setState] = useState<{ data?: T; error?: Error; loading: boolean; of?: unknown[] }>({ loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const controller = new AbortController();
    const of = deps;
    setState((s) => ({ ...s, loading: true }));
    load(controller.signal).then(
      (data) => { if (!controller.signal.aborted) setState({ data, loading: false, of }); },
      (error) => { if (!controller.signal.aborted) setState((s) => ({ data: sameDeps(s.of, of) ? s.data : undefined, error, loading: false, of })); },
    );
    return () => controller.abort();
  }, [...deps, ...ticks, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  const current = sameDeps(state.of, deps);
  return { data: current ? state.data : undefined, error: current ? state.error : undefined, loading: state.loading || !current, reload };
}

function sameDeps(a: unknown[] | undefined, b: unknown[]): boolean {
  return a !== undefined && a.length === b.length && a.every((v, i) => Object.is(v, b[i]));
}

/** Calls `fn` every `ms` while mounted (and the tab is visible). */
export function useInterval(fn: () => void, ms: number): void {
  const saved = useRef(fn);
  saved.current = fn;
  useEffect(() => {
    const id = setInterval(() => { if (document.visibilityState !== 'hidden') saved.current(); }, ms);
    return () => clearInterval(id);
  }, [ms]);
}

/**
 * Runs `load` at once and then every `ms` while `active`, never two at a time (a slow node is not
 * asked again before it answers). Returns the last run's error (undefined after a success) and
 * `refresh`, to run it now (after an action changed what it shows).
 */
export function usePoll(load: () => Promise<void>, ms: number, active = true): { error: unknown; refresh: () => void } {
  const [error, setError] = useState<unknown>();
  const busy = useRef(false);
  const saved = useRef(load);
  saved.current = load;
  const refresh = useCallback(() => {
    if (busy.current) return;
    busy.current = true;
    saved.current().then(() => setError(undefined), setError).finally(() => { busy.current = false; });
  }, []);
  useEffect(refresh, []);
  useInterval(() => { if (active) refresh(); }, ms);
  return { error, refresh };
}

/** An error as the user should read it: the node's message when it sent one. */
export function errorText(error: unknown): string {
  if (error instanceof ApiFailure) return `${error.status} ${error.statusText}${error.body.trim() ? `: ${error.body.trim()}` : ''}`;
  if (error instanceof Error) return error.message;
  return String(error);
}

export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  return <p class="error" role="alert">{errorText(error)}</p>;
}

export function Notice({ children }: { children: ComponentChildren }) {
  return <p class="notice" role="status">{children}</p>;
}

/**
 * JSON text as the node sent it, re-indented without being parsed (json.ts: no digit lost); text
 * that is not JSON as it is. A value the console made itself is written with JSON.stringify.
 */
export function Json({ value, label }: { value: unknown; label?: string }) {
  const shown = typeof value === 'string' ? prettyJson(value) : value === undefined ? '' : JSON.stringify(value, null, 2);
  // Focusable: a long document scrolls, and keyboard users scroll it too (axe: scrollable-region-focusable).
  return <pre class="json" tabIndex={0} role={label ? 'group' : undefined} aria-label={label}>{shown}</pre>;
}

/**
 * An action a form or a button starts: `busy` while it runs, its failure in `error` and what it
 * reports when done in `done`, both cleared when the next one starts. With `rethrow` a failure
 * goes to the caller instead (a dialog shows it).
 */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [done, setDone] = useState<string>();
  const run = async (action: () => Promise<string | void>, rethrow = false): Promise<void> => {
    setBusy(true);
    setError(undefined);
    setDone(undefined);
    try {
      const said = await action();
      if (typeof said === 'string') setDone(said);
    } catch (err) {
      if (rethrow) throw err;
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, done, run, setError, setDone };
}

/** A button that asks first: its dialog names the action and needs a second click. */
export function ConfirmButton({ label, question, confirmLabel, onConfirm, danger, disabled }: {
  label: string; question: string; confirmLabel?: string; onConfirm: () => void | Promise<void>; danger?: boolean; disabled?: boolean;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const action = useAction();
  return (
    <>
      <button type="button" class={danger ? 'danger' : undefined} disabled={disabled} onClick={() => { action.setError(undefined); dialog.current?.showModal(); }}>{label}</button>
      <dialog ref={dialog} aria-label={label}>
        <p>{question}</p>
        <ErrorBox error={action.error} />
        <div class="row">
          <button type="button" class={danger ? 'danger' : undefined} disabled={action.busy} onClick={() => action.run(async () => {
            await onConfirm();
            dialog.current?.close();
          })}>{confirmLabel ?? label}</button>
          <button type="button" onClick={() => dialog.current?.close()}>Cancel</button>
        </div>
      </dialog>
    </>
  );
}

/** A labelled input; a hint describes the input (aria-describedby) without becoming part of its name. */
export function Field({ label, children, hint }: { label: string; children: ComponentChildren; hint?: string }) {
  const id = useId();
  const described = hint && isValidElement(children) ? cloneElement(children, { 'aria-describedby': id } as Record<string, unknown>) : children;
  return (
    <div class="field">
      <label>
        <span>{label}</span>
        {described}
      </label>
      {hint ? <small id={id}>{hint}</small> : null}
    </div>
  );
}

/** A log position (`C:6206130/P:6206130`): when it does not fit, it wraps after the slash, not inside a number. */
export function Position({ text }: { text: string | number | null | undefined }) {
  if (text === null || text === undefined || text === '') return <>–</>;
  const parts = String(text).split('/');
  return <>{parts.map((part, i) => (i === 0 ? part : <>/<wbr />{part}</>))}</>;
}

export function formatBytes(n: number): string {
  if (!Number.isFinite(n)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

export function formatNumber(n: number, digits = 0): string {
  return Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits }) : '–';
}

const ISO_UTC = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(\.\d{1,3})?\d*Z$/;

/**
 * The console's one way to write a moment: `2026-11-26 12:00:00.123 UTC`, in UTC as the node
 * records it (operators in several time zones read the same figures). An ISO time with another
 * offset is converted; what is not a time is shown as it is.
 */
export function formatTime(iso: string): string {
  let m = ISO_UTC.exec(iso);
  if (!m) {
    const at = new Date(iso);
    m = Number.isNaN(at.getTime()) ? null : ISO_UTC.exec(at.toISOString());
  }
  return m ? `${m[1]} ${m[2]}${m[3] ?? ''} UTC` : iso;
}

/** A moment as formatTime writes it, the node's own text kept for the tooltip and machines. */
export function When({ iso }: { iso: string | null | undefined }) {
  if (!iso) return <span>–</span>;
  return <time dateTime={iso} title={iso}>{formatTime(iso)}</time>;
}
