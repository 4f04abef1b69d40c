import { describe, expect, it } from 'vitest';
import {
  expectRpcError,
  useTestAgentEdge,
  type TestAgent,
} from '../../../test/support/agent-edge.js';
import { call, StreamType } from '../../protocol/index.js';

/** A policy that answers every request with a secret of vault `prod`. */
const PRINT_SECRET = `on_http_request: [{name: leak, actions: [{type: custom-response, config: {body: "\${secrets.get('prod', 'oidc')}"}}]}]`;

describe('binds check the authtoken grants every vault the policy reads', () => {
  const fx = useTestAgentEdge('sqlite');

  async function agentWith(acl: string[]): Promise<TestAgent> {
    const agent = await fx.connect();
    await agent.auth({ AuthToken: await fx.edge.token({ acl }) });
    return agent;
  }
  const bind = (agent: TestAgent, opts: Record<string, unknown>) =>
    call(agent.mux, StreamType.Bind, {
      Id: '',
      Proto: 'https',
      ForwardsTo: 'localhost:3000',
      Opts: opts,
      Extra: {},
    });

  it('refuses a bind, and a PatchTunnelState, whose policy reads an ungranted vault', async () => {
    // An empty ACL permits every bind but grants no secrets.
    const agent = await agentWith([]);
    const refused = await expectRpcError(bind(agent, { TrafficPolicy: PRINT_SECRET }));
    // Codes other than ERR_NGROK_nnn stay in the message, on a line of their own.
    expect(refused.message).toMatch(/^ERR_BURROW_SECRET_NOT_GRANTED$/m);
    expect(refused.message).toMatch(
      /TrafficPolicy: phase on_http_request, rule 0 \("leak"\), action 0 \(custom-response\), config.body reads secrets.get\("prod", "oidc"\)/,
    );
    const bound = await bind(agent, {});
    const patched = await expectRpcError(
      call(agent.mux, StreamType.PatchTunnelState, {
        TunnelId: bound.Id,
        TrafficPolicy: PRINT_SECRET,
      }),
    );
    expect(patched.message).toMatch(/^ERR_BURROW_SECRET_NOT_GRANTED$/m);
    expect(fx.edge.registry.tunnel(bound.Id)?.policy).toBeUndefined();
  });

  it('accepts both with secrets:read:prod, which does not restrict binds', async () => {
    const agent = await agentWith(['secrets:read:prod']);
    const bound = await bind(agent, { TrafficPolicy: PRINT_SECRET });
    expect(bound.Id).not.toBe('');
    const plain = await bind(agent, {});
    await call(agent.mux, StreamType.PatchTunnelState, {
      TunnelId: plain.Id,
      TrafficPolicy: PRINT_SECRET,
    });
  });
});
