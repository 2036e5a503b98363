import { parse } from 'acorn';
import { DomainError } from '../errors.js';

/** A syntax error in a projection query, with its position (1-based line and column). */
export class QuerySyntaxError extends DomainError {
  readonly code = 'QUERY_SYNTAX';

  constructor(message: string, readonly line: number, readonly column: number) {
    super(message);
  }
}

/** Parses the query with acorn before anything is stored; throws QuerySyntaxError when it is not valid JavaScript. */
export function validateQuery(source: string): void {
  try {
    parse(source, { ecmaVersion: 'latest', sourceType: 'script', allowReturnOutsideFunction: false });
  } catch (err) {
    const e = err as SyntaxError & { loc?: { line: number; column: number } };
    const line = e.loc?.line ?? 1;
    const column = (e.loc?.column ?? 0) + 1;
    const message = e.message.replace(/\s*\(\d+:\d+\)$/, '');
    throw new QuerySyntaxError(`${message} at line ${line}, column ${column}`, line, column);
  }
}
