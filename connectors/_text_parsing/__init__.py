"""What the CSV and JSON Lines connectors share: reading files in chunks that
end at line ends, and the C headers and Python side of their native parsers."""
