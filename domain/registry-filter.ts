/**
 * MLflow's filter strings for the model registry (`search_registered_models`,
 * `search_model_versions`): comparisons joined by AND, over a model's or version's attributes
 * (`name`, `run_id`, `source_path`, `version_number`) and `tags.<key>`. A parser of its own, not
 * the run search's (domain/mlflow-search.ts): the registry has other attributes, and MLflow's
 * clients build these filters themselves (`name='x'`, `run_id IN ('a','b')`).
 */
import { likeMatches } from './sql-like.ts';

export type RegistryOp = '=' | '!=' | '<' | '<=' | '>' | '>=' | 'LIKE' | 'ILIKE' | 'IN' | 'NOT IN';

export interface RegistryClause {
  /** An attribute name, or `tags.<key>`. */
  key: string;
  op: RegistryOp;
  value: string | number | string[];
}

export class RegistryFilterError extends Error {}

const TOKEN = /\s*(?:(`[^`]*`|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(-?\d+(?:\.\d+)?)(?![\w.])|(!=|<=|>=|=|<|>)|([(),])|([A-Za-z_]\w*(?:\.(?:\w+|`[^`]*`|"[^"]*"))*))/y;

type Tok = { k: 'str' | 'num' | 'op' | 'punct' | 'word'; t: string };

function tokens(s: string): Tok[] {
  const out: Tok[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < s.length) {
    if (/^\s*$/.test(s.slice(TOKEN.lastIndex))) break;
    const at = TOKEN.lastIndex;
    const m = TOKEN.exec(s);
    if (!m) throw new RegistryFilterError(`cannot read the filter at "${s.slice(at, at + 20)}"`);
    if (m[1] !== undefined) out.push({ k: 'str', t: m[1].slice(1, -1).replace(/\\(.)/g, '$1') });
    else if (m[2] !== undefined) out.push({ k: 'num', t: m[2] });
    else if (m[3] !== undefined) out.push({ k: 'op', t: m[3] });
    else if (m[4] !== undefined) out.push({ k: 'punct', t: m[4] });
    else out.push({ k: 'word', t: m[5] });
  }
  return out;
}

/** An identifier as its key: `tags.k`, `tags.\`k k\``, or an attribute (an `attributes.` prefix dropped). */
function keyOf(word: string, attributes: readonly string[]): string {
  const m = /^(tags?|attributes?|attr)\.(.+)$/i.exec(word);
  if (m && m[1].toLowerCase().startsWith('tag')) return `tags.${m[2].replace(/^[`"](.*)[`"]$/, '$1')}`;
  const name = m ? m[2] : word;
  if (!attributes.includes(name)) throw new RegistryFilterError(`invalid attribute "${name}": the filter takes ${attributes.join(', ')} and tags.<key>`);
  return name;
}

/** Parses a registry filter over the given attributes; empty is no clause. */
export function parseRegistryFilter(filter: string | undefined, attributes: readonly string[]): RegistryClause[] {
  if (!filter || filter.trim() === '') return [];
  const t = tokens(filter);
  const out: RegistryClause[] = [];
  let i = 0;
  const upper = (k: number) => (t[k]?.k === 'word' ? t[k].t.toUpperCase() : undefined);
  for (;;) {
    if (t[i]?.k !== 'word') throw new RegistryFilterError(`expected a name such as name or tags.key at token ${i + 1}`);
    const key = keyOf(t[i].t, attributes);
    i++;
    let op: RegistryOp;
    if (upper(i) === 'NOT' && upper(i + 1) === 'IN') {
      op = 'NOT IN';
      i += 2;
    } else if (upper(i) === 'IN' || upper(i) === 'LIKE' || upper(i) === 'ILIKE') {
      op = upper(i) as RegistryOp;
      i++;
    } else if (t[i]?.k === 'op') {
      op = t[i].t as RegistryOp;
      i++;
    } else throw new RegistryFilterError(`expected a comparison after "${key}"`);
    let value: RegistryClause['value'];
    if (op === 'IN' || op === 'NOT IN') {
      if (t[i]?.t !== '(') throw new RegistryFilterError(`${op} takes a list in parentheses: ('a', 'b')`);
      i++;
      const list: string[] = [];
      for (;;) {
        if (t[i]?.k !== 'str' && t[i]?.k !== 'num') throw new RegistryFilterError(`the list after ${op} takes quoted strings`);
        list.push(t[i].t);
        i++;
        const p = t[i++];
        if (p?.t === ')') break;
        if (p?.t !== ',') throw new RegistryFilterError(`the list after ${op} is not closed with ")"`);
      }
      value = list;
    } else if (t[i]?.k === 'str') value = t[i++].t;
    else if (t[i]?.k === 'num') value = Number(t[i++].t);
    else throw new RegistryFilterError(`"${key}" compares with a quoted string or a number`);
    out.push({ key, op, value });
    if (i >= t.length) return out;
    if (upper(i) !== 'AND') throw new RegistryFilterError('expected AND between comparisons');
    i++;
  }
}

/** Whether a row's values (attribute or `tags.<key>` → value; undefined: absent) pass every clause. */
export function matchesRegistryFilter(clauses: readonly RegistryClause[], valueOf: (key: string) => string | number | undefined): boolean {
  return clauses.every((c) => {
    const v = valueOf(c.key);
    if (v === undefined) return c.op === '!=' || c.op === 'NOT IN';
    const s = String(v);
    switch (c.op) {
      case '=':
        return s === String(c.value);
      case '!=':
        return s !== String(c.value);
      case 'LIKE':
        return likeMatches(s, String(c.value), false);
      case 'ILIKE':
        return likeMatches(s, String(c.value), true);
      case 'IN':
        return (c.value as string[]).includes(s);
      case 'NOT IN':
        return !(c.value as string[]).includes(s);
      default: {
        const a = Number(v);
        const b = Number(c.value);
        return c.op === '<' ? a < b : c.op === '<=' ? a <= b : c.op === '>' ? a > b : a >= b;
      }
    }
  });
}
