"""Every causal-LM, encoder-decoder and speech-to-text class transformers registers
(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES), built tiny from its own config class (tests/models/zoo.py:
a shrinker over the config's fields, seeded), saved with a small tokenizer (and a speech model's own
feature extractor), exported by `python -m tandem export DIR`, and its greedy generation compared
with transformers' generate, natively and in wasm. A class passes, or is a row of docs/models.md's table
with the stage it fails at and why; the test holds the table to what happens (a listed class that
passes fails the test too, so the table and the pass rate stay true).

The README's test command runs a sample of SAMPLE causal-LM and SAMPLE_SEQ2SEQ other classes, a different one each run: the seed is in
the tests' ids and pytest's header (TANDEM_ZOO_SEED=N repeats a run). `npm run test:zoo`
(TANDEM_ZOO=all) walks every class."""

import os
import re

import pytest

from conftest import ROOT, zoo_seed

transformers = pytest.importorskip("transformers")

from models import zoo  # noqa: E402

SAMPLE = 4
SAMPLE_SEQ2SEQ = 2
DOC = ROOT / "docs" / "models.md"


def refused() -> dict:
    """docs/models.md's table: {class: (stage, why)}."""
    rows = {}
    for line in DOC.read_text().splitlines():
        m = re.fullmatch(r"\| `(\w+)` \| (\w+) \| (.*) \|", line.strip())
        if m:
            rows[m[1]] = (m[2], m[3])
    return rows


CAUSAL = zoo.causal_lm_classes()
SEQ2SEQ = zoo.seq2seq_classes()
CLASSES = CAUSAL + SEQ2SEQ
SEED = zoo_seed()
WALKED = CLASSES if os.environ.get("TANDEM_ZOO") == "all" else zoo.sample(CAUSAL, SEED, SAMPLE) + zoo.sample(SEQ2SEQ, SEED, SAMPLE_SEQ2SEQ)


def test_the_tables_list_registered_classes_once_with_a_stage_and_the_pass_rates():
    rows = refused()
    assert rows and set(rows) <= set(CLASSES), sorted(set(rows) - set(CLASSES))
    assert {stage for stage, _ in rows.values()} <= {"build", "export", "native", "wasm", "unknown"}
    text = DOC.read_text()
    names = re.findall(r"^\| `(\w+)` \|", text, flags=re.M)
    assert len(names) == len(set(names))
    for classes, what in ((CAUSAL, "causal-LM classes"), (SEQ2SEQ, "encoder-decoder and speech-to-text classes")):
        passed = len(classes) - len(set(rows) & set(classes))
        assert f"{passed} of the {len(classes)} {what}" in text


@pytest.mark.parametrize("name", WALKED, ids=[f"{n}-seed{SEED}" for n in WALKED])
def test_a_registered_class_exports_and_generates_as_transformers(name, tmp_path, wasm_lib):
    listed = refused().get(name)
    if listed is not None and listed[0] == "unknown":  # a row the last full walk did not settle
        pytest.skip(f"{name}: {listed[1]} (walk it with `npm run test:zoo -- -k {name}` and put its result in docs/models.md)")
    result = zoo.walk(name, tmp_path, wasm_lib)
    if listed is None:
        assert result is None, f"{name} fails at {result[0]}: {result[1]} (list it in docs/models.md with why, or fix it)"
    else:
        assert result is not None, f"{name} passes now: remove its row from docs/models.md and update the pass rate"
        assert result[0] == listed[0], f"{name} now fails at {result[0]} ({result[1]}), the table says {listed[0]}"
