"""Shared by several stages: an edit here legitimately reruns many rules."""
