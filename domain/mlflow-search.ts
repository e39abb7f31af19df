/**
 * MLflow's search syntax for runs (`filter_string`, `order_by`), parsed into clauses that
 * db/queries/mlflow.ts turns into SQL. The grammar is MLflow's own (mlflow/utils/search_utils.py):
 * comparisons joined by AND (MLflow has no OR for runs), each `<type>.<key> <op> <value>`:
 *
 *   metrics.loss < 0.5 and params.lr = '0.01' and tags.team LIKE 'vision%' and attributes.status = 'FINISHED'
 *
 * - Types: `metrics`/`metric`, `params`/`param`, `tags`/`tag`, `attributes`/`attribute`/`attr`/`run`;
 *   a bare name is an attribute. A key with spaces or dots is quoted: metrics.`val loss`, params."a b".
 * - Metrics compare numbers (=, !=, <, <=, >, >=) against the run's latest value of the key.
 * - Params and tags compare strings (=, !=, LIKE, ILIKE, IN, NOT IN), and take IS NULL / IS NOT NULL.
 * - Attributes: run_id (=, !=, IN, NOT IN), run_name, status, user_id, artifact_uri (strings),
 *   start_time, end_time (numbers, epoch ms); `created` is start_time.
 */

export type SearchType = 'metric' | 'param' | 'tag' | 'attribute';
export type Comparator = '=' | '!=' | '<' | '<=' | '>' | '>=' | 'LIKE' | 'ILIKE' | 'IN' | 'NOT IN' | 'IS NULL' | 'IS NOT NULL';

export interface SearchClause {
  type: SearchType;
  key: string;
  op: Comparator;
  /** A number (metrics, start_time, end_time), a string, a list (IN), or null (IS [NOT] NULL). */
  value: number | string | string[] | null;
}

export interface OrderClause {
  type: SearchType;
  key: string;
  ascending: boolean;
}

/** A filter or order MLflow's client would also refuse: the message says what and where. */
export class SearchSyntaxError extends Error {}

const TYPES: Record<string, SearchType> = {
  metrics: 'metric',
  metric: 'metric',
  params: 'param',
  param: 'param',
  parameters: 'param',
  tags: 'tag',
  tag: 'tag',
  attributes: 'attribute',
  attribute: 'attribute',
  attr: 'attribute',
  run: 'attribute',
};
/** The attributes a search may name: its strings, its numbers, and the other names they go by. */
export interface SearchAttributes {
  strings: ReadonlySet<string>;
  numbers: ReadonlySet<string>;
  aliases: Readonly<Record<string, string>>;
}
/** A run's (search_runs). */
export const RUN_ATTRIBUTES: SearchAttributes = {
  strings: new Set(['run_id', 'run_name', 'status', 'user_id', 'artifact_uri', 'lifecycle_stage']),
  numbers: new Set(['start_time', 'end_time']),
  aliases: { created: 'start_time', run_uuid: 'run_id', name: 'run_name' },
};
/** A logged model's (search_logged_models; MLflow's SearchLoggedModelsUtils). */
export const LOGGED_MODEL_ATTRIBUTES: SearchAttributes = {
  strings: new Set(['name', 'model_id', 'model_type', 'status', 'source_run_id']),
  numbers: new Set(['creation_timestamp', 'last_updated_timestamp']),
  aliases: { creation_time: 'creation_timestamp', last_updated_time: 'last_updated_timestamp' },
};
const NUMERIC_OPS = new Set<Comparator>(['=', '!=', '<', '<=', '>', '>=']);
const STRING_OPS = new Set<Comparator>(['=', '!=', 'LIKE', 'ILIKE', 'IN', 'NOT IN', 'IS NULL', 'IS NOT NULL']);

type Token = { kind: 'ident'; text: string } | { kind: 'string'; text: string } | { kind: 'number'; value: number } | { kind: 'op'; text: string } | { kind: 'punct'; text: '(' | ')' | ',' };

function tokenize(s: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (/\s/.test(c)) {
      i++;
    } else if (c === "'" || c === '"' || c === '`') {
      const end = s.indexOf(c, i + 1);
      if (end < 0) throw new SearchSyntaxError(`unterminated ${c}-quoted text at character ${i + 1}`);
      // A backticked or double-quoted name right after `type.` is part of an identifier.
      const prev = out[out.length - 1];
      if (prev?.kind === 'ident' && prev.text.endsWith('.') && (c === '`' || c === '"')) prev.text += s.slice(i + 1, end);
      else if (c === '`') out.push({ kind: 'ident', text: s.slice(i + 1, end) });
      else out.push({ kind: 'string', text: s.slice(i + 1, end) });
      i = end + 1;
    } else if (c === '(' || c === ')' || c === ',') {
      out.push({ kind: 'punct', text: c });
      i++;
    } else if ('<>=!'.includes(c)) {
      const two = s.slice(i, i + 2);
      const op = ['<=', '>=', '!=', '<>', '=='].includes(two) ? two : c;
      if (op === '!') throw new SearchSyntaxError(`"!" at character ${i + 1} is not an operator`);
      out.push({ kind: 'op', text: op === '<>' ? '!=' : op === '==' ? '=' : op });
      i += op.length;
    } else if (/[-+\d.]/.test(c) && /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?/.test(s.slice(i)) && !(out[out.length - 1]?.kind === 'ident' && (out[out.length - 1] as { text: string }).text.endsWith('.'))) {
      const m = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?/.exec(s.slice(i))!;
      out.push({ kind: 'number', value: Number(m[0]) });
      i += m[0].length;
    } else if (/[\w.]/.test(c)) {
      const m = /^[\w.:/-]+/.exec(s.slice(i))!;
      out.push({ kind: 'ident', text: m[0] });
      i += m[0].length;
    } else {
      throw new SearchSyntaxError(`unexpected "${c}" at character ${i + 1}`);
    }
  }
  return out;
}

/** `type.key` (or a bare attribute) as a type and key. */
function identifier(text: string, what: string, attrs: SearchAttributes): { type: SearchType; key: string } {
  const dot = text.indexOf('.');
  const head = dot < 0 ? '' : text.slice(0, dot).toLowerCase();
  let type: SearchType;
  let key: string;
  if (dot >= 0 && TYPES[head]) {
    type = TYPES[head];
    key = text.slice(dot + 1);
  } else if (dot < 0) {
    type = 'attribute';
    key = text;
  } else {
    throw new SearchSyntaxError(`invalid identifier "${text}" in ${what}: it must be metrics.<key>, params.<key>, tags.<key> or attributes.<name>`);
  }
  if (key === '') throw new SearchSyntaxError(`invalid identifier "${text}" in ${what}: the key is empty`);
  if (type === 'attribute') {
    key = attrs.aliases[key] ?? key;
    if (!attrs.strings.has(key) && !attrs.numbers.has(key)) {
      throw new SearchSyntaxError(`invalid attribute key "${key}" in ${what}: valid attributes are ${[...attrs.strings, ...attrs.numbers].join(', ')}`);
    }
  }
  return { type, key };
}

/** Parses a `filter_string` (a run search's, or with `attrs` another entity's); empty or blank is no clause. */
export function parseSearchFilter(filter: string | undefined, attrs: SearchAttributes = RUN_ATTRIBUTES): SearchClause[] {
  const isNumeric = (c: { type: SearchType; key: string }) => c.type === 'metric' || (c.type === 'attribute' && attrs.numbers.has(c.key));
  if (!filter || filter.trim() === '') return [];
  const t = tokenize(filter);
  const clauses: SearchClause[] = [];
  let i = 0;
  const word = (k: number) => (t[k]?.kind === 'ident' ? (t[k] as { text: string }).text.toUpperCase() : undefined);
  for (;;) {
    const head = t[i];
    if (head?.kind !== 'ident') throw new SearchSyntaxError(`expected an identifier such as metrics.loss at token ${i + 1} of the filter`);
    const id = identifier(head.text, 'the filter', attrs);
    i++;
    let op: Comparator;
    if (word(i) === 'IS' && word(i + 1) === 'NULL') {
      op = 'IS NULL';
      i += 2;
    } else if (word(i) === 'IS' && word(i + 1) === 'NOT' && word(i + 2) === 'NULL') {
      op = 'IS NOT NULL';
      i += 3;
    } else if (word(i) === 'NOT' && word(i + 1) === 'IN') {
      op = 'NOT IN';
      i += 2;
    } else if (word(i) === 'IN' || word(i) === 'LIKE' || word(i) === 'ILIKE') {
      op = word(i) as Comparator;
      i++;
    } else if (t[i]?.kind === 'op') {
      op = (t[i] as { text: string }).text as Comparator;
      i++;
    } else {
      throw new SearchSyntaxError(`expected a comparison operator after "${head.text}"`);
    }
    const allowed = isNumeric(id) ? NUMERIC_OPS : STRING_OPS;
    if (!allowed.has(op) || (id.type === 'attribute' && ['IS NULL', 'IS NOT NULL'].includes(op))) {
      throw new SearchSyntaxError(`invalid comparator "${op}" for ${id.type} "${id.key}": it takes ${[...allowed].filter((o) => id.type !== 'attribute' || !o.startsWith('IS')).join(', ')}`);
    }
    let value: SearchClause['value'];
    if (op === 'IS NULL' || op === 'IS NOT NULL') {
      value = null;
    } else if (op === 'IN' || op === 'NOT IN') {
      if (t[i]?.kind !== 'punct' || (t[i] as { text: string }).text !== '(') throw new SearchSyntaxError(`${op} takes a list in parentheses: ('a', 'b')`);
      i++;
      const list: string[] = [];
      for (;;) {
        const v = t[i];
        if (v?.kind !== 'string') throw new SearchSyntaxError(`the list after ${op} takes quoted strings`);
        list.push(v.text);
        i++;
        const p = t[i];
        i++;
        if (p?.kind === 'punct' && p.text === ')') break;
        if (!(p?.kind === 'punct' && p.text === ',')) throw new SearchSyntaxError(`the list after ${op} is not closed with ")"`);
      }
      value = list;
    } else if (isNumeric(id)) {
      const v = t[i];
      if (v?.kind !== 'number') throw new SearchSyntaxError(`${id.type} "${id.key}" compares with a number`);
      value = v.value;
      i++;
    } else {
      const v = t[i];
      if (v?.kind !== 'string') throw new SearchSyntaxError(`${id.type} "${id.key}" compares with a quoted string, such as '0.01'`);
      value = v.text;
      i++;
    }
    clauses.push({ type: id.type, key: id.key, op, value });
    if (i >= t.length) return clauses;
    if (word(i) !== 'AND') throw new SearchSyntaxError(`expected AND between comparisons (MLflow's run search has no OR)`);
    i++;
  }
}

/** Parses `order_by` entries such as `metrics.loss ASC` or `attributes.start_time DESC`. */
export function parseOrderBy(entries: readonly string[] | undefined, attrs: SearchAttributes = RUN_ATTRIBUTES): OrderClause[] {
  return (entries ?? []).map((e) => {
    const t = tokenize(e);
    if (t.length < 1 || t.length > 2 || t[0].kind !== 'ident') throw new SearchSyntaxError(`invalid order_by "${e}": it takes "<type>.<key> [ASC|DESC]"`);
    const dir = t[1] ? (t[1].kind === 'ident' ? t[1].text.toUpperCase() : '') : 'ASC';
    if (dir !== 'ASC' && dir !== 'DESC') throw new SearchSyntaxError(`invalid order_by "${e}": the direction is ASC or DESC`);
    const id = identifier(t[0].text, 'order_by', attrs);
    return { ...id, ascending: dir === 'ASC' };
  });
}
