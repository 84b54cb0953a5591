"""What-if on a measured trace: extract each MoE layer's workload, calibrate the executor's
hardware from the same trace, and replay the layer as measured and under another schedule.

Sits above both `analysis/` (reads the trace) and `executor/` (simulates); neither imports it.
"""
