import { describe, expect, it } from 'vitest';
import { MLFLOW_POINT_RULES, mlflowNameProblem, posixNormpath, relativeSourceProblem, wrongTypeMessage } from '../domain/mlflow-rules.ts';
import { parseBatch, pointProblem } from '../domain/metrics.ts';

describe("MLflow's name and value rules (domain/mlflow-rules.ts)", () => {
  it('normalises paths as Python posixpath.normpath does', () => {
    const cases: [string, string][] = [['', '.'], ['a//b', 'a/b'], ['./a', 'a'], ['a/', 'a'], ['/a', '/a'], ['//a', '//a'], ['///a', '/a'], ['a/../..', '..'], ['../a/./b', '../a/b'], ['/..', '/']];
    for (const [p, want] of cases) expect(posixNormpath(p), p).toBe(want);
  });

  it('takes what MLflow takes (a leading "-", spaces, colons, unicode) and refuses what it refuses, in its words', () => {
    for (const ok of ['-loss', 'val loss', 'a:b/c', 'épsilon', '.hidden']) expect(mlflowNameProblem(ok), ok).toBeNull();
    expect(mlflowNameProblem('a//b')).toContain("would resolve to 'a/b'");
    expect(mlflowNameProblem('/abs')).toContain('Names may be treated as files');
    expect(mlflowNameProblem('a$b')).toContain('Names may only contain alphanumerics');
    expect(mlflowNameProblem('x'.repeat(251))).toContain('exceeds the maximum length of 250');
  });

  it('lets MLflow batches have negative steps; GPUPlane keeps its own rules', () => {
    const p = { key: '-loss', step: -3, value: 0.5 };
    expect(pointProblem(p, 0)).toContain('is not a metric key');
    expect(pointProblem({ ...p, key: 'loss' }, 0)).toContain('is not an integer >= 0');
    expect(pointProblem(p, 0, undefined, MLFLOW_POINT_RULES)).toBeNull();
    expect(parseBatch([p], 1, MLFLOW_POINT_RULES)).toEqual([{ key: '-loss', steps: [-3], values: [0.5], times: [1] }]);
  });

  it("words a wrong type as MLflow's server does", () => {
    expect(wrongTypeMessage('artifact_location', 5)).toBe("Invalid value 5 for parameter 'artifact_location' supplied:  Hint: Value was of type 'int'. See the API docs for more information about request parameters.");
    expect(wrongTypeMessage('x', { b: 1, a: [true] })).toContain('Invalid value {"a":[true],"b":1}');
    expect(wrongTypeMessage('x', 1.5)).toContain("of type 'float'");
  });

  it("refuses a model version source with relative path references, as MLflow's server does (its cases)", () => {
    const ok = ['mlflow-artifacts:/models', 'mlflow-artifacts:/models/', 'mlflow-artifacts:/models///', 'mlflow-artifacts:/models/foo///bar', 'mlflow-artifacts://host:9000/models', 'mlflow-artifacts://host:9000/models/artifact/..../', 'runs:/abc/model', 'models:/m-123', 's3://bucket/m', 'mlflow-artifacts:/1/models/m-1/artifacts', 'http://h/a;x/b', 'http://h/a/b;..'];
    for (const s of ok) expect(relativeSourceProblem(s), s).toBeNull();
    const bad = [
      'mlflow-artifacts://host:9000/models/../../../',
      'http://host:9000/models/../../../',
      'https://host/api/2.0/mlflow-artifacts/artifacts/../../../',
      's3a://my_bucket/api/2.0/mlflow-artifacts/artifacts/../../../',
      'ftp://host:8888/api/2.0/mlflow-artifacts/artifacts/../../../',
      'mlflow-artifacts://host:9000/models/..%2f..%2fartifacts',
      'mlflow-artifacts://host:9000/models/%252e%252e/x',
      'mlflow-artifacts://host:9000/models/artifact%00',
      'dbfs:/run/artifacts/a%3f/../../../../',
      's3://bucket/a/./b',
      's3://bucket',
    ];
    for (const s of bad) expect(relativeSourceProblem(s), s).toBe(`Invalid model version source: '${s}'. If supplying a source as an http, https, local file path, ftp, objectstore, or mlflow-artifacts uri, an absolute path must be provided without relative path references present. Please provide an absolute path.`);
  });
});
