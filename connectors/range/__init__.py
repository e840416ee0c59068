"""``range`` and ``range_tensor``: integers (or tensors of them) generated inside
the read tasks."""
