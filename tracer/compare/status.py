"""How a stage, a step, a setting or a weight compares between the two sides of a diff: the status words.

The words are English in every language (JSON and CSV carry them); STATUS_WORDS is what a table shows, translated
at the edge.
"""

from tracer.messages import msg

EQUAL, DIFFERS, SHAPES_DIFFER, ONLY_A, ONLY_B = "equal", "differs", "shapes_differ", "only_in_a", "only_in_b"
NOT_RECORDED = "not_recorded"  # a stage the user's arrays do not hold: not compared, not a difference
STATUS_WORDS = {EQUAL: "equal", DIFFERS: "differs", SHAPES_DIFFER: "shapes differ", ONLY_A: "only in A", ONLY_B: "only in B",
                NOT_RECORDED: "not recorded"}
# the same words inside a sentence (the diff's summary): messages, translated with it
STATUS_MESSAGES = {EQUAL: msg("equal"), DIFFERS: msg("differs"), SHAPES_DIFFER: msg("shapes differ"), ONLY_A: msg("only in A"),
                   ONLY_B: msg("only in B"), NOT_RECORDED: msg("not recorded")}
