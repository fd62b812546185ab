"""Sizing planner for disaggregated prefill/decode: a pure-Python model of both serving modes (no AWS, no GPU).

``formulas`` holds the roofline and transfer formulas, ``serving`` the queueing model of colocated and
disaggregated serving, ``recommend`` the decisions, ``plan`` ties them into one :class:`Plan`.
"""
