/**
 * The session keys of an ngrok.yml that Burrow's agent config names otherwise, read one way by
 * `burrow start` (ngrok-config.ts, which checks every key) and by `burrow http|tcp|tls|agent
 * --config` (src/cli/agent-config.ts, which reads the session keys alone): the edge's address and
 * the CA. Imports nothing, so the quick tunnels can read an ngrok.yml without the tunnel
 * definitions (and the policy engine they bring).
 */

/**
 * `server_addr` (version 2) or `connect_url` (version 3) as host:port; ngrok writes the latter as
 * `tls://host:port`.
 * @example ngrokServerAddr('tls://edge.example.com:4443') // 'edge.example.com:4443'
 */
export function ngrokServerAddr(value: string): string {
  return value.replace(/^tls:\/\//, '');
}

/**
 * `root_cas` (version 2) or `connect_cas` (version 3) as a CA file: `host` (the system roots,
 * trusted anyway) is none; `trusted`, ngrok's own bundle, is refused with `fail`.
 * @example ngrokCaFile('/etc/burrow/ca.pem', fail) // '/etc/burrow/ca.pem'
 */
export function ngrokCaFile(value: string, fail: (message: string) => Error): string | undefined {
  if (value === 'host') return undefined;
  if (value === 'trusted') {
    throw fail(
      "'trusted' means ngrok's own CA bundle, which a Burrow server does not use; give 'host' (the system roots) or the file of your server's CA (<data-dir>/ca.pem)",
    );
  }
  return value;
}
