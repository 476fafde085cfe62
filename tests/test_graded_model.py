"""The stand-in model the benchmarks measure against: known rates spread over (0, 1), fresh
draws that follow them, and an improve model that reads the prompt's failures."""

from __future__ import annotations

import json
import urllib.request

from tests.fake_messages_api import FakeMessagesAPI, parse_listing
from tests.graded_model import NOT_FOR, GradedModel

DESCRIPTION = "Merge, split and rotate PDF documents and their pages."
RELATED = [f"merge the {n} PDF documents for report {n}" for n in range(200)]


def test_related_requests_spread_over_the_whole_range() -> None:
    model = GradedModel(seed=1)
    rates = [model.rate(q, "pdf", DESCRIPTION) for q in RELATED]
    assert min(rates) < 0.1 and max(rates) > 0.9
    assert 0.25 < sum(r < 0.5 for r in rates) / len(rates) < 0.75
    unrelated = model.rate("bake a loaf of sourdough bread", "pdf", DESCRIPTION)
    assert unrelated < 0.05
    assert GradedModel(seed=2).rate(RELATED[0], "pdf", DESCRIPTION) != rates[0]


def test_first_choices_add_up_and_draws_follow_them() -> None:
    model = GradedModel(seed=3)
    listing = [("pdf", DESCRIPTION), ("pages", "Count and number the pages of documents.")]
    query = RELATED[5]
    rates = model.first_choice_rates(query, listing)
    assert 0 < sum(rates.values()) <= 1
    n = 4000
    drawn = [model.choose(query, listing) for _ in range(n)]
    for name, p in rates.items():
        assert abs(drawn.count(name) / n - p) < 0.03, (name, p)


def test_the_improve_model_reads_the_failures_of_the_prompt() -> None:
    model = GradedModel(seed=4)
    missed, wrong = "stitch invoices together into one file", "rotate a photo of my cat"
    prompt = (
        f"<current_description>\n{DESCRIPTION}\n</current_description>\n\n"
        "Requests that SHOULD have used the skill but did not:\n"
        f"- {missed!r}: triggered 0/5 times; the assistant used a plain answer x5 instead\n\n"
        "Requests that should NOT have used the skill but did:\n"
        f"- {wrong!r}: triggered 5/5 times\n\n"
        "Write 3 different descriptions."
    )
    written = model.improve(prompt)
    assert len(written) == 3 and len(set(written)) > 1
    best = written[0]
    assert "invoices" in best and NOT_FOR in best and "photo" in best.split(NOT_FOR)[1]
    assert model.rate(missed, "pdf", best) > model.rate(missed, "pdf", DESCRIPTION)
    assert model.rate(wrong, "pdf", best) < model.rate(wrong, "pdf", DESCRIPTION)


def test_the_fake_answers_with_graded_draws_and_reading_proposals() -> None:
    with FakeMessagesAPI(awkward=False) as api:
        api.graded = GradedModel(seed=5)
        listing = f"- pdf: {DESCRIPTION}"
        body = {
            "model": "m",
            "max_tokens": 64,
            "tools": [{"name": "Skill"}],
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": listing},
                        {"type": "text", "text": RELATED[9]},
                    ],
                }
            ],
        }
        chosen = [_post(api, body)["content"][-1] for _ in range(60)]
        skills = sum(1 for block in chosen if block.get("name") == "Skill")
        p = api.graded.first_choice_rates(RELATED[9], parse_listing(body))["pdf"]
        assert abs(skills / 60 - p) < 0.25
        ask = {
            "model": "m",
            "max_tokens": 64,
            "messages": [
                {
                    "role": "user",
                    "content": f"<current_description>{DESCRIPTION}</current_description>"
                    " Requests that SHOULD"
                    " have used the skill but did not:\n- 'stitch invoices': x\nAnswer inside "
                    "<new_description></new_description> tags.",
                }
            ],
        }
        text = _post(api, ask)["content"][0]["text"]
        assert "<new_description>" in text and "invoices" in text


def _post(api: FakeMessagesAPI, body: dict) -> dict:
    request = urllib.request.Request(
        api.url + "/v1/messages",
        json.dumps(body).encode(),
        {"x-api-key": "test-key", "content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())
