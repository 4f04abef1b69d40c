/**
 * ngrok's own config file examples, as its documentation prints them, for the tests that read
 * ngrok.yml (src/agent/ngrok-config.test.ts, test/burrow-start.test.ts).
 */

/** The version 2 file of ngrok's "Migrating from v2" section (docs/agent/config/v3), as printed. */
export const NGROK_V2_EXAMPLE = `version: 2
authtoken: 4nq9771bPxe8ctg7LKr_2ClH7Y15Zqe4bWLWF9p
api_key: 24yRd5U3DestCQapJrrVHLOqiAC_7RviwRqpd3wc9dKLujQZN

tunnels:
  basic:
    proto: http
    addr: 80
`;

/** The authtoken of the examples. */
export const NGROK_EXAMPLE_AUTHTOKEN = '4nq9771bPxe8ctg7LKr_2ClH7Y15Zqe4bWLWF9p';

/** ngrok's traffic policy getting-started endpoint (agent endpoints, config file): its `endpoints:`. */
export const NGROK_V3_ENDPOINT = `endpoints:
  - name: my-agent-endpoint
    description: My first Agent Endpoint with a Traffic Policy
    upstream:
      url: 80
    traffic_policy:
      on_http_request:
        - actions:
            - type: custom-response
              config:
                status_code: 200
                body: Hello, World!
`;
