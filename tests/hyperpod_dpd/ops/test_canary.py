"""The canary's checks count only the lines that can be the smoke's own when other clients use the endpoint."""

from __future__ import annotations

import pytest

from hyperpod_dpd.ops.canary import CanaryLogs, SentPrompts, canary_checks
from hyperpod_dpd.ops.checks import Check

LONG_TOKENS = 4871  # the long prompt's prompt_tokens, as the usage event reported it
PROMPTS = SentPrompts(long=2, short=1, long_tokens=LONG_TOKENS)  # three requests: short, long, long again


def decision(estimate: int, disaggregate: bool) -> str:
    """The router's decision line as the DPD documentation quotes it."""
    return f"[INFO] Conditional routing: estimated_tokens={estimate}, threshold=4096, disaggregate={disaggregate}\n"


def retrieved(n: int, m: int, total: int | None = None, *, ranks: int = 2, req: str = "cmpl-1") -> str:
    """LMCache 0.4.3's retrieve line on the decoder, one per TP rank."""
    total = m if total is None else total
    return "".join(f"[Worker_TP{r}] [LMCache INFO] [req_id={req}] Retrieved {n} out of {m} required tokens (from "
                   f"{total} total tokens). size: 0.1900 gb, cost 1.2000 ms, throughput: 158.3 GB/s;\n"
                   for r in range(ranks))


OURS_ROUTED = decision(11, False) + decision(5400, True) * 2  # the smoke's own decisions on a healthy endpoint
FOREIGN_DPD = decision(9000, True) + decision(12000, True) + decision(7000, True)
FOREIGN_HITS = retrieved(8123, 8123, req="cmpl-a") + retrieved(11002, 11002, req="cmpl-b")


def checks(router: str | None, decoder: str | None, prompts: SentPrompts = PROMPTS) -> dict[str, Check]:
    found = canary_checks(CanaryLogs(router=router, decoder=decoder), first="same", second="same", prompts=prompts)
    return {c.name: c for c in found}


def test_other_clients_dpd_decisions_do_not_pass_the_smokes_fallback() -> None:
    # GIVEN the smoke's long prompts both took the fallback path while other clients' long prompts disaggregated
    # (as many DPD decisions as the smoke sent long prompts, and more), their KV loaded on the decoder
    router = decision(11, False) + decision(3900, False) * 2 + FOREIGN_DPD
    # WHEN the canary reads the logs
    result = checks(router, FOREIGN_HITS)
    # THEN neither check passes: the lines cannot be the smoke's, and the rows say why
    routing, decoder = result["canary:routing"], result["canary:decoder-kv"]
    assert routing.status == "warn" and decoder.status == "warn"
    assert "other traffic during the smoke: 6 decisions for 3 prompts, cannot attribute" in routing.detail
    assert "other traffic during the smoke: 6 decisions for 3 prompts, cannot attribute" in decoder.detail
    assert f"no line of the long prompt's {LONG_TOKENS} tokens" in decoder.detail


def test_other_clients_kv_hits_do_not_pass_the_smokes_recompute() -> None:
    # GIVEN other clients' prompts loaded their KV, and the decoder recomputed the smoke's long prompt
    router = OURS_ROUTED + FOREIGN_DPD
    decoder = FOREIGN_HITS + retrieved(0, LONG_TOKENS, req="cmpl-ours")
    # WHEN the canary reads the logs, THEN the smoke's own 'Retrieved 0' line fails the row with its cause
    row = checks(router, decoder)["canary:decoder-kv"]
    assert row.status == "fail" and "PYTHONHASHSEED" in (row.cause or "")
    assert f"'Retrieved 0 out of {LONG_TOKENS} required tokens' for the long prompt's {LONG_TOKENS}" in row.detail
    # and without the long prompt's token count (no usage event) the lines cannot be told apart: not a pass either
    unknown = checks(router, decoder, SentPrompts(long=2, short=1))["canary:decoder-kv"]
    assert unknown.status == "warn" and "carried no prompt_tokens" in unknown.detail


def test_the_smokes_own_lines_among_other_traffic_pass() -> None:
    # GIVEN other clients' decisions and KV hits around the smoke's own, whose total is the long prompt's length
    # (the second run finds most of the prompt in vLLM's prefix cache: fewer required tokens, the same total)
    router = OURS_ROUTED + FOREIGN_DPD + decision(40, False)
    decoder = FOREIGN_HITS + retrieved(LONG_TOKENS, LONG_TOKENS) + retrieved(263, 263, LONG_TOKENS)
    # WHEN the canary reads the logs
    result = checks(router, decoder)
    # THEN the decoder row passes on the smoke's own hit, and the routing row on it too (only a disaggregated
    # prompt's KV reaches the decoder)
    routing, kv = result["canary:routing"], result["canary:decoder-kv"]
    assert kv.status == "pass" and "hit for the long prompt" in kv.detail and "7 decisions for 3 prompts" in kv.detail
    assert routing.status == "pass" and f"the long prompt's {LONG_TOKENS} tokens" in routing.detail


def test_other_traffic_that_failed_keeps_the_smokes_own_hit_from_passing() -> None:
    # GIVEN the smoke's long prompt loaded its KV, and another client's prompt was recomputed meanwhile
    decoder = retrieved(LONG_TOKENS, LONG_TOKENS) + retrieved(0, 9000, req="cmpl-b")
    # WHEN the canary reads the logs, THEN the row warns (the recompute cannot be attributed, nor ignored)
    row = checks(OURS_ROUTED + FOREIGN_DPD, decoder)["canary:decoder-kv"]
    assert row.status == "warn" and "the other lines hold 2 'Retrieved 0'" in row.detail  # one line per TP rank
    assert "PYTHONHASHSEED" in (row.cause or "")


def test_failures_that_prove_themselves_still_fail_among_other_traffic() -> None:
    # GIVEN other clients' traffic, fewer DPD decisions than the smoke sent long prompts, and no KV loaded at all
    router = decision(11, False) + decision(3900, False) * 2 + decision(8000, True) + decision(20, False)
    result = checks(router, "[LMCache INFO] nothing retrieved\n")
    # THEN both fail: the DPD lines include the smoke's, and no line at all cannot be someone else's
    routing, kv = result["canary:routing"], result["canary:decoder-kv"]
    assert routing.status == "fail" and "fewer decisions disaggregated" in routing.detail
    assert kv.status == "fail" and "no 'Retrieved N out of M' line" in kv.detail


IDLE = [
    ("healthy", OURS_ROUTED, retrieved(6035, 6035), "pass", "pass"),
    # an idle endpoint counts every line as before, a hit of another length included
    ("partial-hit", OURS_ROUTED, retrieved(4608, 4608), "pass", "pass"),
    ("fallback", decision(11, False) + decision(3900, False) * 2, "", "fail", "fail"),
    ("recompute", OURS_ROUTED, retrieved(6035, 6035) + retrieved(0, 6035), "pass", "fail"),
    ("buffer-full", OURS_ROUTED, retrieved(6035, 6035) + "Failed to allocate memory object, retrying...\n", "pass",
     "fail"),
    ("no-decision", "", retrieved(6035, 6035), "fail", "pass"),
]


@pytest.mark.parametrize(("case", "router", "decoder", "routing", "kv"), IDLE, ids=[c[0] for c in IDLE])
def test_an_idle_endpoint_passes_and_fails_as_before(case: str, router: str, decoder: str, routing: str,
                                                     kv: str) -> None:
    # GIVEN no more router decisions than the smoke sent prompts: every line is the smoke's
    # WHEN the canary reads the logs (with or without the long prompt's token count)
    for prompts in (PROMPTS, SentPrompts(long=2, short=1)):
        result = checks(router, decoder, prompts)
        # THEN the rows are what they were before lines were attributed
        assert (result["canary:routing"].status, result["canary:decoder-kv"].status) == (routing, kv), case
        assert "other traffic" not in result["canary:routing"].detail + result["canary:decoder-kv"].detail


def test_without_the_routers_log_other_lengths_on_the_decoder_show_other_traffic() -> None:
    # GIVEN no router pod to read and decoder lines of other prompts' lengths
    result = checks(None, FOREIGN_HITS)
    # THEN the routing row warns as before, and the decoder row does not pass on the other prompts' hits
    assert result["canary:routing"].status == "warn" and result["canary:decoder-kv"].status == "warn"
    assert "4 'Retrieved' line(s) of prompts other than" in result["canary:decoder-kv"].detail
    # and the smoke's own hit among them passes
    assert checks(None, FOREIGN_HITS + retrieved(LONG_TOKENS, LONG_TOKENS))["canary:decoder-kv"].status == "pass"
