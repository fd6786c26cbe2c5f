"""search: the reference retrievers, plugins and the vipune lane (with its preflight), per shard of personas."""
