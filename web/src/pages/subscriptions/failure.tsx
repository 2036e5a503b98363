import { ApiFailure } from '../../api';
import { errorText } from '../../components';

// The node's own words for a failed change: its outcome bodies are JSON ({result, reason}),
// its validation answers plain text. Either way the user reads what the node said.

export function failureText(error: unknown): string {
  if (!(error instanceof ApiFailure)) return errorText(error);
  let said = error.body.trim();
  try {
    const body = JSON.parse(said);
    if (body && typeof body === 'object') said = body.reason || body.message || body.result || body.error || said;
  } catch {
    // plain text: shown as sent
  }
  return `${error.status} ${error.statusText}${said ? `: ${said}` : ''}`;
}

export function Failure({ error }: { error: unknown }) {
  if (!error) return null;
  return <p class="error" role="alert">{failureText(error)}</p>;
}
