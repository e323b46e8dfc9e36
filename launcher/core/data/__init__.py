"""A team's data: prepared datasets and their shards, the corpus's sources, near duplicates, the
checks a job's data gets, and the tokenizers that count it as MaxText does."""
