"""embed: every unique text once, with vipune's recipe, into the vector store and Parquet."""
