"""Whole-model runs: profile a model, extract its hot operators as problems, plan by Amdahl's law, search each as a
child run, and verify the whole model with the winners swapped in (issue 20).

profile.py (torch.profiler, grouped by operator + module path + shapes) -> extract.py (problems in the one contract)
-> plan.py (Amdahl's law, budgets split by expected gain) -> pipeline.py (the model run and its child runs, resume)
-> verify.py (a subprocess loads the winning kernels into the model: never the trusted process).
"""
