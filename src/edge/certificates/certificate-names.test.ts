import { describe, expect, it } from 'vitest';
import {
  canonicalCertificateNames,
  certificateNameProblem,
  normalizeCertificateName,
  wildcardSanFor,
} from './certificate-names.js';

describe('certificate names', () => {
  it('normalizes case, trailing dots and IPv6 brackets', () => {
    expect(normalizeCertificateName(' App.Example.COM. ')).toBe('app.example.com');
    expect(normalizeCertificateName('[::1]')).toBe('::1');
    expect(normalizeCertificateName('127.0.0.1')).toBe('127.0.0.1');
  });

  it('accepts DNS names, single labels, first-label wildcards and IP literals', () => {
    for (const ok of ['localhost', 'a.example.com', '*.sitea.example.com', '10.1.2.3', '::1']) {
      expect(certificateNameProblem(ok)).toBeUndefined();
    }
  });

  it('explains what is wrong with a name', () => {
    expect(certificateNameProblem('')).toBe('the name is empty');
    expect(certificateNameProblem('*.com')).toMatch(/two labels after/);
    expect(certificateNameProblem('a.*.example.com')).toMatch(/only be the whole first label/);
    expect(certificateNameProblem('x*.example.com')).toMatch(/only be the whole first label/);
    expect(certificateNameProblem('-a.example.com')).toMatch(/label "-a"/);
    expect(certificateNameProblem('a..example.com')).toMatch(/label ""/);
    expect(certificateNameProblem(`${'a'.repeat(64)}.example.com`)).toMatch(/1-63/);
    expect(certificateNameProblem(`${'a.'.repeat(127)}com`)).toMatch(/253/);
    expect(certificateNameProblem('a/b.example.com')).toMatch(/label "a\/b"/);
  });

  it('dedupes in order and names the bad entry', () => {
    expect(canonicalCertificateNames(['B.example.com', 'b.example.com', '[::1]', '::1'])).toEqual([
      'b.example.com',
      '::1',
    ]);
    expect(() => canonicalCertificateNames(['ok.example.com', 'bad_one.example.com'])).toThrow(
      'cannot issue a certificate for "bad_one.example.com"',
    );
  });

  it('maps names one label under a wildcard domain to the wildcard, others to themselves', () => {
    const w = '*.sitea.example.com';
    expect(wildcardSanFor('dev1.sitea.example.com', w)).toEqual([w]);
    expect(wildcardSanFor('a.b.sitea.example.com', w)).toEqual(['a.b.sitea.example.com']);
    expect(wildcardSanFor('sitea.example.com', w)).toEqual(['sitea.example.com']);
    expect(wildcardSanFor('xsitea.example.com', w)).toEqual(['xsitea.example.com']);
    expect(wildcardSanFor('dev1.sitea.example.com', 'sitea.example.com')).toEqual([
      'dev1.sitea.example.com',
    ]);
  });
});
