#!/usr/bin/env node
// The published entry point runs the compiled CLI; `npm install` builds it (the `prepare` script).
import { main } from '../dist/cli/main.js';

await main(process.argv);
