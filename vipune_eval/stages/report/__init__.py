"""report: report.json, report.md and the plots from every view's metrics."""
