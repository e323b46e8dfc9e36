"""Data: a corpus prepared for MaxText's Grain pipeline and sent to the bucket (`data
prepare|show`)."""
