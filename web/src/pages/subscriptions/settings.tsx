import { Field } from '../../components';

// A group's settings as the node takes them (PUT creates, POST updates), with the node's
// defaults. Numbers go as typed: what is not an integer is sent as text, so the node's own
// message says what is wrong with it.

export const STRATEGIES = ['RoundRobin', 'DispatchToSingle', 'Pinned', 'PinnedByCorrelation'];

export interface Settings {
  resolveLinktos: boolean;
  extraStatistics: boolean;
  startFrom: string;
  messageTimeoutMilliseconds: string;
  maxRetryCount: string;
  liveBufferSize: string;
  readBatchSize: string;
  bufferSize: string;
  checkPointAfterMilliseconds: string;
  minCheckPointCount: string;
  maxCheckPointCount: string;
  maxSubscriberCount: string;
  namedConsumerStrategy: string;
}

type NumberKey = Exclude<keyof Settings, 'resolveLinktos' | 'extraStatistics' | 'namedConsumerStrategy'>;

export const DEFAULTS: Settings = {
  resolveLinktos: false,
  extraStatistics: false,
  startFrom: '0',
  messageTimeoutMilliseconds: '10000',
  maxRetryCount: '10',
  liveBufferSize: '500',
  readBatchSize: '20',
  bufferSize: '500',
  checkPointAfterMilliseconds: '1000',
  minCheckPointCount: '10',
  maxCheckPointCount: '500',
  maxSubscriberCount: '10',
  namedConsumerStrategy: 'RoundRobin',
};

const NUMBERS: Array<{ key: NumberKey; label: string; hint?: string }> = [
  { key: 'startFrom', label: 'Start from', hint: 'First event number to deliver; -1 for only new events' },
  { key: 'messageTimeoutMilliseconds', label: 'Message timeout (ms)' },
  { key: 'maxRetryCount', label: 'Max retry count', hint: 'Retries before a message is parked' },
  { key: 'liveBufferSize', label: 'Live buffer size' },
  { key: 'readBatchSize', label: 'Read batch size' },
  { key: 'bufferSize', label: 'Buffer size', hint: 'Larger than the read batch size' },
  { key: 'checkPointAfterMilliseconds', label: 'Checkpoint after (ms)' },
  { key: 'minCheckPointCount', label: 'Min checkpoint count' },
  { key: 'maxCheckPointCount', label: 'Max checkpoint count' },
  { key: 'maxSubscriberCount', label: 'Max subscriber count', hint: '0 for no limit' },
];

/** The settings of a group's /info `config`, as the form edits them. */
export function fromConfig(config: any): Settings {
  const s: Settings = { ...DEFAULTS };
  if (!config) return s;
  s.resolveLinktos = config.resolveLinktos === true;
  s.extraStatistics = config.extraStatistics === true;
  for (const { key } of NUMBERS) if (config[key] !== undefined && config[key] !== null) s[key] = String(config[key]);
  if (typeof config.namedConsumerStrategy === 'string') s.namedConsumerStrategy = config.namedConsumerStrategy;
  return s;
}

/** The request body: integers as numbers, anything else as typed (the node answers what is wrong). */
export function toBody(s: Settings): Record<string, unknown> {
  const body: Record<string, unknown> = {
    resolveLinktos: s.resolveLinktos, extraStatistics: s.extraStatistics, namedConsumerStrategy: s.namedConsumerStrategy,
  };
  for (const { key } of NUMBERS) {
    const text = s[key].trim();
    body[key] = /^-?\d+$/.test(text) && Number.isSafeInteger(Number(text)) ? Number(text) : text;
  }
  return body;
}

export function SettingsFields({ id, value, onChange }: { id: string; value: Settings; onChange: (s: Settings) => void }) {
  const set = <K extends keyof Settings>(key: K, v: Settings[K]) => onChange({ ...value, [key]: v });
  return (
    <fieldset class="sub-settings">
      <legend>Settings</legend>
      <div class="sub-grid">
        {NUMBERS.map(({ key, label, hint }) => (
          <div class="field" key={key}>
            {/* The hint describes the input rather than being part of its name. */}
            <label for={`${id}-${key}`}>{label}</label>
            <input id={`${id}-${key}`} name={key} inputMode="numeric" value={value[key]} aria-describedby={hint ? `${id}-${key}-hint` : undefined}
              onInput={(e) => set(key, e.currentTarget.value)} />
            {hint ? <small id={`${id}-${key}-hint`}>{hint}</small> : null}
          </div>
        ))}
        <Field label="Consumer strategy">
          <select name="namedConsumerStrategy" value={value.namedConsumerStrategy}
            onChange={(e) => set('namedConsumerStrategy', e.currentTarget.value)}>
            {STRATEGIES.map((s) => <option value={s} key={s}>{s}</option>)}
          </select>
        </Field>
      </div>
      <div class="row">
        <label><input type="checkbox" checked={value.resolveLinktos} onChange={(e) => set('resolveLinktos', e.currentTarget.checked)} /> Resolve link events</label>
        <label><input type="checkbox" checked={value.extraStatistics} onChange={(e) => set('extraStatistics', e.currentTarget.checked)} /> Extra statistics</label>
      </div>
    </fieldset>
  );
}

