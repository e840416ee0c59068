"""Binary files: ``read_binary_files``, one row per file with its bytes."""
