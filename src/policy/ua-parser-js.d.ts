/** The part of ua-parser-js 1.x (MIT, untyped) that request-detail-vars.ts uses. */
declare module 'ua-parser-js' {
  interface UAPart {
    name?: string;
    version?: string;
    major?: string;
    model?: string;
    type?: string;
    vendor?: string;
    architecture?: string;
  }
  interface UAResult {
    ua: string;
    browser: UAPart;
    engine: UAPart;
    os: UAPart;
    device: UAPart;
    cpu: UAPart;
  }
  function UAParser(ua: string): UAResult;
  export default UAParser;
}
