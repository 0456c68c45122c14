// Helpers of the deployment tests: a free loopback port, and polling until a check holds.
import { createServer } from 'node:net';

export function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Resolves to the first truthy value of `check` (a failed check counts as false); throws
// naming `what` after `seconds`.
export async function until(what, check, seconds = 60) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
