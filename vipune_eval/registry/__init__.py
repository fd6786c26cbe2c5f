"""The names a config may use: retrievers, granularities, measures, datasets, views."""
