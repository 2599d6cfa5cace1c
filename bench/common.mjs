// What bench/gates and bench/peers/run share: the Release binaries they
// measure, and the median they report.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

// The steps and mock_provider binaries: the paths given, else the Release
// build in build-release/, built (scripts/build --release) when missing.
// `log` says so; `fail` is called with a message when one does not exist.
export function releaseBinaries(given, log, fail) {
  const dir = join(root, 'build-release');
  const steps = given.steps ?? join(dir, 'src/cli/steps');
  const mock = given.mock ?? join(dir, 'mock_provider/mock_provider');
  if ((!given.steps && !existsSync(steps)) || (!given.mock && !existsSync(mock))) {
    log('building steps and mock_provider (scripts/build --release)');
    execFileSync(join(root, 'scripts/build'),
      ['--release', '--target', 'steps', '--target', 'mock_provider'],
      { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  for (const p of [steps, mock]) if (!existsSync(p)) fail(`${p} does not exist`);
  return { steps: resolve(steps), mock: resolve(mock) };
}

export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
