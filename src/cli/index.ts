// Command-line tools, the folder's face. Each other file here is a command of its own, run as a
// script (`npm run backup`, `npm run license`, `npm run cluster`) and never imported; `restore`
// is a subcommand of the node's main (src/main.ts), which takes it from here.
export { restoreCommand } from './restore.js';
