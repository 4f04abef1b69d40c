/** PLACEHOLDER: being written. Parses a traffic policy document (JSON or YAML). */
export function parsePolicyDocument(_text: string, _field: string): unknown {
  return {};
}
