"""The async controller: rounds, branching, seed selection, budgets, stop rules, resume."""
