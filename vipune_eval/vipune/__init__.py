"""The vipune binary and its contract: the client, the import format, the binary's fingerprint."""
