"""sessiontree: LLM agent conversations stored as append-only trees (pi session format v3)."""
