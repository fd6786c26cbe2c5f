"""filter: LongMemEval's JSON, streamed, into each view's pairs, rows, texts and qrels."""
