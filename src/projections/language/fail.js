// @ts-check
// How the language refuses: an Error whose message is what the user reads (in a definition
// error, or in the fault of the projection).

/**
 * @param {string} message
 * @returns {never}
 */
export function fail(message) {
  throw new Error(message);
}
