/** The version `burrow --version` prints; test/install.test.ts checks it against package.json. */
export const BURROW_VERSION = '0.1.0';
