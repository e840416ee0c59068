"""shardflow's conformance kit, run against this connector."""

from {{ cookiecutter.__module_name }}.conformance import Conformance


class TestConformance(Conformance):
    """Every check of the kit; the hooks are defined in the package's conformance module."""
