"""The plan: logical operators as plain data, the optimizer's rules, and the planner
that turns an optimized logical plan into physical operators."""
