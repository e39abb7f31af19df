/**
 * The retry form's command field: what it shows, and what a retry sends back for it. A
 * `/bin/sh -c SCRIPT` job shows its script; other argv shows as JSON, which keeps every argument
 * exact (a shell-quoted line, sent back, would run under /bin/sh -c and change the argv).
 */

/**
 * commandField returns the field's text for a job's argv. A script with a line break shows as
 * JSON too: a text field drops line breaks, and the retry would send the script run together.
 */
export function commandField(command: string[]): string {
  const script = command.length === 3 && command[0] === '/bin/sh' && command[1] === '-c' ? command[2] : null;
  return script !== null && !/[\r\n]/.test(script) ? script : JSON.stringify(command);
}

/**
 * editedCommand returns what a retry sends for the field: nothing when it reads as shown (white
 * space around it aside), argv for JSON (`[...]`, which throws if it does not parse), else a
 * script for /bin/sh -c.
 */
export function editedCommand(typed: string, shown: string): string | string[] | undefined {
  const t = typed.trim();
  if (!t || t === shown.trim()) return undefined;
  return t.startsWith('[') ? (JSON.parse(t) as string[]) : t;
}
