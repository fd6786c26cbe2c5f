"""One module or package per stage of the flow: download → filter → embed → search → score → report."""
