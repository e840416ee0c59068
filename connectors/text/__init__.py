"""Text files: ``read_text``, one row per line."""
