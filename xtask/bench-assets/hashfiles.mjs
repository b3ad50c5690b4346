// The hashFiles() anchor of `cargo xtask bench-key`: GitHub's own
// implementation (@actions/glob, the package the runner's hashFiles() uses)
// over the archive-key patterns of the design, from the workspace given as
// the first argument. Installed with the pinned package.json beside it.
import { hashFiles } from '@actions/glob';
import path from 'node:path';
const ws = path.resolve(process.argv[2] ?? '.');
const patterns = [
  'Cargo.lock', '**/Cargo.toml', '**/src/**', '**/tests/**', '**/examples/**',
  '**/benches/**', '**/build.rs', 'scripts/ci/**', '.cargo/**', 'rust-toolchain*',
].join('\n');
process.chdir(ws);
const h = await hashFiles(patterns, ws, { followSymbolicLinks: false }, false);
process.stderr.write(`hashFiles = ${h}\n`);
