"""Differential testing at scale: random stateful programs (tests/programs.py) exported and run in
the native runtime against eager over a random call sequence; with TANDEM_PROGRAM_FIXTURES set
(npm test sets it) each is recorded for the wasm replays of tests/js/random-programs.test.js (1 and 2
threads, a worker, SIMD128 and relaxed SIMD). `npm run fuzz:programs` runs thousands more seeds.

A failure prints the plan shrunk to a minimal one; every seed that found a bug stays in REGRESSIONS."""

import os
from pathlib import Path

import pytest

import programs

COUNT = int(os.environ.get("TANDEM_PROGRAMS", "120"))

# Seeds that found bugs (each fixed): kept whatever COUNT is.
REGRESSIONS = [
    29,  # torch.roll on a state: its decomposition's aten.fmod was unsupported
    6,  # a forward(*xs) with dynamic_shapes: the specs were not grouped for *xs
    7,  # a Python bool negated each call (flag = not flag): refused as neither added to nor set
    2,  # a submodule held by two parents, its buffer changed through one: the buffer was two inputs of the graph
]


def _record(plan, program: bytes) -> None:
    out = os.environ.get("TANDEM_PROGRAM_FIXTURES")
    if out:
        programs.record(plan, program, Path(out))


@pytest.mark.parametrize("seed", sorted(set(range(COUNT)) | set(REGRESSIONS)))
def test_random_program_matches_eager(seed):
    plan = programs.make_plan(seed)
    calls = programs.call_sequence(plan)
    programs.eager_trace(plan, calls)  # the generator's own check: eager runs every plan it makes
    try:
        program = programs.check_plan(plan, calls)
    except Exception as e:  # noqa: BLE001 - shrink whatever failed, then fail with both
        small = programs.shrink(plan, budget=60)
        raise AssertionError(f"seed {seed}: {type(e).__name__}: {e}\nminimal plan: {small}") from e
    _record(plan, program)


def test_shrink_reduces_a_failing_plan_to_its_cause():
    """The shrinker against a planted failure: a check that fails whenever a plan has a 'softmax'
    step must come back with one method holding one softmax step."""
    plan = None
    for seed in range(200):
        p = programs.make_plan(seed)
        if sum(st["op"] == "softmax" for m in p["methods"] for st in m["steps"]) and len(p["methods"]) > 1:
            plan = p
            break
    assert plan is not None

    def fails(p):
        return "ValueError: softmax" if any(st["op"] == "softmax" for m in p["methods"] for st in m["steps"]) else None

    small = programs.shrink(plan, fails=fails)
    assert len(small["methods"]) == 1
    assert [st["op"] for st in small["methods"][0]["steps"]] == ["softmax"]
    assert small["methods"][0]["outputs"] == [] and small["d"] == 1
