import { describe, expect, it } from 'vitest';
import { CODES } from '../core/errors.js';
import { storeError } from './store-errors.js';

const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });

describe('storeError', () => {
  it('turns a full disk into 503 ERR_BURROW_STORE_FULL with a message', () => {
    for (const err of [withCode('SQLITE_FULL'), withCode('53100')]) {
      const mapped = storeError(err);
      expect(mapped?.statusCode).toBe(503);
      expect(mapped?.code).toBe(CODES.storeFull);
      expect(mapped?.message).toMatch(/disk is full/);
    }
  });

  it('turns a lost or restarting database into 503 ERR_BURROW_STORE_UNAVAILABLE', () => {
    for (const err of [
      withCode('57P01'),
      withCode('ECONNREFUSED'),
      withCode('SQLITE_IOERR_WRITE'),
      new Error('Connection terminated unexpectedly'),
      new Error('Client has encountered a connection error and is not queryable'),
      new Error('Client was closed and is not queryable'),
    ]) {
      expect(storeError(err)?.code).toBe(CODES.storeUnavailable);
    }
  });

  it('leaves every other error alone', () => {
    expect(storeError(new Error('boom'))).toBeUndefined();
    expect(storeError(withCode('SQLITE_CONSTRAINT_UNIQUE'))).toBeUndefined();
    expect(storeError(null)).toBeUndefined();
  });
});
