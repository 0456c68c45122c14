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
