"""What `tracer probe` finds: one Property per property probed, with its result and the evidence."""

from __future__ import annotations

from dataclasses import dataclass

PASS, FAIL, NOT_APPLICABLE, UNMEASURED = "pass", "fail", "not applicable", "cannot measure"


@dataclass
class Property:
    name: str
    result: str  # pass | fail | not applicable
    evidence: str
    stage: str | None = None  # the first stage where the property broke
    position: int | None = None

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "result": self.result, "evidence": self.evidence, "stage": self.stage, "position": self.position}
