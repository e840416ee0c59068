"""NumPy files: ``read_numpy`` and ``Dataset.write_numpy`` (.npy, tensors as
Arrow's canonical tensor type)."""
