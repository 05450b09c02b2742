"""`--strategies`: the names it lists or auto[:K], read against the strategy registry, and the registry's
one-line summaries that close `pipebench run --help` and `pipebench train --help`.

The registry (bench/strategies/) says what each strategy is; reading what a user typed is the command
line's work, so it is done here."""
from __future__ import annotations

from pipebench.base.errors import UserError
from pipebench.bench.strategies import STRATEGIES, get_strategy, strategy_names

__all__ = ["AUTO_COUNT", "parse_strategies", "parse_auto", "help_text"]

AUTO_COUNT = 3
"""How many strategies `--strategies auto` runs besides single where it names no count (auto:K)."""


def parse_strategies(text: str | None) -> list[str]:
    """'single,ddp' -> ["single", "ddp"]; None -> every strategy. An empty name ('single,,ddp', 'single,')
    is refused, as `--micro-batches 2,,4` is: a stray comma is a typo, not a request for fewer strategies."""
    if text is None:
        return strategy_names()
    names = [n.strip() for n in text.split(",")]
    if not any(names):
        raise UserError(f"--strategies names no strategy (got {text!r}); choose from: {', '.join(STRATEGIES)}")
    if not all(names):
        raise UserError(f"--strategies names an empty strategy (got {text[:40]!r}); list names such as single,ddp")
    for name in names:
        get_strategy(name)
    return names


def parse_auto(text: str | None) -> int | None:
    """'auto' -> AUTO_COUNT, 'auto:K' -> K (run single and the K strategies predicted fastest); None otherwise.
    'auto:' names no count and is refused."""
    if text is None or not text.strip().startswith("auto"):
        return None
    from pipebench.base.text.parse import parse_int

    head, colon, count = text.strip().partition(":")
    if head == "auto" and (count or not colon):
        try:
            return parse_int(count, "--strategies auto:K", 1, len(STRATEGIES)) if count else AUTO_COUNT
        except UserError:
            pass
    raise UserError(f"--strategies auto takes a count of strategies to run besides single, e.g. auto:3 "
                    f"(got {text[:40]!r})")


def help_text() -> str:
    """The strategies, one line each, for `pipebench run --help`."""
    width = max(map(len, STRATEGIES))
    return "strategies:\n" + "\n".join(f"  {s.name:<{width}}  {s.summary}" for s in STRATEGIES.values())
