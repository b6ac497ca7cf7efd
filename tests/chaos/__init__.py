"""Fault injection for a Celery fleet (issue 40): traced DAGs whose tries write down every execution, the checker of
a run's invariants, and the faults (tests/chaos/faults.py) the tests and benchmarks/fleet_soak.py inject."""
