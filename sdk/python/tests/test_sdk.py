"""Unit tests of the SDK against a stub API (python3 -m unittest discover -s sdk/python/tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
import warnings
from typing import Any, Dict
from unittest import mock

sys.dont_write_bytecode = True  # no .pyc files in the repo
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import gpuplane  # noqa: E402
from gpuplane._encode import Encoder, value_json  # noqa: E402
from stub_api import StubApi  # noqa: E402

FAST = {
    "GPUPLANE_SDK_FLUSH_INTERVAL_S": "0.05",
    "GPUPLANE_SDK_MAX_BACKOFF_S": "0.1",
    "GPUPLANE_SDK_INIT_TIMEOUT_S": "2",
    "GPUPLANE_SDK_FLUSH_TIMEOUT_S": "10",
    "GPUPLANE_SDK_REQUEST_TIMEOUT_S": "2",
    # A home of the tests' own: never the user's ~/.gpuplane and its tokens.
    "GPUPLANE_HOME": tempfile.mkdtemp(prefix="gpuplane-sdk-home-"),
}


def until(what: str, check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = check()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


# What torchrun and the agent set to say which process this is: never the test process's own.
RANK_VARS = ("RANK", "GPUPLANE_NODE_RANK", "GPUPLANE_LOG_ALL_RANKS")


class EncoderTest(unittest.TestCase):
    def test_values(self) -> None:
        self.assertEqual(value_json(1.5), "1.5")
        self.assertEqual(value_json(3), "3.0")
        self.assertEqual(value_json(True), "1.0")
        self.assertEqual(value_json(float("nan")), '"NaN"')
        self.assertEqual(value_json(float("inf")), '"Infinity"')
        self.assertEqual(value_json(float("-inf")), '"-Infinity"')
        self.assertIsNone(value_json("abc"))
        self.assertIsNone(value_json(None))
        self.assertIsNone(value_json(10**400))

    def test_batches_are_cut_at_the_point_and_byte_limits(self) -> None:
        keys = iter(range(1000))
        warned = []
        enc = Encoder(3, 10_000, lambda: f"k{next(keys)}", warned.append)
        out: list = []
        dropped = enc.encode([{"a": 1, "b": float("nan"), "bad key!": 2, "c": "x"}, 0, 1.0, {"a": 2}, 1, 2.0, {"a": 3}, 2, 3.0], out)
        self.assertEqual(dropped, 2)
        self.assertEqual([b.points for b in out], [3, 1])
        self.assertEqual([b.key for b in out], ["k0", "k1"])
        pts = json.loads(out[0].body)["points"]
        self.assertEqual(pts[0], {"key": "a", "step": 0, "ts": 1000, "value": 1.0})
        self.assertEqual(pts[1]["value"], "NaN")
        self.assertEqual(len(warned), 2)
        small = Encoder(10_000, 200, lambda: "k", warned.append)
        out = []
        small.encode([x for i in range(20) for x in ({"loss": i}, i, 0.0)], out)
        self.assertGreater(len(out), 1)
        self.assertTrue(all(len(b.body) < 300 for b in out))
        self.assertEqual(sum(b.points for b in out), 20)


class RunTest(unittest.TestCase):
    def setUp(self) -> None:
        self.api = StubApi()
        self.env = mock.patch.dict(os.environ, {**FAST, "GPUPLANE_API_URL": self.api.url})
        self.env.start()
        for k in ("GPUPLANE_RUN_ID", "GPUPLANE_PARAMS", "GPUPLANE_SDK_MAX_BUFFER", "GPUPLANE_TOKEN", "GPUPLANE_RESUME_FROM", *RANK_VARS):
            os.environ.pop(k, None)

    def tearDown(self) -> None:
        gpuplane.finish(timeout=1)
        self.env.stop()
        self.api.close()

    def stored(self, rid: str) -> Dict[str, list]:
        out: Dict[str, list] = {}
        for p in self.api.points[rid]:
            out.setdefault(p["key"], []).append((p["step"], p["value"]))
        return out

    def test_registers_logs_and_finishes(self) -> None:
        run = gpuplane.init("proj", "exp", "r1", {"lr": 0.1, "bad": float("nan")})
        self.assertIsNotNone(run.id)
        body = self.api.runs[run.id]
        self.assertEqual((body["project"], body["experiment"], body["name"], body["source"]), ("proj", "exp", "r1", "sdk"))
        self.assertEqual(body["params"], {"lr": 0.1, "bad": "NaN"})
        for i in range(10):
            gpuplane.log({"loss": 1.0 / (i + 1), "acc": i})
        gpuplane.log({"weird": float("inf"), "neg": float("-inf"), "n": float("nan")}, step=100)
        gpuplane.log({"after": 1})
        gpuplane.event("checkpoint.saved", "saved", {"path": "/x", "score": float("nan")}, "warning")
        gpuplane.finish()
        s = self.stored(run.id)
        self.assertEqual([st for st, _ in s["loss"]], list(range(10)))
        self.assertEqual(s["weird"], [(100, "Infinity")])
        self.assertEqual(s["neg"], [(100, "-Infinity")])
        self.assertEqual(s["n"], [(100, "NaN")])
        self.assertEqual(s["after"], [(101, 1.0)])
        self.assertEqual(self.api.events[run.id], [{"kind": "checkpoint.saved", "message": "saved", "level": "warning", "data": {"path": "/x", "score": "NaN"}}])
        self.assertEqual(self.api.runs[run.id]["status"], "finished")

    def test_a_batch_whose_answer_was_lost_is_retried_under_its_key(self) -> None:
        self.api.drop_metrics_responses = 2
        run = gpuplane.init("proj")
        for i in range(2000):
            run.log({"loss": float(i)}, step=i)
            if i == 999:
                until("a first batch", lambda: self.api.replays >= 1)
        run.finish()
        steps = [p["step"] for p in self.api.points[run.id]]
        self.assertEqual(sorted(steps), list(range(2000)))
        self.assertGreaterEqual(self.api.replays, 2)
        keys = [k for m, p, k in self.api.requests if p.endswith("/metrics")]
        self.assertEqual(len(keys) - len(set(keys)), self.api.replays)

    def test_503_and_a_down_api_lose_nothing(self) -> None:
        run = gpuplane.init("proj")
        self.api.fail_next = 3
        for i in range(100):
            run.log({"a": i})
        time.sleep(0.3)
        self.api.down = True
        for i in range(100, 300):
            run.log({"a": i})
        time.sleep(0.5)
        self.api.down = False
        run.finish()
        self.assertEqual(sorted(st for st, _ in self.stored(run.id)["a"]), list(range(300)))

    def test_the_buffer_is_bounded_and_drops_the_newest(self) -> None:
        os.environ["GPUPLANE_SDK_MAX_BUFFER"] = "100"
        run = gpuplane.init("proj")
        self.api.down = True
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for i in range(150):
                run.log({"a": i}, step=i)
        full = [x for x in w if "GPUPLANE_SDK_MAX_BUFFER" in str(x.message)]
        self.assertEqual(len(full), 1)
        self.assertEqual(run.dropped, 50)
        self.api.down = False
        run.finish()
        self.assertEqual([st for st, _ in self.stored(run.id)["a"]], list(range(100)))
        ev = self.api.events[run.id]
        self.assertEqual(ev[-1]["kind"], "sdk.points_dropped")
        self.assertEqual(ev[-1]["data"]["dropped_points"], 50)

    def test_an_api_away_at_init_registers_later(self) -> None:
        os.environ["GPUPLANE_SDK_INIT_TIMEOUT_S"] = "0.2"
        self.api.down = True
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            run = gpuplane.init("proj", params={"x": 1})
        self.assertIsNone(run.id)
        run.log({"a": 1})
        time.sleep(0.3)
        self.api.down = False
        run.finish()
        self.assertIsNotNone(run.id)
        self.assertEqual(len(self.api.runs), 1)
        self.assertEqual(self.stored(run.id)["a"], [(0, 1.0)])

    def test_a_bad_project_fails_init(self) -> None:
        self.api.route = lambda *a: (400, {"error": "invalid", "message": "project: bad"}, False)  # type: ignore[method-assign]
        with self.assertRaises(gpuplane.ApiError) as ctx:
            gpuplane.init("bad project")
        self.assertIn("project: bad", str(ctx.exception))

    def test_under_a_job_it_attaches_and_does_not_set_the_status(self) -> None:
        rid = self.api.route("POST", "/api/v1/runs", {"project": "p", "params": {"lr": 1}}, None)[1]["id"]
        os.environ["GPUPLANE_RUN_ID"] = rid
        os.environ["GPUPLANE_PARAMS"] = json.dumps({"lr": 1, "epochs": 3})
        run = gpuplane.init("ignored", params={"batch": 32})
        self.assertTrue(run.attached)
        self.assertEqual(run.id, rid)
        self.assertIsNone(run.resume_from)
        self.assertEqual(run.params, {"lr": 1, "epochs": 3, "batch": 32})
        self.assertEqual(self.api.runs[rid]["params"], {"lr": 1, "batch": 32})
        run.log({"loss": 0.5})
        run.finish("failed")
        self.assertEqual(self.api.runs[rid]["status"], "running")
        self.assertEqual(self.stored(rid)["loss"], [(0, 0.5)])
        self.assertEqual(len(self.api.runs), 1)

    def test_under_a_later_attempt_it_says_what_to_resume_from(self) -> None:
        self.job_run(GPUPLANE_RESUME_FROM="/work/ckpts/step_30.pt")
        self.assertEqual(gpuplane.init("ignored").resume_from, "/work/ckpts/step_30.pt")

    def job_run(self, **env: str) -> str:
        """A job's run in the stub, with GPUPLANE_RUN_ID and `env` set as the agent (and torchrun) would."""
        rid = self.api.route("POST", "/api/v1/runs", {"project": "p"}, None)[1]["id"]
        os.environ.update({"GPUPLANE_RUN_ID": rid, "GPUPLANE_PARAMS": json.dumps({"lr": 1}), **env})
        return rid

    def test_under_a_job_a_rank_above_0_sends_nothing(self) -> None:
        # RANK (torchrun's global rank) decides when set; else GPUPLANE_NODE_RANK (the gang member's).
        for env in ({"GPUPLANE_NODE_RANK": "1"}, {"RANK": "3"}, {"GPUPLANE_NODE_RANK": "0", "RANK": "1"}):
            with self.subTest(env=env), mock.patch.dict(os.environ):
                rid = self.job_run(**env)
                before = len(self.api.requests)
                with warnings.catch_warnings():
                    warnings.simplefilter("error")  # and says nothing about it
                    run = gpuplane.init("ignored", name="rank-n", params={"batch": 32})
                    self.assertTrue(run.muted)
                    self.assertEqual(run.id, rid)
                    self.assertEqual(run.params, {"lr": 1, "batch": 32})
                    for i in range(1000):
                        gpuplane.log({"loss": 1.0 / (i + 1)}, step=i)
                    gpuplane.event("checkpoint.saved", "rank n", {"path": "/x"})
                    t = time.monotonic()
                    gpuplane.finish("failed")
                    self.assertLess(time.monotonic() - t, 0.5)
                time.sleep(0.2)  # a flusher, were there one, would have sent by now
                self.assertEqual(self.api.requests[before:], [])
                self.assertEqual((self.api.points[rid], self.api.events[rid]), ([], []))
                self.assertNotIn("name", self.api.runs[rid])

    def test_under_a_job_rank_0_sends_as_before(self) -> None:
        for env in ({"GPUPLANE_NODE_RANK": "0"}, {"GPUPLANE_NODE_RANK": "1", "RANK": "0"}, {"RANK": "0"}):
            with self.subTest(env=env), mock.patch.dict(os.environ):
                rid = self.job_run(**env)
                run = gpuplane.init(params={"batch": 32})
                self.assertFalse(run.muted)
                gpuplane.log({"loss": 0.5}, step=7)
                gpuplane.finish()
                self.assertEqual(self.stored(rid)["loss"], [(7, 0.5)])
                self.assertEqual(self.api.runs[rid]["params"], {"batch": 32})

    def test_every_rank_sends_when_the_script_asks(self) -> None:
        for how, env in (("all_ranks=True", {}), ("GPUPLANE_LOG_ALL_RANKS=1", {"GPUPLANE_LOG_ALL_RANKS": "1"})):
            with self.subTest(how=how), mock.patch.dict(os.environ):
                rid = self.job_run(RANK="2", GPUPLANE_NODE_RANK="1", **env)
                run = gpuplane.init(all_ranks=True) if not env else gpuplane.init()
                self.assertFalse(run.muted)
                gpuplane.log({"rank2/loss": 0.25}, step=3)
                gpuplane.event("rank.started", "rank 2")
                gpuplane.finish()
                self.assertEqual(self.stored(rid)["rank2/loss"], [(3, 0.25)])
                self.assertEqual(self.api.events[rid][0]["message"], "rank 2")
        # The argument wins over the environment.
        with mock.patch.dict(os.environ):
            self.job_run(RANK="2", GPUPLANE_LOG_ALL_RANKS="1")
            self.assertTrue(gpuplane.init(all_ranks=False).muted)
            os.environ["GPUPLANE_LOG_ALL_RANKS"] = "maybe"
            with self.assertRaisesRegex(ValueError, "GPUPLANE_LOG_ALL_RANKS"):
                gpuplane.init()

    def test_outside_a_job_rank_does_not_matter(self) -> None:
        os.environ.update({"RANK": "1", "GPUPLANE_NODE_RANK": "1"})
        run = gpuplane.init("proj")
        self.assertFalse(run.muted)
        gpuplane.log({"a": 1.0})
        gpuplane.finish()
        self.assertEqual(self.stored(run.id)["a"], [(0, 1.0)])

    def test_heartbeats(self) -> None:
        os.environ["GPUPLANE_SDK_HEARTBEAT_S"] = "0.1"
        run = gpuplane.init("proj")
        until("two heartbeats", lambda: self.api.heartbeats >= 2, 5)
        run.finish()

    def test_steps_and_bad_input(self) -> None:
        run = gpuplane.init("proj")
        with self.assertRaises(ValueError):
            run.log({"a": 1}, step=-1)
        with self.assertRaises(TypeError):
            run.log({"a": 1}, step=1.5)  # type: ignore[arg-type]
        with self.assertRaises(ValueError):
            run.event("Bad Kind", "x")
        with self.assertRaises(ValueError):
            run.finish("done")
        run.log({"a": 1}, step=5)
        run.log({"a": 2})
        run.finish()
        self.assertEqual(self.stored(run.id)["a"], [(5, 1.0), (6, 2.0)])


class AuthTest(unittest.TestCase):
    """The stub wants a bearer token, as the real API does."""

    SECRET = "gpp_stub-secret-0123456789"

    def setUp(self) -> None:
        self.api = StubApi()
        self.api.token = self.SECRET
        self.env = mock.patch.dict(os.environ, {**FAST, "GPUPLANE_API_URL": self.api.url})
        self.env.start()
        for k in ("GPUPLANE_RUN_ID", "GPUPLANE_PARAMS", "GPUPLANE_SDK_MAX_BUFFER", "GPUPLANE_TOKEN"):
            os.environ.pop(k, None)
        self.caught = warnings.catch_warnings(record=True)
        self.warned = self.caught.__enter__()
        warnings.simplefilter("always")

    def tearDown(self) -> None:
        gpuplane.finish(timeout=1)
        self.caught.__exit__(None, None, None)
        self.env.stop()
        self.api.close()
        for w in self.warned:
            self.assertNotIn(self.SECRET, str(w.message))

    def messages(self, part: str) -> list:
        return [str(w.message) for w in self.warned if part in str(w.message)]

    def test_the_token_from_the_environment_goes_on_every_request(self) -> None:
        os.environ["GPUPLANE_TOKEN"] = self.SECRET
        os.environ["GPUPLANE_SDK_HEARTBEAT_S"] = "0.1"
        run = gpuplane.init("proj")
        run.log({"a": 1})
        run.event("x.y", "m")
        until("a heartbeat", lambda: self.api.heartbeats >= 1, 5)
        run.finish()
        self.assertEqual(self.api.runs[run.id]["status"], "finished")
        self.assertEqual(self.api.events[run.id][0]["kind"], "x.y")
        self.assertEqual(set(self.api.auth_headers), {f"Bearer {self.SECRET}"})
        self.assertNotIn(self.SECRET, repr(run))
        self.assertEqual(self.warned, [])

    def test_the_token_argument_wins_over_the_environment_and_is_trimmed(self) -> None:
        os.environ["GPUPLANE_TOKEN"] = "not-this-one"
        run = gpuplane.init("proj", token=f"  {self.SECRET}\n")
        run.log({"a": 1})
        run.finish()
        self.assertEqual(len(self.api.points[run.id]), 1)
        self.assertEqual(set(self.api.auth_headers), {f"Bearer {self.SECRET}"})

    def test_no_token_fails_init_with_a_clear_401(self) -> None:
        with self.assertRaises(gpuplane.ApiError) as ctx:
            gpuplane.init("proj")
        self.assertEqual(ctx.exception.status, 401)
        self.assertIn("HTTP 401: this needs a token", str(ctx.exception))
        self.assertIn("the SDK found no token (token=, GPUPLANE_TOKEN, <home>/token, <home>/admin-token); fix: `gpuctl login --token <token>`", str(ctx.exception))
        self.assertIn("gpuctl token create --name NAME --role member --project proj", str(ctx.exception))
        self.assertEqual(self.api.auth_headers, [None])  # asked once, not retried

    def test_a_wrong_token_fails_init_with_a_clear_401_that_does_not_quote_it(self) -> None:
        with self.assertRaises(gpuplane.ApiError) as ctx:
            gpuplane.init("proj", token="gpp_wrong-secret")
        self.assertEqual(ctx.exception.status, 401)
        self.assertIn("HTTP 401: unknown or revoked token", str(ctx.exception))
        self.assertIn("the token from the token= argument is unknown or revoked; fix: pass a good token=, or drop it and run `gpuctl login --token <token>`", str(ctx.exception))
        self.assertNotIn("gpp_wrong-secret", str(ctx.exception))
        self.assertEqual(len(self.api.requests), 1)
        self.assertEqual(self.warned, [])

    def test_a_403_at_init_raises(self) -> None:
        self.api.forbid = "/runs"
        with self.assertRaises(gpuplane.ApiError) as ctx:
            gpuplane.init("proj", token=self.SECRET)
        self.assertEqual(ctx.exception.status, 403)
        self.assertIn("HTTP 403: stub forbids this", str(ctx.exception))
        self.assertIn("may not write project 'proj'; fix: an admin makes one with `gpuctl token create --name NAME --role member --project proj`", str(ctx.exception))

    def test_a_token_that_cannot_be_a_header_is_refused_without_quoting_it(self) -> None:
        with self.assertRaises(ValueError) as ctx:
            gpuplane.init("proj", token="gpp_half one")
        self.assertNotIn("gpp_half", str(ctx.exception))
        self.assertIn("GPUPLANE_TOKEN", str(ctx.exception))
        self.assertEqual(self.api.requests, [])

    def test_a_token_revoked_mid_run_stops_sending_with_one_warning(self) -> None:
        run = gpuplane.init("proj", token=self.SECRET)
        run.log({"a": 1})
        until("the first point", lambda: self.api.points[run.id])
        self.api.token = "rotated"
        for i in range(100):
            run.log({"a": i})
        until("the warning", lambda: self.messages("refused the SDK's token"))
        sent = len(self.api.requests)
        for i in range(100):
            run.log({"a": i})  # the training script goes on: no exception
        run.event("x.y", "m")
        time.sleep(0.3)
        run.finish(timeout=5)
        self.assertEqual(len(self.api.requests), sent)  # no retries, no finish call
        [msg] = self.messages("refused the SDK's token")
        self.assertIn("HTTP 401: unknown or revoked token", msg)
        self.assertIn("nothing more is sent", msg)
        self.assertEqual(run.rejected, 100)
        self.assertEqual(len(self.api.points[run.id]), 1)

    def test_a_403_mid_run_stops_sending_too(self) -> None:
        os.environ["GPUPLANE_TOKEN"] = self.SECRET
        self.api.forbid = "/metrics"
        run = gpuplane.init("proj")
        for i in range(10):
            run.log({"a": i})
        until("the warning", lambda: self.messages("refused the SDK's token"))
        run.finish(timeout=5)
        [msg] = self.messages("refused the SDK's token")
        self.assertIn("HTTP 403: stub forbids this", msg)
        self.assertEqual([m for m, p, k in self.api.requests if p.endswith("/metrics")], ["POST"])
        self.assertFalse(any(p.endswith("/finish") for m, p, k in self.api.requests))


class ExitTest(unittest.TestCase):
    """atexit and sys.excepthook, in a child interpreter."""

    def run_script(self, api: StubApi, body: str) -> subprocess.CompletedProcess:
        env = {**os.environ, **FAST, "GPUPLANE_API_URL": api.url, "PYTHONPATH": os.path.dirname(HERE)}
        env.pop("GPUPLANE_RUN_ID", None)
        return subprocess.run([sys.executable, "-c", "import gpuplane\n" + body], env=env, capture_output=True, text=True, timeout=60)

    def test_exit_finishes_and_an_uncaught_exception_fails(self) -> None:
        api = StubApi()
        try:
            ok = self.run_script(api, "r = gpuplane.init('p', name='ok')\nfor i in range(50): gpuplane.log({'a': i})\n")
            self.assertEqual(ok.returncode, 0, ok.stderr)
            bad = self.run_script(api, "r = gpuplane.init('p', name='bad')\ngpuplane.log({'a': 1})\nraise RuntimeError('boom')\n")
            self.assertNotEqual(bad.returncode, 0)
            self.assertIn("RuntimeError: boom", bad.stderr)
            intr = self.run_script(api, "r = gpuplane.init('p', name='ctrl-c')\nraise KeyboardInterrupt\n")
            self.assertNotEqual(intr.returncode, 0)
            by_name = {r["name"]: r for r in api.runs.values()}
            self.assertEqual(by_name["ctrl-c"]["status"], "cancelled")
            self.assertEqual(by_name["ok"]["status"], "finished")
            self.assertEqual(len(api.points[by_name["ok"]["id"]]), 50)
            self.assertEqual(by_name["bad"]["status"], "failed")
            self.assertEqual(len(api.points[by_name["bad"]["id"]]), 1)
            self.assertEqual(api.events[by_name["bad"]["id"]][0]["kind"], "sdk.exception")
        finally:
            api.close()


def read_jsonl(path: str) -> list:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class LookupTest(unittest.TestCase):
    """The API address and token come from where gpuctl finds them, in gpuctl's order."""

    GOOD = "gpt_" + "a" * 43
    OTHER = "gpt_" + "b" * 43

    def setUp(self) -> None:
        self.home = tempfile.mkdtemp(prefix="gpuplane-sdk-lookup-")
        self.env = mock.patch.dict(os.environ, {**FAST, "GPUPLANE_HOME": self.home})
        self.env.start()
        for k in ("GPUPLANE_RUN_ID", "GPUPLANE_TOKEN", "GPUPLANE_API_URL", "GPUPLANE_API_HOST", "GPUPLANE_API_PORT"):
            os.environ.pop(k, None)

    def tearDown(self) -> None:
        self.env.stop()

    def write(self, name: str, text: str) -> None:
        with open(os.path.join(self.home, name), "w") as f:
            f.write(text + "\n")

    def test_order(self) -> None:
        from gpuplane._creds import find

        self.assertEqual(find(None, None, False), ("http://127.0.0.1:8787", "default", None, None))
        os.environ["GPUPLANE_API_PORT"] = "9999"
        self.assertEqual(find(None, None, False).api_url, "http://127.0.0.1:9999")
        self.write("admin-token", self.OTHER)
        self.assertEqual(find(None, None, False)[2:], (self.OTHER, os.path.join(self.home, "admin-token")))
        self.write("token", self.GOOD)
        self.write("api-url", "http://10.0.0.5:8787")
        f = find(None, None, False)
        self.assertEqual(f, ("http://10.0.0.5:8787", os.path.join(self.home, "api-url"), self.GOOD, os.path.join(self.home, "token")))
        os.environ["GPUPLANE_API_URL"] = "http://env:1"
        os.environ["GPUPLANE_TOKEN"] = "gpt_env"
        self.assertEqual(find(None, None, False), ("http://env:1", "GPUPLANE_API_URL", "gpt_env", "GPUPLANE_TOKEN"))
        self.assertEqual(find("http://arg:2", "gpt_arg", False), ("http://arg:2", "api_url=", "gpt_arg", "token="))
        # Under a job the home is not read.
        del os.environ["GPUPLANE_TOKEN"], os.environ["GPUPLANE_API_URL"]
        self.assertEqual(find(None, None, True), ("http://127.0.0.1:9999", "default", None, None))


class OfflineTest(unittest.TestCase):
    def setUp(self) -> None:
        self.home = tempfile.mkdtemp(prefix="gpuplane-sdk-offline-")
        self.api = StubApi()
        self.env = mock.patch.dict(os.environ, {**FAST, "GPUPLANE_HOME": self.home, "GPUPLANE_API_URL": self.api.url, "GPUPLANE_SDK_FLUSH_TIMEOUT_S": "1"})
        self.env.start()
        for k in ("GPUPLANE_RUN_ID", "GPUPLANE_TOKEN", "GPUPLANE_MODE", "GPUPLANE_SDK_MAX_BUFFER"):
            os.environ.pop(k, None)
        self.stderr = mock.patch("sys.stderr", new_callable=__import__("io").StringIO)
        self.err = self.stderr.start()

    def tearDown(self) -> None:
        gpuplane.finish(timeout=1)
        self.stderr.stop()
        self.env.stop()
        self.api.close()

    def test_offline_mode_writes_only_the_file(self) -> None:
        run = gpuplane.init("proj", "exp", "off", {"lr": 0.1}, mode="offline")
        for i in range(3):
            run.log({"loss": 1.0 / (i + 1), "n": float("nan")}, step=i)
        run.event("eval.done", "top-1", {"top1": 0.5})
        run.finish("failed")
        self.assertEqual(self.api.requests, [])
        self.assertIsNone(run.id)
        path = run.offline_file
        self.assertTrue(path.startswith(os.path.join(self.home, "offline-runs") + os.sep))
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        lines = read_jsonl(path)
        self.assertEqual(lines[0]["type"], "run")
        self.assertEqual((lines[0]["id"], lines[0]["project"], lines[0]["experiment"], lines[0]["name"], lines[0]["status"]), (run.local_id, "proj", "exp", "off", "failed"))
        self.assertEqual(lines[0]["params"], {"lr": 0.1})
        self.assertIsInstance(lines[0]["ended_at"], int)
        metrics = [(x["key"], x["step"], x["value"]) for x in lines if x["type"] == "metric"]
        self.assertEqual(metrics, [("loss", 0, 1.0), ("n", 0, "NaN"), ("loss", 1, 0.5), ("n", 1, "NaN"), ("loss", 2, 1.0 / 3), ("n", 2, "NaN")])
        ev = [x for x in lines if x["type"] == "event"]
        self.assertEqual([(e["kind"], e["message"], e["data"]) for e in ev], [("eval.done", "top-1", {"top1": 0.5})])
        self.assertIn(f"gpuctl --api {self.api.url} import-run {path}", self.err.getvalue())  # GPUPLANE_API_URL was set

    def test_an_api_away_for_the_whole_run_leaves_the_run_in_a_file(self) -> None:
        os.environ["GPUPLANE_SDK_INIT_TIMEOUT_S"] = "0.2"
        self.api.down = True
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            run = gpuplane.init("proj", name="down")
            for i in range(50):
                run.log({"a": i}, step=i)
            run.finish()
        lines = read_jsonl(run.offline_file)
        self.assertEqual((lines[0]["id"], lines[0]["status"]), (run.local_id, "finished"))
        self.assertEqual([x["step"] for x in lines if x["type"] == "metric"], list(range(50)))
        out = self.err.getvalue()
        self.assertIn("could not be reached: the run (50 points, 0 events) was written to", out)
        self.assertIn(f"gpuctl --api {self.api.url} import-run {run.offline_file}", out)

    def test_a_full_buffer_while_the_api_is_away_spills_to_the_file_instead_of_dropping(self) -> None:
        os.environ["GPUPLANE_SDK_MAX_BUFFER"] = "100"
        run = gpuplane.init("proj", name="spill")
        self.api.down = True
        run.log({"a": 0}, step=0)
        until("a failed flush", lambda: run._failing)
        for i in range(1, 1000):
            run.log({"a": i}, step=i)
            if i % 50 == 0:
                time.sleep(0.02)  # a training step: the flusher gets its turn
        self.assertEqual(run.dropped, 0)
        self.api.down = False
        run.finish()
        live = [p["step"] for p in self.api.points[run.id] if p["key"] == "a"]
        spilled = [x["step"] for x in read_jsonl(run.offline_file) if x["type"] == "metric"]
        self.assertGreater(len(spilled), 0)
        self.assertEqual(sorted(live + spilled), list(range(1000)))
        out = self.err.getvalue()
        self.assertIn("is away and 100 points wait (GPUPLANE_SDK_MAX_BUFFER)", out)
        self.assertIn(f"was away during the run: part of it ({len(spilled)} points, 1 events) is only in", out)

    def test_an_api_that_goes_away_mid_run_leaves_the_rest_in_a_file_of_the_same_run(self) -> None:
        run = gpuplane.init("proj", name="mid")
        for i in range(10):
            run.log({"a": i}, step=i)
        until("the first points", lambda: len(self.api.points.get(run.id, [])) == 10)
        self.assertEqual(self.api.runs[run.id]["external_key"], f"jsonl:{run.local_id}")
        self.api.down = True
        for i in range(10, 30):
            run.log({"a": i}, step=i)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            run.finish()
        lines = read_jsonl(run.offline_file)
        self.assertEqual(lines[0]["id"], run.local_id)  # the importer finds the run by jsonl:<id>
        self.assertEqual([x["step"] for x in lines if x["type"] == "metric"], list(range(10, 30)))
        self.assertEqual([x["kind"] for x in lines if x["type"] == "event"], ["sdk.offline"])
        self.assertIn(f"what run {run.id} had not stored (20 points, 1 events) was written to", self.err.getvalue())


if __name__ == "__main__":
    unittest.main()
