"""Stacks and stages: one ``cdk.Stage`` per environment, built from ``config/<env>.yaml``."""
