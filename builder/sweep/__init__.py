"""Sweeps (`aiayn sweep`) and the paper-style results table (`aiayn results`).

plan: sweep file -> validated trials, and what each needs (run, resume or skip);
launch: the local pool and submitit; results and plot: the Table 3 layout of finished runs.
"""
