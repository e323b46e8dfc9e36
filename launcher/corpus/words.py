"""The tiny corpora's words: the notes' and the instruction set's one small world."""

NUMBERS = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
]  # fmt: skip
SLICES = [("v6e-16", 4, 4), ("v5p-16", 2, 4), ("v4-16", 2, 4), ("v6e-8", 1, 8), ("tpu7x-16", 2, 4)]
THINGS = ["checkpoint", "host", "slice", "bucket", "job", "step", "token", "batch"]
VERBS = ["saves", "keeps", "reads", "writes", "counts", "holds"]
