"""What ``--trigger-rate-limit`` asks for: the limits a minute to keep to before any response
states them (or below what the key allows), or no pacing at all."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_skilltrigger.support.errors import InputError

RESOURCES = ("requests", "input-tokens", "output-tokens")


@dataclass(frozen=True)
class Limits:
    """Limits a minute, as ``--trigger-rate-limit=RPM[,ITPM[,OTPM]]`` gives them (None: not
    given)."""

    requests: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    def by_resource(self) -> dict[str, int]:
        values = (self.requests, self.input_tokens, self.output_tokens)
        return {name: v for name, v in zip(RESOURCES, values, strict=True) if v is not None}


@dataclass(frozen=True)
class RateLimitSetting:
    """What ``--trigger-rate-limit`` asks for: pacing on (by the headers, within ``preset``
    when given) or off."""

    enabled: bool = True
    preset: Limits = field(default_factory=Limits)

    @classmethod
    def parse(cls, text: str | None) -> RateLimitSetting:
        """``off``, or ``RPM[,ITPM[,OTPM]]`` (empty parts skipped); None: the headers alone.
        InputError for anything else."""
        if text is None or not str(text).strip():
            return cls()
        if str(text).strip().lower() == "off":
            return cls(enabled=False)
        parts = [p.strip() for p in str(text).split(",")]
        # ASCII digits only: str.isdigit() also takes "²", which int() refuses
        if len(parts) > 3 or not all(p == "" or (p.isascii() and p.isdigit()) for p in parts):
            raise InputError(
                "--trigger-rate-limit", "must be off or RPM[,ITPM[,OTPM]] in whole numbers"
            )
        values = [int(p) if p else None for p in parts] + [None] * (3 - len(parts))
        if any(v == 0 for v in values):
            raise InputError("--trigger-rate-limit", "limits must be above 0")
        return cls(True, Limits(*values))
