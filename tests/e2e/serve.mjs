// Starts `autoglm serve` on a free port and resolves once the model is loaded.
import { spawn } from 'node:child_process';

export function startServer(bin, args) {
  const server = spawn(bin, ['serve', ...args, '--port', '0', '-t', '2'], { stdio: ['ignore', 'ignore', 'pipe'] });
  const port = new Promise((resolve, reject) => {
    let err = '';
    server.stderr.on('data', (d) => {
      err += d;
      const m = err.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m && err.includes('ready:')) resolve(Number(m[1]));
    });
    server.on('exit', (code) => reject(new Error(`server exited with ${code}: ${err}`)));
  });
  return { server, port };
}

// The `skip` option of tests that need ../shared data: false when it is there, else the
// reason; under CI (CI=true or AUTOGLM_REQUIRE_SHARED=1) absent data is a failure instead.
export function skipUnlessShared(present, what) {
  if (present) return false;
  if (process.env.CI === 'true' || process.env.AUTOGLM_REQUIRE_SHARED === '1')
    throw new Error(`${what} is absent (../shared), in CI`);
  return `${what} is absent`;
}
