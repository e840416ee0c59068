"""streaming_split: one execution shared by n consumers, its coordinator (in this
process or a Ray actor) and the transports its iterators reach it by."""
