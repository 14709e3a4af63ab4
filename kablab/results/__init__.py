"""The result pipeline: a block's raw files (frames, tool output, the TLB model's records)
turned into a schema-valid result, and a campaign's results loaded."""
