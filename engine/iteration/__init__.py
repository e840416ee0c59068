"""Iteration: batches and rows from the stream of output blocks, DataIterator, torch
batches and collation, and the local shuffle buffer."""
