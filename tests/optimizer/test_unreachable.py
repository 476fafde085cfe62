"""Queries no description reaches: after two rounds, the should-trigger queries no round
triggered and the should-not ones every round triggered are named apart, with their rates,
and the proposer is told not to chase them."""

from __future__ import annotations

from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome
from pytest_skilltrigger.model.verdict import FixedRule
from pytest_skilltrigger.optimizer.proposer import PromptInputs, build_prompt
from pytest_skilltrigger.optimizer.unreachable import unreachable


def result(query: str, should: bool, triggers: int, runs: int = 6) -> QueryResult:
    hit, miss = RunOutcome("triggered"), RunOutcome("not_triggered")
    return QueryResult(
        query, should, FixedRule(runs, 0.5), (hit,) * triggers + (miss,) * (runs - triggers)
    )


FLUENT = "what is 2 + 2"  # should trigger, and the model just answers: never triggers
GREEDY = "open the pdf viewer"  # should not, and every description takes it
FINE = "merge these pdfs"


def rounds(*triggers_of_fine: int) -> list[list[QueryResult]]:
    return [
        [result(FLUENT, True, 0), result(GREEDY, False, 6), result(FINE, True, t)]
        for t in triggers_of_fine
    ]


def test_a_query_no_round_got_right_is_unreachable_with_its_rates() -> None:
    found = unreachable(rounds(2, 6, 5))
    assert [(u.query, u.should_trigger) for u in found] == [(FLUENT, True), (GREEDY, False)]
    assert found[0].counts == ((0, 6),) * 3 and found[1].counts == ((6, 6),) * 3
    assert "never did" in found[0].text() and "always did" in found[1].text()
    assert "95% interval 0.00–0.18" in found[0].text()  # every rate with its interval


def test_one_round_calls_nothing_unreachable() -> None:
    assert unreachable(rounds(3)) == ()


def test_the_proposer_is_told_not_to_chase_them() -> None:
    train = rounds(2)[0]
    prompt = build_prompt(
        PromptInputs("pdf-tools", "---\n---\n", "Merge PDFs.", train, unreachable=(FLUENT,))
    )
    chased, apart = prompt.split("Do not chase them:")
    assert FLUENT not in chased and FINE in chased
    assert FLUENT in apart


def test_a_should_not_query_that_did_not_always_trigger_is_reachable() -> None:
    """ "Always did" is every run, as "never did" is no run: a should-not query judged
    triggered at 4 of 6 in each round is not named (a description might still win it)."""
    mostly = [[result(GREEDY, False, 4)] for _ in range(3)]
    assert unreachable(mostly) == ()
