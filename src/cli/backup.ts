import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { resolve } from 'node:path';
import { commandArgs } from './args.js';

// `npm run backup -- --to DIR [--differential] [--url http://127.0.0.1:2113] [--user admin --password changeit]`:
// asks a running node for a backup (POST /admin/backup) and prints its answer. DIR is on the
// node's machine; a relative DIR is made absolute against this command's directory. Exit code 0
// once the backup is complete, 1 when the node refused it or could not be reached, 2 on bad
// arguments. node:http rather than fetch: a large backup takes longer than fetch waits for headers.

const USAGE = 'Usage: npm run backup -- --to DIR [--differential] [--url http://127.0.0.1:2113] [--user admin] [--password changeit]';

function post(url: URL, authorization: string, body: string): Promise<{ status: number; text: string }> {
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolvePost, reject) => {
    const req = send(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), Authorization: authorization },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { text += d; });
      res.on('end', () => resolvePost({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function main(argv: string[]): Promise<number> {
  const values = commandArgs(argv, {
    to: { type: 'string' }, differential: { type: 'boolean', default: false },
    url: { type: 'string', default: 'http://127.0.0.1:2113' }, user: { type: 'string', default: 'admin' },
    password: { type: 'string', default: 'changeit' },
  }, USAGE, ['to']);
  if (typeof values === 'number') return values;
  const authorization = 'Basic ' + Buffer.from(`${values.user}:${values.password}`).toString('base64');
  const body = JSON.stringify({ to: resolve(values.to!), differential: values.differential });
  try {
    const { status, text } = await post(new URL('/admin/backup', values.url), authorization, body);
    if (status !== 200) {
      process.stderr.write(`The backup failed: ${status}${text ? ` ${text}` : ''}\n`);
      return 1;
    }
    process.stdout.write(`${text}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`Cannot reach the node at ${values.url}: ${(err as Error).message}\n`);
    return 1;
  }
}

main(process.argv.slice(2)).then((code) => process.exit(code), (err) => {
  process.stderr.write(`${(err as Error).message}\n`);
  process.exit(1);
});
