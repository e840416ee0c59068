"""The user-facing API: Dataset and its methods (one mixin per kind of method), the
``read_*`` / ``from_*`` functions, GroupedData, aggregations and the settings (DataContext)."""
