"""minilm/course/expected.pt, the reference's outputs the visible checks compare with, is exactly what
`minilm expected` makes from the reference now (like test_stubs for the stubs)."""

from __future__ import annotations

import contextlib

import torch

from minilm.course import checks, tasks
from solutions import expected, mistakes

# 48 checks and ~370 named mistakes' outputs (notebook 13's whole-model logits are the largest, ~135 kB;
# notebook 15's 64 small tensors ~56 kB, mostly per-tensor overhead): small beside the notebooks, and a
# drift here means a check stores far more than it compares.
MAX_BYTES = 768 * 1024


@contextlib.contextmanager
def threads(n: int):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def only(data: dict, task_ids: list[str]) -> dict:
    return {**data, "tasks": {t: data["tasks"][t] for t in task_ids}}


def test_stored_expectations_match_the_reference():
    # One thread here; the stored file was made on another machine with all its cores.
    with threads(1):
        problems = expected.differences(expected.generate(), expected.load())
    assert not problems, "regenerate with `minilm expected`:\n  " + "\n  ".join(problems[:30])


# The largest forwards (whole models, a cache, quantized logits, notebook 13's ablation models).
HEAVY = ["8.1", "11.3", "12.3", "13.6"]


def test_thread_counts_do_not_count_as_drift():
    with threads(1):
        one = expected.generate(HEAVY)
    with threads(2):
        two = expected.generate(HEAVY)
    assert expected.differences(one, two) == []
    assert expected.differences(two, only(expected.load(), HEAVY)) == []


def test_a_reference_changed_by_a_mutant_fails_the_drift_test():
    # GELU's tanh approximation moves 13.3's outputs by 7.9e-5 of their scale: the subtlest
    # change of the reference the drift tolerance must still see (what one mutant is worth).
    stored = only(expected.load(), ["13.3"])
    assert expected.differences(expected.generate(["13.3"]), stored) == []
    with mistakes.applied(expected.variant("13.3", "gelu_tanh")):
        changed = expected.generate(["13.3"])
    assert any("13.3 want" in p for p in expected.differences(changed, stored))


def test_the_file_is_small_plain_data():
    assert expected.PATH.stat().st_size < MAX_BYTES
    data = expected.load()  # weights_only=True: tensors, str and dicts, no code
    assert set(data["tasks"]) == set(checks.registered())


# Named by invariants (consecutive windows, a shared weight, a non-finite loss): nothing stored.
# Named by invariants (consecutive windows, the starts drawn, a shared weight, a non-finite loss;
# a scale's shape, a −128, state_dict names, a changed embedding) or by the error they raise: nothing stored.
NAMED_BY_INVARIANTS = {"targets_not_shifted", "last_start_never_drawn", "tied_lm_head", "no_logsumexp",
                       "scale_per_column", "range_128", "not_buffers", "keeps_float_weight",
                       "lm_head_left_float", "top_level_only", "quantizes_every_weight", "rope_table_one_short"}
# Notebook 13: a missing bias or final norm, an extra final norm (state_dict keys), a copied head (not the same
# Parameter).
NAMED_BY_INVARIANTS |= {"layer_norm_no_bias", "classic_missing_final_norm", "final_norm_in_post_norm",
                        "head_copied_not_shared"}
# Notebook 14: the parameter groups are names, judged by the invariant.
NAMED_BY_INVARIANTS |= {"muon_on_embeddings", "muon_on_head", "decay_on_gains", "decay_on_embeddings"}
# Notebook 15: the hooks left on the model and the grad kept are counts and a flag, judged by the invariant.
NAMED_BY_INVARIANTS |= {"inputs_hooks_never_removed", "inputs_hooks_left_when_raising", "inputs_keep_grad"}


def test_every_catalogued_mistake_has_stored_outputs_for_its_task():
    data = expected.load()["tasks"]
    for m in mistakes.all_mutants():
        if m["name"] not in NAMED_BY_INVARIANTS and not m.get("raises") and not m["broken"]:
            labels = {label.split(" ")[0] for label in data[m["task"]]["mistakes"]}
            assert m["name"] in labels, m["name"]


def test_a_drifted_output_is_found():
    fresh = expected.generate()
    stored = expected.load()
    key = next(iter(stored["tasks"]["3.1"]["want"]))
    stored["tasks"]["3.1"]["want"][key] = stored["tasks"]["3.1"]["want"][key] + 1e-3
    assert any(key in p for p in expected.differences(fresh, stored))
    assert tasks.COURSE_DIR / "expected.pt" == expected.PATH
