#!/usr/bin/env node
// The published entry point runs the compiled CLI; `npm install` in a clone builds it (`prepare`).
import { main } from '../dist/cli/main.js';

await main(process.argv);
