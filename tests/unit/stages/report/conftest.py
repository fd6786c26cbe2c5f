"""The report's tests share one loaded report (support.report's fixture)."""

from support.report import loaded

__all__ = ["loaded"]  # a fixture: pytest finds it here, for every test below this folder
