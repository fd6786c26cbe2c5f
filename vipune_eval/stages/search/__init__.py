"""search: the reference retrievers, plugins and both lanes (the binary lane with its preflight), per shard of personas."""
